//! How long `mur ps` takes, and how much memory it needs, on a crowded machine — next to
//! verifying the same records one after another in this process. A benchmark, not a test: it
//! prints figures and asserts no timing.
//!
//! Run with `cargo bench --bench ps`. It measures the binary users run: the static one
//! `install.sh` builds (installed into `<target dir>/bench-install`, built in
//! `<target dir>/install-sh`; the first run builds it), or the one `MUR_BENCH_BIN=/path/to/mur`
//! names; its first lines say which. The figures are wall
//! times, CPU times and peak RSS (`ru_maxrss`, the kernel's `VmHWM`, from `wait4`) of the real
//! binary, spawned with `HOME` set to a temporary directory this bench makes (and removes);
//! nothing in the real `~/.murmur` is read or touched. `MUR_PS_BENCH_BEFORE=/path/to/mur` runs
//! every `mur ps` figure with that binary too, in the same run (before/after a change); it must be
//! named `mur`, as a multicall binary picks its applet from its file name.
//!
//! Scenarios, at 1,000 and at 10,000 records:
//!
//! - (a) every record live: it names a single-threaded helper process this bench starts (`cat`;
//!   layers 1 and 2 pass — not the bench itself, which is an ancestor of the `mur ps` it runs,
//!   and which mur never signals nor so verifies), and its door is one of 10,000 listeners this
//!   process holds on 127.0.0.1 ([`doors`]: two threads on `epoll`), each answering with a card
//!   naming that record's session;
//! - (a') at 1,000, the same with every door answering a millisecond after the request, as a
//!   capsule's door busy with other work might: what waiting on doors costs each way;
//! - (b) the same with a fifth of the doors (200, 2,000) accepting and never answering (the
//!   probe's 5 s response deadline decides them);
//! - (c) every record gone: each names a process that exited and was reaped (1,000 of them, so
//!   at 10,000 each pid is named by ten records). `mur ps` prunes them, so they are written again
//!   before every run;
//! - (d) bad input at scale: 10,000 files of which a third are garbage, symbolic links and FIFOs,
//!   and of the 6,667 records 1,000 behind doors that accept and then trickle their answer one
//!   byte a second: the listing must still end within the probe's deadline, its memory bounded.
//!
//! The sequential baseline runs in this process: `mur::running::scan_pruning`, then
//! `mur::running::verify` on each record in turn (pruning the gone ones), as the seed's loop
//! does. For (b) that would take 200 (2,000) × 5 s, so it verifies only the first
//! [`SILENT_SAMPLE`] silent doors and extrapolates the rest at their measured mean; the output
//! says so.

// Bench scaffolding reaps its children with wait4 and serves its doors with epoll; each block
// says why it is sound. `unsafe` stays denied in the product, outside `src/sys`.
#![allow(unsafe_code)]

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use mur::id::SessionId;
use mur::json::record::RunningRecord;
use mur::running::{self, Liveness};

mod common;
#[path = "ps/doors.rs"]
mod doors;
use common::{Binaries, Home, Style, fail, median, mkdir, mur, table, write};
use doors::{Doors, Mode};

/// Milliseconds below 1 s, seconds above (to a tenth from 10 s); a spread is the median, minimum
/// and maximum.
const STYLE: Style = Style {
    seconds: true,
    tenths_from_10s: true,
    micros: false,
    p90_and_count: false,
};

const SMALL: usize = 1000;
const LARGE: usize = 10_000;
/// A fifth of the doors are silent in (b).
const SILENT_SHARE: usize = 5;
/// Silent doors the sequential baseline of (b) really waits on.
const SILENT_SAMPLE: usize = 3;
/// (d): doors that trickle, and one file in three junk.
const TRICKLING: usize = 1000;
const JUNK_SHARE: usize = 3;
/// Threads serving the fake doors.
const DOOR_THREADS: usize = 2;
/// Reaped processes the gone records name.
const REAPED: usize = 1000;
const RUNS: usize = 7;
const RUNS_LARGE: usize = 5;
const RUNS_SILENT: usize = 3;
const RUNS_SEQUENTIAL: usize = 5;
const RUNS_SEQUENTIAL_LARGE: usize = 3;
const RUNS_BAD: usize = 3;
const RUNS_EMPTY: usize = 100;
pub const CARD_URI: &str = "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1";

