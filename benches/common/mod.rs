//! What the benches share: the `mur` binary's path (and a "before" binary to compare it with),
//! failing and cleaning up (SIGKILL what is still alive, remove the temporary home), a temporary
//! `$HOME`, files and directories written or failed on, `/proc` readers, medians, percentiles,
//! duration formats and the summary table.
//!
//! Each bench takes it with `mod common;` and calls [`named`] or [`guarded`] first, so that its
//! messages and its temporary home carry its name.

// Each bench crate compiles this module and uses a subset of it.
#![allow(dead_code)]

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::Duration;

/// The glibc build of this commit, which Cargo built for the bench (`cargo bench` builds the
/// release profile): what the run bench compares the installed binary with.
pub const GLIBC: &str = env!("CARGO_BIN_EXE_mur");

/// The binary every bench measures: the one users run. `MUR_BENCH_BIN` if set (it must be named
/// `mur`: see [`Binaries::from_env`]); else what `install.sh` builds (the static musl binary),
/// installed into `<target dir>/bench-install` and built in `<target dir>/install-sh`, the
/// directory `tests/it/install.rs` builds in too, so either reuses the other's build.
pub fn mur() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| match std::env::var_os("MUR_BENCH_BIN") {
        Some(bin) => {
            let bin = PathBuf::from(bin);
            if bin.file_name() != Some(std::ffi::OsStr::new("mur")) {
                fail(&format!(
                    "MUR_BENCH_BIN={}: the binary must be named `mur` (a multicall binary picks \
                     its applet from its file name)",
                    bin.display()
                ));
            }
            bin
        }
        None => install(),
    })
}

/// The target dir: CARGO_TARGET_TMPDIR is `<target dir>/tmp`, wherever the target dir is.
fn target_dir() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap_or_else(|| fail("CARGO_TARGET_TMPDIR has no parent"))
}

