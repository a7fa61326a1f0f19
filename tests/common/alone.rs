//! What a test may not share with the tests running beside it. All integration tests are one
//! binary (`tests/it`), so they run as threads of one process, alongside every other module's:
//! a change to the process's own state would reach them all, and a resource of the whole machine
//! that one test budgets would be spent by the others.
//!
//! - [`own_process`]: run the calling test in a child process of its own, where it may change
//!   the process (the child-subreaper flag) without touching any other test.
//! - [`as_nobody`]: the lock held while anything runs as uid 65534, whose `RLIMIT_NPROC`
//!   allowance counts every process of that uid.

use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// Set in the child [`own_process`] starts, to the test it runs.
const OWN_PROCESS: &str = "MUR_TEST_OWN_PROCESS";

/// Whether the calling test, `test` (its full name, `module::function`), is to run its body here.
///
/// In the shared test process: runs the test binary again for just that test (`--exact`, one
/// thread), asserts that it ran and passed, replays its output into this test's, and returns
/// `false`: the caller returns at once. In that child: returns `true`, and the caller does its
/// work alone in its process, as when each test file was a binary of its own.
#[track_caller]
pub fn own_process(test: &str) -> bool {
    if std::env::var(OWN_PROCESS).is_ok_and(|running| running == test) {
        return true;
    }
    let binary = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(&binary)
        .args([test, "--exact", "--include-ignored", "--nocapture"])
        .arg("--test-threads=1")
        .env(OWN_PROCESS, test)
        .output()
        .unwrap_or_else(|e| panic!("running {} for {test}: {e}", binary.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Into this test's captured output (shown with a failure, or under --nocapture), indented:
    // the child's own `test result:` line is not one of this run's (`.ci/run` sums those).
    for line in stdout.lines() {
        println!("  {line}");
    }
    for line in stderr.lines() {
        eprintln!("  {line}");
    }
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{test} in a process of its own: {} (its output is above)",
        out.status
    );
    false
}

/// Whether this process is one [`own_process`] started for a single test.
pub fn in_own_process() -> bool {
    std::env::var_os(OWN_PROCESS).is_some()
}

/// Held while this process runs anything as uid 65534: `RLIMIT_NPROC` counts every process and
/// thread of the uid, so two such runs at once (from any two modules) would spend each other's
/// allowance, and a test that sets the limit would see the other's processes.
pub fn as_nobody() -> MutexGuard<'static, ()> {
    static NOBODY: Mutex<()> = Mutex::new(());
    NOBODY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