fn main() {
    // `cargo bench` passes `--bench`; this harness takes no options.
    common::named("ps");
    let limit = raise_open_files();
    let size = print_binary(limit);
    let binaries = Binaries::from_env("MUR_PS_BENCH_BEFORE", "mur ps");

    // Empty home first, while this process is still quiet.
    let empty = empty_home(&binaries);

    let stamp = unix_ms();
    let ids: Vec<String> = (0..LARGE).map(|i| session_id(stamp, i)).collect();
    let mut helper = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|err| fail(&format!("cannot run cat: {err}")));
    let helper_start = mur::sys::proc::process_start_token(helper.id())
        .unwrap_or_else(|| fail("cannot read the helper's start time"));
    let opened = Instant::now();
    let doors = Doors::open(&ids, DOOR_THREADS);
    println!(
        "doors: {} listeners on 127.0.0.1, served by {DOOR_THREADS} threads on epoll, opened in {}",
        doors.addrs.len(),
        STYLE.ms(opened.elapsed())
    );
    println!(
        "every live record names one helper process: cat, pid {}",
        helper.id()
    );
    let records: Vec<RunningRecord> = doors
        .addrs
        .iter()
        .zip(&ids)
        .map(|(addr, id)| record(id, &addr.to_string(), helper.id(), &helper_start))
        .collect();
    if let Some(n) = std::env::var("MUR_PS_BENCH_HOLD")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        hold(&records[..usize::min(n, LARGE)]);
    }
    let reaped = reaped_processes(REAPED);

    let mut rows = Vec::new();
    for n in [SMALL, LARGE] {
        let live = Home::tagged(&format!("live-{n}"));
        live.write(&records[..n]);
        rows.push(live_scenario(&binaries, &live, n));
        if n == SMALL {
            rows.push(delayed_scenario(&binaries, &doors, &live, n));
        }
        rows.push(silent_scenario(&binaries, &doors, &live, &ids[..n]));
        doors.set_all(Mode::Answer);
        rows.push(gone_scenario(&binaries, stamp, &reaped, n));
    }
    rows.push(bad_input_scenario(&binaries, &doors, &records));
    // Its stdin closes when this process exits, however it exits; end it now anyway.
    let _ = helper.kill();
    let _ = helper.wait();
    print_summary(&binaries, &rows, &empty, size);
}

/// `MUR_PS_BENCH_HOLD=N`: write a home of the first `N` live records, print it, and serve their
/// doors until stdin ends, measuring nothing — for profiling `mur ps` by hand
/// (`HOME=… perf record -g mur ps`).
fn hold(records: &[RunningRecord]) -> ! {
    let home = Home::tagged("hold");
    home.write(records);
    println!(
        "HOME={} holds {} live records; end stdin to stop",
        home.root().display(),
        records.len()
    );
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(home);
    std::process::exit(0)
}

/// Raise this process's soft descriptor limit to its hard one (10,000 listeners, their
/// connections, and the baseline's sockets); the limit in effect. `mur ps` inherits it.
fn raise_open_files() -> u64 {
    mur::sys::socket::open_files_limit(u64::MAX)
}