/// Run `script PREFIX` (an install.sh) building in `build`, with `envs` besides; the `Err` says
/// why it failed, its stderr included.
fn install_sh(
    script: &Path,
    prefix: &Path,
    build: &Path,
    envs: &[(&str, &Path)],
) -> Result<(), String> {
    let out = Command::new(script)
        .arg(prefix)
        .env("CARGO_TARGET_DIR", build)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .output()
        .map_err(|err| format!("cannot run {}: {err}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// Run `install.sh <target dir>/bench-install`: the installed `mur`.
fn install() -> PathBuf {
    let target = target_dir();
    let prefix = target.join("bench-install");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh");
    eprintln!(
        "{} bench: building the binary users run: {} {} (MUR_BENCH_BIN=/path/to/mur measures \
         another)",
        name(),
        script.display(),
        prefix.display()
    );
    install_sh(&script, &prefix, &target.join("install-sh"), &[]).unwrap_or_else(|why| {
        fail(&format!(
            "{why}\nset MUR_BENCH_BIN=/path/to/mur to measure a binary built otherwise"
        ))
    });
    prefix.join("bin").join("mur")
}

/// The `mur` that commit `commit` of this repository builds: `git archive` unpacked into
/// `<target dir>/<commit>/src` and that commit's own `install.sh` run into
/// `<target dir>/<commit>/install` (building in `<target dir>/<commit>/build`), once: a later run
/// finds `install/bin/mur` there and builds nothing. The `Err` says why there is none.
pub fn built_at(commit: &str) -> Result<PathBuf, String> {
    let root = target_dir().join(commit);
    let bin = root.join("install/bin/mur");
    if bin.exists() {
        return Ok(bin);
    }
    println!(
        "  building commit {commit} with its install.sh into {} (once)",
        root.display()
    );
    let src = root.join("src");
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir_all(&src).map_err(|err| format!("{}: {err}", src.display()))?;
    let mut archive = Command::new("git")
        .arg("-C")
        .arg(env!("CARGO_MANIFEST_DIR"))
        .args(["archive", "--format=tar", commit])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|err| format!("git archive: {err}"))?;
    let unpacked = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(&src)
        .stdin(archive.stdout.take().expect("piped"))
        .status()
        .map_err(|err| format!("tar: {err}"))?;
    let archived = archive
        .wait()
        .map_err(|err| format!("git archive: {err}"))?;
    if !archived.success() || !unpacked.success() {
        return Err(format!(
            "git archive {commit} | tar -x: {archived}, {unpacked}"
        ));
    }
    // The unpacked tree has no `.git`, and the one git would find above it (this checkout's,
    // when the target dir is inside it) is another commit's: its `--version` says "unknown".
    let ceiling = [("GIT_CEILING_DIRECTORIES", root.as_path())];
    install_sh(
        &src.join("install.sh"),
        &root.join("install"),
        &root.join("build"),
        &ceiling,
    )?;
    if !bin.exists() {
        return Err("its install.sh installed no bin/mur".into());
    }
    Ok(bin)
}

/// Whether `value` names a commit rather than a file: 7 to 40 hexadecimal digits.
fn is_commit(value: &std::ffi::OsStr) -> bool {
    value
        .to_str()
        .is_some_and(|v| (7..=40).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `binary --version`, or the bench fails.
pub fn version_of(binary: &Path) -> String {
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .unwrap_or_else(|err| fail(&format!("{}: {err}", binary.display())));
    if !out.status.success() {
        fail(&format!(
            "{}: `--version` failed ({})",
            binary.display(),
            out.status
        ));
    }
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// How a bench's first lines name the measured `binary`: where it came from, and its version.
pub fn describe(binary: &Path) -> String {
    let origin = if std::env::var_os("MUR_BENCH_BIN").is_some() {
        "MUR_BENCH_BIN"
    } else {
        "built by install.sh, what users run"
    };
    format!("{origin}; {}", version_of(binary))
}

/// Which bench this is, and how long [`cleanup`] lets what it SIGKILLed end before removing the
/// temporary home.
struct Bench {
    name: &'static str,
    settle: Duration,
}

static BENCH: OnceLock<Bench> = OnceLock::new();
/// Pids of the processes alive now, and the temporary home: what a failure or panic cleans up.
static LIVE: Mutex<Vec<u32>> = Mutex::new(Vec::new());
static HOME: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Name the bench in its messages (`<name> bench: …`) and its temporary homes.
pub fn named(name: &'static str) {
    let _ = BENCH.set(Bench {
        name,
        settle: Duration::ZERO,
    });
}

/// The same, and a panic prints `<name> bench: …` and runs [`cleanup`], which waits `settle`
/// after its SIGKILLs before removing the home.
pub fn guarded(name: &'static str, settle: Duration) {
    let _ = BENCH.set(Bench { name, settle });
    std::panic::set_hook(Box::new(move |info| {
        eprintln!("{name} bench: {info}");
        cleanup();
    }));
}

fn name() -> &'static str {
    BENCH.get().map_or("mur", |b| b.name)
}

/// Count `pid` among the processes [`cleanup`] SIGKILLs.
pub fn register(pid: u32) {
    LIVE.lock().unwrap_or_else(|p| p.into_inner()).push(pid);
}

/// `pid` is reaped: no longer one to SIGKILL.
pub fn unregister(pid: u32) {
    LIVE.lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|p| *p != pid);
}

/// Spawn `command` (a `mur` with its arguments) with `HOME=home` in `cwd`, stdin null, stdout
/// and stderr piped, and [`register`] it; the child (its stderr still in it) and its stdout.
pub fn spawn_mur(
    command: &mut Command,
    home: &Path,
    cwd: &Path,
) -> (Child, BufReader<ChildStdout>) {
    let mut child = command
        .env("HOME", home)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| {
            let program = Path::new(command.get_program()).display().to_string();
            fail(&format!("cannot run {program}: {err}"))
        });
    register(child.id());
    let stdout = BufReader::new(child.stdout.take().unwrap_or_else(|| fail("no stdout")));
    (child, stdout)
}

/// SIGKILL every process still registered and remove the temporary home.
pub fn cleanup() {
    let live: Vec<u32> = std::mem::take(&mut *LIVE.lock().unwrap_or_else(|p| p.into_inner()));
    for pid in live {
        signal(pid, libc::SIGKILL);
    }
    if let Some(home) = HOME.lock().unwrap_or_else(|p| p.into_inner()).take() {
        thread::sleep(BENCH.get().map_or(Duration::ZERO, |b| b.settle));
        let _ = std::fs::remove_dir_all(home);
    }
}

/// Print `why`, clean up and exit 1. A second failure while the first is cleaning up (another
/// client thread seeing the session it killed) waits for that exit instead of racing it.
pub fn fail(why: &str) -> ! {
    static FAILING: AtomicBool = AtomicBool::new(false);
    if FAILING.swap(true, Ordering::AcqRel) {
        loop {
            thread::park();
        }
    }
    eprintln!("{} bench: {why}", name());
    cleanup();
    std::process::exit(1)
}

/// The first lines of the output: the bench, the binary, the machine and the home.
pub fn banner(home: &Home) {
    println!("mur {} benchmark", name());
    let measured = mur();
    println!("  binary  {} ({})", measured.display(), describe(measured));
    println!(
        "  machine {} CPUs, load average {}, bench pid {}, HOME {}",
        thread::available_parallelism().map_or(0, |n| n.get()),
        loadavg(),
        std::process::id(),
        home.root().display()
    );
}

/// The `mur` measured, and the one it is compared with when the bench's environment variable
/// (`MUR_PS_BENCH_BEFORE`, `MUR_RUN_BENCH_BEFORE`) names one: before and after a change, in the
/// same run, so both see the same machine and the same load.
pub struct Binaries {
    /// How the bench's output names the binary measured (`mur ps`).
    pub label: &'static str,
    pub after: PathBuf,
    pub before: Option<PathBuf>,
    /// How the output names `before`: `before`, or `glibc` for [`Binaries::beside_glibc`]'s.
    pub before_label: &'static str,
}

impl Binaries {
    /// The binary Cargo built, and the one `var` names if set; prints the latter's path and
    /// `--version`, then an empty line.
    ///
    /// The before binary must be named `mur`: a multicall binary picks its applet from its file
    /// name, and a copy named `mur-before` would be asked for an applet `before` (exit 127), its
    /// failure read as the bench's. So it fails here, before anything is measured. A value that
    /// names no file but a commit (`MUR_RUN_BENCH_BEFORE=5fdf65b`) is that commit's binary,
    /// built by its own install.sh ([`built_at`]).
    pub fn from_env(var: &str, label: &'static str) -> Self {
        let before = std::env::var_os(var).map(|value| {
            if is_commit(&value) && !Path::new(&value).exists() {
                let commit = value.to_string_lossy();
                built_at(&commit).unwrap_or_else(|why| fail(&format!("{var}={commit}: {why}")))
            } else {
                PathBuf::from(value)
            }
        });
        if let Some(before) = &before {
            if before.file_name() != Some(std::ffi::OsStr::new("mur")) {
                fail(&format!(
                    "{var}={}: the before binary must be named `mur` (a multicall binary picks \
                     its applet from its file name); copy it as DIR/mur and set {var}=DIR/mur",
                    before.display()
                ));
            }
            println!("  before  {} ({})", before.display(), version_of(before));
        }
        println!();
        Self {
            label,
            after: mur().to_path_buf(),
            before,
            before_label: "before",
        }
    }

    /// The same, but with no `var` set the binary compared with is the glibc build ([`GLIBC`]),
    /// labelled `glibc`: what the installed binary must keep up with.
    pub fn beside_glibc(var: &str, label: &'static str) -> Self {
        if std::env::var_os(var).is_some() {
            return Self::from_env(var, label);
        }
        println!("  glibc   {GLIBC} ({})", version_of(Path::new(GLIBC)));
        println!();
        Self {
            label,
            after: mur().to_path_buf(),
            before: Some(PathBuf::from(GLIBC)),
            before_label: "glibc",
        }
    }

    /// Each binary, labelled: the one measured first, then the before one if any.
    pub fn each(&self) -> Vec<(&'static str, &Path)> {
        let mut each = vec![(self.label, self.after.as_path())];
        if let Some(before) = &self.before {
            each.push((self.before_label, before.as_path()));
        }
        each
    }
}

/// A temporary `$HOME`, removed when dropped.
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// `mur-bench-<name>-<pid>` in the temporary directory, made empty; [`cleanup`] removes it
    /// too.
    pub fn new() -> Self {
        let home = Self::make(format!("mur-bench-{}-{}", name(), std::process::id()));
        *HOME.lock().unwrap_or_else(|p| p.into_inner()) = Some(home.root.clone());
        home
    }

    /// `mur-bench-<name>-<pid>-<tag>`: one of several, removed only when dropped.
    pub fn tagged(tag: &str) -> Self {
        Self::make(format!("mur-bench-{}-{}-{tag}", name(), std::process::id()))
    }

    fn make(dir: String) -> Self {
        let root = std::env::temp_dir().join(dir);
        let _ = std::fs::remove_dir_all(&root);
        mkdir(&root);
        Self { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
        let mut home = HOME.lock().unwrap_or_else(|p| p.into_inner());
        if home.as_ref() == Some(&self.root) {
            *home = None;
        }
    }
}

pub fn mkdir(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap_or_else(|err| fail(&format!("{}: {err}", dir.display())));
}

pub fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap_or_else(|err| fail(&format!("{}: {err}", path.display())));
}

/// Processes whose environment holds `HOME=<home>`: what this bench started, and theirs.
pub fn leftovers(home: &Path) -> Vec<u32> {
    let needle = format!("HOME={}\0", home.display()).into_bytes();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split_inclusive(|b| *b == 0)
                    .any(|var| var == needle.as_slice())
            })
        })
        .collect()
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

