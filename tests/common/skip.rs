//! A test that cannot do its check here (not root, no `strace`, no tmpfs, no PyPI) says so, in
//! two places: a loud line on stderr, and a line in `target/tmp/skipped.tsv` that `.ci/run` reads
//! back into its closing summary. libtest itself has no "skipped" outcome, so such a test still counts
//! as passed; this is how the run tells the difference.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::panic::Location;
use std::path::{Path, PathBuf};

/// `skipped.tsv` under Cargo's `CARGO_TARGET_TMPDIR` (`target/tmp/`): one `test<TAB>reason`
/// line per skip, appended by every test of a run (and by a test in a process of its own,
/// `super::alone::own_process`). `.ci/run` removes it before
/// `cargo test` and prints it after.
fn skipped_tsv() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped.tsv")
}

/// Record that `test` (the test function's name) skipped its check, and why. Call it just before
/// the early `return`. The line names the test as `<module file>::<test>` (the file is the
/// caller's, e.g. `leaks::a_formation_task_under_strace_…`).
///
/// The stderr line goes straight to the process's stderr, past the harness's capture, so it shows
/// even when the test passes. The file line is one `write` on a file opened for appending, so
/// tests running in parallel (in one process or several) never interleave within a line.
#[track_caller]
pub fn skipped(test: &str, reason: &str) {
    let file = Path::new(Location::caller().file());
    let binary = file.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
    let name = format!("{binary}::{test}");
    // One line per skip, whatever the reason holds.
    let reason = reason.replace(['\t', '\n', '\r'], " ");
    let loud = format!("\n*** SKIPPED {name}: {reason} ***\n");
    let _ = std::io::stderr().lock().write_all(loud.as_bytes());

    let path = skipped_tsv();
    if let Some(dir) = path.parent() {
        let _ = fs::create_dir_all(dir);
    }
    let recorded = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(format!("{name}\t{reason}\n").as_bytes()));
    if let Err(err) = recorded {
        let _ = writeln!(
            std::io::stderr(),
            "*** (could not record the skip in {}: {err}) ***",
            path.display()
        );
    }
}