/// Prints the binary's path and size, the machine and the descriptor limit; the size in bytes.
fn print_binary(limit: u64) -> u64 {
    let binary = mur().to_path_buf();
    let size = std::fs::metadata(&binary)
        .unwrap_or_else(|err| fail(&format!("{}: {err}", binary.display())))
        .len();
    println!("mur ps benchmark");
    println!(
        "  binary  {} ({})",
        binary.display(),
        common::describe(&binary)
    );
    println!("  size    {size} bytes = {:.3} MiB", mib(size));
    println!(
        "  machine {} CPUs, load average {}, bench pid {}, open files limit {limit}",
        thread::available_parallelism().map_or(0, |n| n.get()),
        common::loadavg(),
        std::process::id()
    );
    size
}

/// `bytes` in MiB.
fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Medians of several runs of one binary.
#[derive(Clone, Copy, Default)]
struct Figures {
    wall: Duration,
    cpu: Duration,
    /// From one more run, under `/usr/bin/time` ([`peak_rss`]); `None` without it.
    hwm_kib: Option<u64>,
}

impl Figures {
    /// `wall W (cpu C, peak RSS R MiB)`.
    fn text(self) -> String {
        format!(
            "{} (cpu {}, {})",
            STYLE.ms(self.wall),
            STYLE.ms(self.cpu),
            rss_text(self.hwm_kib)
        )
    }
}

/// `peak RSS R MiB`, or that it was not measured.
fn rss_text(hwm_kib: Option<u64>) -> String {
    hwm_kib.map_or("peak RSS not measured".into(), |kib| {
        format!("peak RSS {:.2} MiB", kib as f64 / 1024.0)
    })
}

/// One summary row: the scenario, `mur ps` (and the binary before), the baseline, the goal.
struct Row {
    scenario: String,
    after: Figures,
    before: Option<Figures>,
    /// The sequential baseline's median, and whether it is an estimate.
    baseline: Option<(Duration, bool)>,
    goal: &'static str,
}

/// Run `mur ps` `runs` times with each binary (after `prepare`, which rewrites what a run
/// prunes), check each listing, and print the spread; then once more for its peak RSS. The
/// figures of each binary.
fn measure(
    binaries: &Binaries,
    home: &Home,
    runs: usize,
    expect: Expect,
    prepare: &dyn Fn(),
) -> (Figures, Option<Figures>) {
    let mut figures = Vec::new();
    for (label, binary) in binaries.each() {
        let done: Vec<PsRun> = (0..runs)
            .map(|_| {
                prepare();
                let run = ps(binary, home.root());
                expect.check(&run, label);
                run
            })
            .collect();
        let walls: Vec<Duration> = done.iter().map(|r| r.wall).collect();
        let cpus: Vec<Duration> = done.iter().map(|r| r.cpu).collect();
        prepare();
        let of = Figures {
            wall: median(&walls),
            cpu: median(&cpus),
            hwm_kib: peak_rss(binary, home.root()),
        };
        println!(
            "  {label:<11} {}",
            STYLE.spread_noting(&walls, &format!(", {runs} runs"))
        );
        println!(
            "              cpu {} (median, user + sys), {} (one more run)",
            STYLE.ms(of.cpu),
            rss_text(of.hwm_kib)
        );
        figures.push(of);
    }
    (figures[0], figures.get(1).copied())
}

/// The peak RSS (`VmHWM`), KiB, of one `mur ps` of `binary` with `HOME=home`, as GNU time
/// reports it; `None` without `/usr/bin/time`.
///
/// Not this process's own `wait4`: a child forked from this process (10,000 listeners and their
/// buffers) carries its resident pages until it execs, and the kernel counts them in the
/// child's peak. `time`, small, forks `mur ps` afresh and reports that child's own peak.
fn peak_rss(binary: &Path, home: &Path) -> Option<u64> {
    let report = std::env::temp_dir().join(format!("mur-bench-ps-{}-rss", std::process::id()));
    let status = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&report)
        .arg(binary)
        .arg("ps")
        .env("HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    let kib = std::fs::read_to_string(&report).ok()?.trim().parse().ok();
    let _ = std::fs::remove_file(&report);
    kib.filter(|_| status.success())
}