pub fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) takes plain integers; `pid` is a child of ours not yet reaped.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Rows of cells, each column as wide as its widest cell, indented by two spaces.
pub fn table<const N: usize>(rows: &[[String; N]]) {
    let widths: Vec<usize> = (0..N)
        .map(|c| rows.iter().map(|row| row[c].len()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        println!("  {}", cells.join("  ").trim_end());
    }
}

pub fn median(xs: &[Duration]) -> Duration {
    let mut sorted = xs.to_vec();
    sorted.sort_unstable();
    match sorted.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,
    }
}

/// The `p`-th percentile (nearest rank; 0 is the minimum, 100 the maximum).
pub fn percentile(xs: &[Duration], p: usize) -> Duration {
    let mut sorted = xs.to_vec();
    sorted.sort_unstable();
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * sorted.len()).div_ceil(100).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// How a bench writes its durations: each keeps the units and spreads it has always printed.
#[derive(Clone, Copy)]
pub struct Style {
    /// From 1 s up, seconds (`1.234 s`) rather than milliseconds.
    pub seconds: bool,
    /// With `seconds`, from 10 s up, seconds to a tenth (`12.3 s`).
    pub tenths_from_10s: bool,
    /// Below 1 ms, whole microseconds (`123 µs`) rather than milliseconds.
    pub micros: bool,
    /// [`Style::spread`] gives the 90th percentile and the count too.
    pub p90_and_count: bool,
}