/// Time `mur ps` and the sequential loop on a home of `n` records all live with answering doors;
/// print them, and layers 1 and 2 alone.
fn live_scenario(binaries: &Binaries, home: &Home, n: usize) -> Row {
    println!();
    println!("(a) {n} records, all live, every door answering");
    let expect = Expect {
        running: n,
        unreachable: 0,
        pruned: 0,
    };
    expect.check(&ps(&binaries.after, home.root()), "warm-up");
    let (after, before) = measure(binaries, home, runs_at(n), expect, &|| {});
    let seq_runs: Vec<Duration> = (0..if n == SMALL {
        RUNS_SEQUENTIAL
    } else {
        RUNS_SEQUENTIAL_LARGE
    })
        .map(|_| {
            let seq = sequential(&home.running(), &HashSet::new());
            check_seq(&seq, n, 0, 0, "(a) sequential");
            seq.wall
        })
        .collect();
    let seq = report_sequential(&seq_runs, "list + verify each", after.wall);
    println!(
        "  layers 1-2 alone (kill + /proc/<pid>/stat), in-process, {n} records: {}",
        STYLE.ms(layers_1_and_2(home))
    );
    Row {
        scenario: format!("(a) {n} live, doors answer"),
        after,
        before,
        baseline: Some((seq, false)),
        goal: if n == SMALL {
            "seq/ps >= 2x; peak RSS <= 8 MiB"
        } else {
            "<= 1 s"
        },
    }
}

/// Print the sequential loop's runs (`what` it did) and how it compares with `mur ps`'s median;
/// its median.
fn report_sequential(runs: &[Duration], what: &str, ps: Duration) -> Duration {
    let seq = median(runs);
    println!(
        "  sequential  {}",
        STYLE.spread_noting(runs, &format!(", {} runs, in-process {what}", runs.len()))
    );
    println!("  ratio       sequential / mur ps = {:.1}x", ratio(seq, ps));
    seq
}

/// (a') the `live` home of `n` records again, every door answering [`doors::DELAY`] after the
/// request, as a capsule's door busy with other work might: what waiting costs.
fn delayed_scenario(binaries: &Binaries, doors: &Doors, live: &Home, n: usize) -> Row {
    println!();
    println!(
        "(a') {n} records, all live, every door answering {} after the request",
        STYLE.ms(doors::DELAY)
    );
    for door in 0..n {
        doors.set(door, Mode::Delayed);
    }
    let expect = Expect {
        running: n,
        unreachable: 0,
        pruned: 0,
    };
    let (after, before) = measure(binaries, live, RUNS, expect, &|| {});
    let seq_runs: Vec<Duration> = (0..RUNS_SILENT)
        .map(|_| {
            let seq = sequential(&live.running(), &HashSet::new());
            check_seq(&seq, n, 0, 0, "(a') sequential");
            seq.wall
        })
        .collect();
    let seq = report_sequential(&seq_runs, "list + verify each", after.wall);
    doors.set_all(Mode::Answer);
    Row {
        scenario: format!("(a') {n} live, doors answer in 1 ms"),
        after,
        before,
        baseline: Some((seq, false)),
        goal: "-",
    }
}

fn runs_at(n: usize) -> usize {
    if n == SMALL { RUNS } else { RUNS_LARGE }
}

/// The median time of layers 1 and 2 alone over every record of `home`, in this process.
fn layers_1_and_2(home: &Home) -> Duration {
    let scan = running::scan(&open_dir(&home.running())).unwrap_or_else(|err| fail(&err));
    median(
        &(0..RUNS)
            .map(|_| {
                let start = Instant::now();
                for entry in &scan.entries {
                    if running::process_liveness(&entry.record).is_some() {
                        fail("a record failed layers 1-2");
                    }
                }
                start.elapsed()
            })
            .collect::<Vec<_>>(),
    )
}

/// (b) the `live` home of the records of `ids` again, a fifth of its doors silent: every fifth one, so
/// they spread across the listing.
fn silent_scenario(binaries: &Binaries, doors: &Doors, live: &Home, ids: &[String]) -> Row {
    let n = ids.len();
    let silent = n / SILENT_SHARE;
    let silent_ids: HashSet<String> = (0..n)
        .filter(|i| i % SILENT_SHARE == 0)
        .map(|i| {
            doors.set(i, Mode::Silent);
            ids[i].clone()
        })
        .collect();
    println!();
    println!("(b) {n} records, all live, {silent} doors accept and never answer");
    let expect = Expect {
        running: n - silent,
        unreachable: silent,
        pruned: 0,
    };
    let (after, before) = measure(binaries, live, RUNS_SILENT, expect, &|| {});
    let seq = sequential(&live.running(), &silent_ids);
    check_seq(&seq, n - silent, SILENT_SAMPLE, 0, "(b) sequential sample");
    let per_silent = seq.silent_time / seq.silent_verified.max(1) as u32;
    let estimate = seq.wall + per_silent * seq.silent_skipped as u32;
    println!(
        "  sequential  ~{} ESTIMATED: measured {} over {} answering + {} silent doors \
         ({} per silent door), the other {} silent doors extrapolated at that mean, not run",
        STYLE.ms(estimate),
        STYLE.ms(seq.wall),
        seq.live,
        seq.silent_verified,
        STYLE.ms(per_silent),
        seq.silent_skipped
    );
    println!(
        "  ratio       sequential (estimated) / mur ps = {:.0}x",
        ratio(estimate, after.wall)
    );
    Row {
        scenario: format!("(b) {n} live, {silent} silent"),
        after,
        before,
        baseline: Some((estimate, true)),
        goal: "~5 s (one probe timeout)",
    }
}

/// (c) `n` records naming reaped processes (session ids stamped `stamp + 1`).
fn gone_scenario(binaries: &Binaries, stamp: u64, reaped: &[(u32, String)], n: usize) -> Row {
    println!();
    println!("(c) {n} records, all gone (reaped pids), rewritten before every run");
    let gone = Home::tagged(&format!("gone-{n}"));
    let workdir = gone.root().to_path_buf();
    let records: Vec<RunningRecord> = (0..n)
        .map(|i| {
            let (pid, start) = &reaped[i % reaped.len()];
            let mut r = record(&session_id(stamp + 1, i), "127.0.0.1:9", *pid, start);
            r.workdir = workdir.clone();
            r
        })
        .collect();
    let reused = reaped
        .iter()
        .filter(|(pid, _)| mur::sys::proc::pid_is_alive(*pid))
        .count();
    if reused > 0 {
        println!("  note: {reused} of the reaped pids are held again (they fail layer 2 instead)");
    }
    let expect = Expect {
        running: 0,
        unreachable: 0,
        pruned: n,
    };
    let (after, before) = measure(binaries, &gone, runs_at(n), expect, &|| {
        gone.write(&records)
    });
    let seq_runs: Vec<Duration> = (0..runs_at(n))
        .map(|_| {
            gone.write(&records);
            let seq = sequential(&gone.running(), &HashSet::new());
            check_seq(&seq, 0, 0, n, "(c) sequential");
            seq.wall
        })
        .collect();
    let seq = report_sequential(&seq_runs, "list + verify + prune", after.wall);
    Row {
        scenario: format!("(c) {n} gone, pruned"),
        after,
        before,
        baseline: Some((seq, false)),
        goal: "well under 1 s",
    }
}