impl Style {
    /// Milliseconds (`12.34 ms`), but for what the style writes in seconds or microseconds.
    pub fn ms(self, d: Duration) -> String {
        let secs = d.as_secs_f64();
        if self.seconds && self.tenths_from_10s && secs >= 10.0 {
            format!("{secs:.1} s")
        } else if self.seconds && secs >= 1.0 {
            format!("{secs:.3} s")
        } else if self.micros && secs < 0.001 {
            format!("{:.0} µs", secs * 1e6)
        } else {
            format!("{:.2} ms", secs * 1000.0)
        }
    }

    /// `median M  (min A, max B)`, with `p90 P` and `n N` if the style says so.
    pub fn spread(self, xs: &[Duration]) -> String {
        self.spread_noting(xs, "")
    }

    /// The same with `note` (`, 7 runs`) last inside the parentheses.
    pub fn spread_noting(self, xs: &[Duration], note: &str) -> String {
        let (p90, count) = if self.p90_and_count {
            (
                format!(", p90 {}", self.ms(percentile(xs, 90))),
                format!(", n {}", xs.len()),
            )
        } else {
            (String::new(), String::new())
        };
        format!(
            "median {}  (min {}{p90}, max {}{count}{note})",
            self.ms(median(xs)),
            self.ms(xs.iter().copied().min().unwrap_or_default()),
            self.ms(xs.iter().copied().max().unwrap_or_default()),
        )
    }
}