/// (d) 10,000 files, a third of them junk (garbage, links, FIFOs, in turn), and of the records
/// the first [`TRICKLING`] behind doors that trickle a byte a second. Rewritten before every run.
fn bad_input_scenario(binaries: &Binaries, doors: &Doors, records: &[RunningRecord]) -> Row {
    let junk = LARGE / JUNK_SHARE;
    let valid = LARGE - junk;
    println!();
    println!(
        "(d) {LARGE} files: {junk} junk (garbage, symbolic links, FIFOs), {valid} records of which \
         {TRICKLING} behind doors that trickle a byte a second; rewritten before every run"
    );
    for door in 0..TRICKLING {
        doors.set(door, Mode::Trickle);
    }
    let home = Home::tagged("bad");
    let target = home.root().join("elsewhere.json");
    write(&target, &records[0].to_bytes());
    let prepare = || {
        home.write(&records[..valid]);
        let running = home.running();
        for k in 0..junk {
            let path = running.join(format!("junk-{k:05}.json"));
            match k % 3 {
                0 => write(&path, b"{\"session_id\": \"ses_"),
                1 => std::os::unix::fs::symlink(&target, &path)
                    .unwrap_or_else(|err| fail(&format!("{}: {err}", path.display()))),
                _ => mkfifo(&path),
            }
        }
    };
    let expect = Expect {
        running: valid - TRICKLING,
        unreachable: TRICKLING,
        pruned: junk,
    };
    let (after, before) = measure(binaries, &home, RUNS_BAD, expect, &prepare);
    doors.set_all(Mode::Answer);
    println!("  deadline    a probe's: 2 s to connect, 5 s for the answer");
    Row {
        scenario: format!("(d) {LARGE} files, {junk} junk, {TRICKLING} trickling"),
        after,
        before,
        baseline: None,
        goal: "within the probe deadline",
    }
}

/// A FIFO at `path`.
fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .unwrap_or_else(|_| fail("a path with a NUL"));
    // SAFETY: `c` is a live NUL-terminated path.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        fail(&format!(
            "mkfifo {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
}

/// Times and prints `mur ps` in a home with no `.murmur`: the floor of every figure.
fn empty_home(binaries: &Binaries) -> (Figures, Option<Figures>) {
    let empty = Home::tagged("empty");
    for _ in 0..10 {
        ps(&binaries.after, empty.root());
    }
    println!("empty home ($HOME with no .murmur)");
    let expect = Expect {
        running: 0,
        unreachable: 0,
        pruned: 0,
    };
    measure(binaries, &empty, RUNS_EMPTY, expect, &|| {})
}

/// Prints the summary table.
fn print_summary(binaries: &Binaries, rows: &[Row], empty: &(Figures, Option<Figures>), size: u64) {
    println!();
    println!(
        "summary (medians; 'mur ps' includes spawning the binary, 'sequential' runs in-process)"
    );
    let mut table_rows = vec![[
        "scenario".to_string(),
        "mur ps: wall (cpu, peak RSS)".to_string(),
        "before".to_string(),
        "sequential".to_string(),
        "seq/ps".to_string(),
        "goal".to_string(),
    ]];
    let before_text = |f: Option<Figures>| f.map_or("-".to_string(), Figures::text);
    table_rows.push([
        format!("empty home ({RUNS_EMPTY} runs)"),
        empty.0.text(),
        before_text(empty.1),
        "-".into(),
        "-".into(),
        "the floor".into(),
    ]);
    for row in rows {
        let (seq, ratio_text) = match row.baseline {
            Some((seq, estimated)) => (
                format!("{}{}", if estimated { "~" } else { "" }, STYLE.ms(seq)),
                format!("{:.1}x", ratio(seq, row.after.wall)),
            ),
            None => ("-".into(), "-".into()),
        };
        table_rows.push([
            row.scenario.clone(),
            row.after.text(),
            before_text(row.before),
            seq,
            ratio_text,
            row.goal.into(),
        ]);
    }
    table(&table_rows);
    println!(
        "  binary size {size} B = {:.3} MiB (goal <= 1.5 MiB){}",
        mib(size),
        if binaries.before.is_some() {
            ""
        } else {
            "; set MUR_PS_BENCH_BEFORE=/path/to/mur for a before column"
        }
    );
}

impl Home {
    fn running(&self) -> PathBuf {
        self.root().join(".murmur").join("running")
    }

    /// Make the running directory hold exactly `records`.
    fn write(&self, records: &[RunningRecord]) {
        use std::os::unix::fs::PermissionsExt;
        let dir = self.running();
        let _ = std::fs::remove_dir_all(&dir);
        mkdir(&dir);
        for d in [self.root().join(".murmur"), dir.clone()] {
            let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
        }
        for r in records {
            let path = dir.join(running::record_name(r.session_id.as_str()));
            write(&path, &r.to_bytes());
        }
    }
}

fn record(session: &str, url: &str, pid: u32, start: &str) -> RunningRecord {
    RunningRecord {
        session_id: SessionId::parse(session).unwrap_or_else(|err| fail(&err)),
        url: url.to_string(),
        pid,
        process_start: start.to_string(),
        capsule_name: "bench".into(),
        capsule_version: "0.1.0".into(),
        workdir: std::env::temp_dir(),
        outlives_launcher: true,
        started_at: mur::time::format_rfc3339(mur::time::unix_now()),
        door_token: None,
        credentials: Default::default(),
        formation_id: None,
        formation_lifeline: false,
        formation_launcher: None,
        spawned_by: None,
        records_dir: None,
        sandbox: None,
        log_lines_dropped: 0,
        handler_user: None,
        name: None,
        member: None,
    }
}

/// A UUIDv7-shaped session id: `ms` as its time, `n` in the random bits (so ids sort by `n`).
fn session_id(ms: u64, n: usize) -> String {
    format!(
        "ses_{:012x}7000{:016x}",
        ms & 0xffff_ffff_ffff,
        0x8000_0000_0000_0000 | n as u64
    )
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `n` processes that have exited and been reaped: their pids and start times.
fn reaped_processes(n: usize) -> Vec<(u32, String)> {
    (0..n)
        .map(|_| {
            let mut child = Command::new("true")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|err| fail(&format!("cannot run true: {err}")));
            let pid = child.id();
            // Readable until reaped, zombie or not.
            let start = mur::sys::proc::process_start_token(pid).unwrap_or_else(|| "1".to_string());
            let _ = child.wait();
            (pid, start)
        })
        .collect()
}

struct PsRun {
    wall: Duration,
    /// User and system time (from `wait4`; its `ru_maxrss` would be this process's, see
    /// [`peak_rss`]).
    cpu: Duration,
    stderr: String,
    running: usize,
    unreachable: usize,
}

/// One `mur ps` of `binary` with `HOME=home`, timed from spawn to exit with its output read,
/// reaped by `wait4` for its CPU time.
#[expect(
    clippy::zombie_processes,
    reason = "reaped by wait4, which std's wait cannot do"
)]
fn ps(binary: &Path, home: &Path) -> PsRun {
    let start = Instant::now();
    let mut child = Command::new(binary)
        .arg("ps")
        .env("HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| fail(&format!("cannot run {}: {err}", binary.display())));
    let mut err_pipe = child.stderr.take().unwrap_or_else(|| fail("no stderr"));
    let stderr = thread::spawn(move || {
        let mut text = String::new();
        let _ = err_pipe.read_to_string(&mut text);
        text
    });
    let mut stdout = String::new();
    let _ = child
        .stdout
        .take()
        .unwrap_or_else(|| fail("no stdout"))
        .read_to_string(&mut stdout);
    let (status, usage) = wait4(child.id());
    let wall = start.elapsed();
    let stderr = stderr.join().unwrap_or_default();
    if status != 0 {
        fail(&format!("mur ps failed (wait status {status}): {stderr}"));
    }
    let statuses: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2))
        .collect();
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    PsRun {
        wall,
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
        running: statuses.iter().filter(|s| **s == "running").count(),
        unreachable: statuses.iter().filter(|s| **s == "unreachable").count(),
        stderr,
    }
}

/// Reap child `pid`: its wait status and resource usage.
fn wait4(pid: u32) -> (libc::c_int, libc::rusage) {
    let mut status = 0;
    // SAFETY: `rusage` is a plain C struct of integers; all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `usage` are live for the call; `pid` is our unreaped child.
        let rc = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
        if rc == pid as libc::pid_t {
            return (status, usage);
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            fail(&format!("wait4 {pid}: {err}"));
        }
    }
}

/// What a `mur ps` must have listed and pruned, or its timing means nothing.
#[derive(Clone, Copy)]
struct Expect {
    running: usize,
    unreachable: usize,
    pruned: usize,
}

impl Expect {
    fn check(self, run: &PsRun, what: &str) {
        let pruned = if self.pruned == 0 {
            !run.stderr.contains("pruned")
        } else {
            run.stderr
                .contains(&format!("pruned {} stale record", self.pruned))
        };
        if (run.running, run.unreachable) != (self.running, self.unreachable) || !pruned {
            fail(&format!(
                "{what}: mur ps listed {} running and {} unreachable, expected {} and {} \
                 ({} pruned)\nstderr: {}",
                run.running,
                run.unreachable,
                self.running,
                self.unreachable,
                self.pruned,
                run.stderr
            ));
        }
    }
}

struct Sequential {
    wall: Duration,
    live: usize,
    unreachable: usize,
    gone: usize,
    silent_verified: usize,
    silent_skipped: usize,
    /// Time spent verifying the silent records that were verified.
    silent_time: Duration,
}

/// `dir`, opened as the running directory is: no link followed.
fn open_dir(dir: &Path) -> mur::sys::dir::Dir {
    mur::sys::dir::Dir::open(dir).unwrap_or_else(|err| fail(&format!("{}: {err}", dir.display())))
}

/// The seed's loop: list, then verify each record in turn, pruning the gone. Records in
/// `silent` past the first [`SILENT_SAMPLE`] are skipped and counted, not verified.
fn sequential(dir: &Path, silent: &HashSet<String>) -> Sequential {
    let start = Instant::now();
    let scan: running::Scan =
        running::scan_pruning(&open_dir(dir)).unwrap_or_else(|err| fail(&err));
    let mut seq = Sequential {
        wall: Duration::ZERO,
        live: 0,
        unreachable: 0,
        gone: 0,
        silent_verified: 0,
        silent_skipped: 0,
        silent_time: Duration::ZERO,
    };
    for entry in &scan.entries {
        let is_silent = silent.contains(entry.record.session_id.as_str());
        if is_silent && seq.silent_verified == SILENT_SAMPLE {
            seq.silent_skipped += 1;
            continue;
        }
        let began = Instant::now();
        let liveness = running::verify(&entry.record);
        if is_silent {
            seq.silent_verified += 1;
            seq.silent_time += began.elapsed();
        }
        match liveness {
            Liveness::Live => seq.live += 1,
            Liveness::Unreachable(_) => seq.unreachable += 1,
            Liveness::Gone(_) => {
                running::prune(entry, mur::json::ended::End::Gone)
                    .expect("a stale record in the bench home is removable");
                seq.gone += 1;
            }
        }
    }
    seq.wall = start.elapsed();
    seq
}

fn check_seq(seq: &Sequential, live: usize, unreachable: usize, gone: usize, what: &str) {
    if (seq.live, seq.unreachable, seq.gone) != (live, unreachable, gone) {
        fail(&format!(
            "{what}: {} live, {} unreachable, {} gone; expected {live}, {unreachable}, {gone}",
            seq.live, seq.unreachable, seq.gone
        ));
    }
}

fn ratio(slow: Duration, fast: Duration) -> f64 {
    slow.as_secs_f64() / fast.as_secs_f64().max(1e-9)
}
