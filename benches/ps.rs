//! How long `mur ps` takes on a crowded machine, next to verifying the same records one after
//! another. A benchmark, not a test: it prints figures and asserts no timing.
//!
//! Run with `cargo bench --bench ps`. Cargo builds the `mur` binary for it (the bench profile
//! inherits `[profile.release]`: same optimisation, LTO and stripping) and passes its path as
//! `CARGO_BIN_EXE_mur`, so no separate `cargo build --release` is needed. The figures are wall
//! times of the real binary, spawned with `HOME` set to a temporary directory this bench makes
//! (and removes); nothing in the real `~/.murmur` is read or touched.
//!
//! Scenarios, each with 1,000 records:
//!
//! - (a) every record live: it names a single-threaded helper process this bench starts (`cat`;
//!   layers 1 and 2 pass — not the bench itself, which is an ancestor of the `mur ps` it runs,
//!   and which mur never signals nor so verifies), and its door is one of 1,000 listeners this
//!   process holds on 127.0.0.1, each answering `GET /.well-known/agent-card.json` with a card
//!   naming that record's session;
//! - (b) the same with 200 doors that accept and never answer (the probe's 5 s response deadline
//!   decides them);
//! - (c) every record gone: each names a process that exited and was reaped. `mur ps` prunes
//!   them, so they are written again before every run.
//!
//! The sequential baseline runs in this process: `mur::running::list`, then
//! `mur::running::verify` on each record in turn (pruning the gone ones), as the seed's loop
//! does. For (b) that would take 200 × 5 s, so it verifies only the first 10 silent doors and
//! extrapolates the rest at their measured mean; the output says so.

// Bench scaffolding signals its own children directly; each block says why it is sound.
// `unsafe` stays denied in the product, outside `src/sys`.
#![allow(unsafe_code)]

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use mur::id::SessionId;
use mur::json::record::RunningRecord;
use mur::running::{self, Liveness};

mod common;
use common::{Home, MUR, Style, fail, median, mkdir, table, write};

/// Milliseconds below 1 s, seconds above (to a tenth from 10 s); a spread is the median, minimum
/// and maximum.
const STYLE: Style = Style {
    seconds: true,
    tenths_from_10s: true,
    micros: false,
    p90_and_count: false,
};

const RECORDS: usize = 1000;
const SILENT: usize = 200;
/// Silent doors the sequential baseline of (b) really waits on.
const SILENT_SAMPLE: usize = 10;
const RUNS: usize = 7;
const RUNS_SILENT: usize = 3;
const RUNS_SEQUENTIAL: usize = 5;
const RUNS_EMPTY: usize = 100;
const CARD_URI: &str = "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1";

fn main() {
    // `cargo bench` passes `--bench`; this harness takes no options.
    common::named("ps");
    let size = print_binary();

    // Empty home first, while this process is still quiet.
    let empty_median = empty_home();

    let stamp = unix_ms();
    let ids: Vec<String> = (0..RECORDS).map(|i| session_id(stamp, i)).collect();
    let mut helper = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|err| fail(&format!("cannot run cat: {err}")));
    let helper_start = mur::sys::proc::process_start_token(helper.id())
        .unwrap_or_else(|| fail("cannot read the helper's start time"));

    // (a) every door answers.
    let opened = Instant::now();
    let doors = open_doors(&ids);
    println!(
        "doors: {} listeners on 127.0.0.1, one thread each (64 KiB stacks), opened in {}",
        doors.len(),
        STYLE.ms(opened.elapsed())
    );
    let live = Home::tagged("live");
    let live_records: Vec<RunningRecord> = doors
        .iter()
        .map(|door| {
            let addr = door.addr.to_string();
            record(&door.session, &addr, helper.id(), &helper_start)
        })
        .collect();
    live.write(&live_records);

    println!();
    println!("(a) {RECORDS} records, all live, every door answering");
    println!(
        "    (every record names one helper process: cat, pid {})",
        helper.id()
    );
    let a = live_scenario(&live, "(a)");
    let b = silent_scenario(&doors, &live);
    // Its stdin closes when this process exits, however it exits; end it now anyway.
    let _ = helper.kill();
    let _ = helper.wait();
    let c = gone_scenario(stamp);
    print_summary(&Figures {
        a,
        b,
        c,
        empty_median,
        size,
    });
}

/// Prints the binary's path and size and the machine; the size in bytes.
fn print_binary() -> u64 {
    let binary = PathBuf::from(MUR);
    let size = std::fs::metadata(&binary)
        .unwrap_or_else(|err| fail(&format!("{}: {err}", binary.display())))
        .len();
    println!("mur ps benchmark");
    println!("  binary  {}", binary.display());
    println!(
        "  size    {size} bytes = {:.3} MiB (stripped by the release profile)",
        mib(size)
    );
    println!(
        "  machine {} CPUs, bench pid {}",
        thread::available_parallelism().map_or(0, |n| n.get()),
        std::process::id()
    );
    println!();
    size
}

/// `bytes` in MiB.
fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Times and prints `mur ps` in a home with no `.murmur`; the median.
fn empty_home() -> Duration {
    let empty = Home::tagged("empty");
    for _ in 0..10 {
        ps(empty.root(), 0);
    }
    let empty_runs: Vec<Duration> = (0..RUNS_EMPTY)
        .map(|_| {
            let run = ps(empty.root(), 0);
            if run.stdout.trim() != "no running capsules" {
                fail(&format!("empty home: unexpected output {:?}", run.stdout));
            }
            run.wall
        })
        .collect();
    let empty_median = median(&empty_runs);
    println!("empty home ($HOME with no .murmur), {RUNS_EMPTY} runs");
    println!("  mur ps  {}", STYLE.spread(&empty_runs));
    println!();
    empty_median
}

/// (b) the `live` home again, with 200 of its doors silent: every fifth one, so they spread
/// across the listing. Returns the median of `mur ps` and the sequential loop's estimate.
fn silent_scenario(doors: &[Door], live: &Home) -> (Duration, Duration) {
    let silent_ids: HashSet<String> = doors
        .iter()
        .enumerate()
        .filter(|(i, _)| i % (RECORDS / SILENT) == 0)
        .map(|(_, door)| {
            door.silent.store(true, Ordering::SeqCst);
            door.session.clone()
        })
        .collect();
    println!();
    println!(
        "(b) {RECORDS} records, all live, {} doors accept and never answer",
        silent_ids.len()
    );
    let b_runs: Vec<Duration> = (0..RUNS_SILENT)
        .map(|_| {
            let run = ps(live.root(), 1);
            check(&run, RECORDS - SILENT, SILENT, "(b)");
            run.wall
        })
        .collect();
    let b_seq = sequential(&live.running(), &silent_ids);
    check_seq(
        &b_seq,
        RECORDS - SILENT,
        SILENT_SAMPLE,
        0,
        "(b) sequential sample",
    );
    let per_silent = b_seq.silent_time / b_seq.silent_verified.max(1) as u32;
    let b_seq_estimate = b_seq.wall + per_silent * b_seq.silent_skipped as u32;
    let b_ps = median(&b_runs);
    println!(
        "  mur ps      {}",
        STYLE.spread_noting(&b_runs, &format!(", {RUNS_SILENT} runs"))
    );
    println!(
        "  sequential  ~{} ESTIMATED: measured {} over {} answering + {} silent doors \
         ({} per silent door), the other {} silent doors extrapolated at that mean, not run",
        STYLE.ms(b_seq_estimate),
        STYLE.ms(b_seq.wall),
        b_seq.live,
        b_seq.silent_verified,
        STYLE.ms(per_silent),
        b_seq.silent_skipped
    );
    println!(
        "  ratio       sequential (estimated) / mur ps = {:.0}x",
        ratio(b_seq_estimate, b_ps)
    );
    (b_ps, b_seq_estimate)
}

/// (c) every record names a reaped process (session ids stamped `stamp + 1`). Returns the
/// medians of `mur ps` and of the sequential loop.
fn gone_scenario(stamp: u64) -> (Duration, Duration) {
    println!();
    println!("(c) {RECORDS} records, all gone (reaped pids), rewritten before every run");
    let reaped = reaped_processes(RECORDS);
    let gone = Home::tagged("gone");
    let workdir = gone.root().to_path_buf();
    let gone_records: Vec<RunningRecord> = reaped
        .iter()
        .enumerate()
        .map(|(i, (pid, start))| {
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
    let c_runs: Vec<Duration> = (0..RUNS)
        .map(|_| {
            gone.write(&gone_records);
            let run = ps(gone.root(), 0);
            check(&run, 0, 0, "(c)");
            if !run
                .stderr
                .contains(&format!("pruned {RECORDS} stale records"))
            {
                fail(&format!(
                    "(c): expected {RECORDS} pruned, stderr: {}",
                    run.stderr
                ));
            }
            run.wall
        })
        .collect();
    let c_seq_runs: Vec<Duration> = (0..RUNS)
        .map(|_| {
            gone.write(&gone_records);
            let seq = sequential(&gone.running(), &HashSet::new());
            check_seq(&seq, 0, 0, RECORDS, "(c) sequential");
            seq.wall
        })
        .collect();
    let (c_ps, c_seq) = (median(&c_runs), median(&c_seq_runs));
    println!(
        "  mur ps      {}",
        STYLE.spread_noting(&c_runs, &format!(", {RUNS} runs"))
    );
    println!(
        "  sequential  {}",
        STYLE.spread_noting(
            &c_seq_runs,
            &format!(", {RUNS} runs, in-process list + verify + prune")
        )
    );
    println!(
        "  ratio       sequential / mur ps = {:.1}x",
        ratio(c_seq, c_ps)
    );
    (c_ps, c_seq)
}

/// Every figure the summary shows: (mur ps, sequential) medians per scenario ((b)'s
/// sequential one estimated), the empty-home median and the binary's size in bytes.
struct Figures {
    a: (Duration, Duration),
    b: (Duration, Duration),
    c: (Duration, Duration),
    empty_median: Duration,
    size: u64,
}

/// Prints the summary table.
fn print_summary(figures: &Figures) {
    let Figures {
        a: (a_ps, a_seq),
        b: (b_ps, b_seq_estimate),
        c: (c_ps, c_seq),
        empty_median,
        size,
    } = *figures;
    let mib = mib(size);
    println!();
    println!("summary");
    let rows = [
        [
            "scenario".to_string(),
            "mur ps".to_string(),
            "sequential".to_string(),
            "seq/ps".to_string(),
            "expected".to_string(),
        ],
        [
            "(a) 1000 live, doors answer".into(),
            STYLE.ms(a_ps),
            STYLE.ms(a_seq),
            format!("{:.1}x", ratio(a_seq, a_ps)),
            "well under 1 s".into(),
        ],
        [
            "(b) 1000 live, 200 silent".into(),
            STYLE.ms(b_ps),
            format!("~{} (est.)", STYLE.ms(b_seq_estimate)),
            format!("{:.0}x", ratio(b_seq_estimate, b_ps)),
            "~5 s (one probe timeout)".into(),
        ],
        [
            "(c) 1000 gone, pruned".into(),
            STYLE.ms(c_ps),
            STYLE.ms(c_seq),
            format!("{:.1}x", ratio(c_seq, c_ps)),
            "under 0.2 s".into(),
        ],
        [
            format!("empty home ({RUNS_EMPTY} runs)"),
            STYLE.ms(empty_median),
            "-".into(),
            "-".into(),
            "<= 2 ms".into(),
        ],
        [
            "binary size".into(),
            format!("{size} B = {mib:.3} MiB"),
            "-".into(),
            "-".into(),
            "<= 1.5 MiB".into(),
        ],
    ];
    table(&rows);
    println!("  (medians; 'mur ps' includes spawning the binary, 'sequential' runs in-process)");
}

/// Time `mur ps` and the sequential loop on a home whose records are all live with answering
/// doors; print them, and layers 1 and 2 alone. Returns the two medians.
fn live_scenario(home: &Home, label: &str) -> (Duration, Duration) {
    check(&ps(home.root(), 1), RECORDS, 0, label);
    let ps_runs: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let run = ps(home.root(), 1);
            check(&run, RECORDS, 0, label);
            run.wall
        })
        .collect();
    let seq_runs: Vec<Duration> = (0..RUNS_SEQUENTIAL)
        .map(|_| {
            let seq = sequential(&home.running(), &HashSet::new());
            check_seq(&seq, RECORDS, 0, 0, label);
            seq.wall
        })
        .collect();
    let scan = running::scan(&open_dir(&home.running())).unwrap_or_else(|err| fail(&err));
    let layers12 = median(
        &(0..RUNS)
            .map(|_| {
                let start = Instant::now();
                for entry in &scan.entries {
                    if running::process_liveness(&entry.record).is_some() {
                        fail(&format!("{label}: a record failed layers 1-2"));
                    }
                }
                start.elapsed()
            })
            .collect::<Vec<_>>(),
    );
    let (ps_median, seq_median) = (median(&ps_runs), median(&seq_runs));
    println!(
        "  mur ps      {}",
        STYLE.spread_noting(&ps_runs, &format!(", {RUNS} runs"))
    );
    println!(
        "  sequential  {}",
        STYLE.spread_noting(
            &seq_runs,
            &format!(", {RUNS_SEQUENTIAL} runs, in-process list + verify each")
        )
    );
    println!(
        "  ratio       sequential / mur ps = {:.1}x",
        ratio(seq_median, ps_median)
    );
    println!(
        "  layers 1-2 alone (kill + /proc/<pid>/stat), in-process, {RECORDS} records: {}",
        STYLE.ms(layers12)
    );
    (ps_median, seq_median)
}

/// One listener and the session its card names.
struct Door {
    addr: SocketAddr,
    session: String,
    /// When set, the door accepts and never answers.
    silent: Arc<AtomicBool>,
}

fn open_doors(ids: &[String]) -> Vec<Door> {
    ids.iter()
        .map(|id| {
            let listener = TcpListener::bind("127.0.0.1:0")
                .unwrap_or_else(|err| fail(&format!("cannot bind a door: {err}")));
            let addr = listener
                .local_addr()
                .unwrap_or_else(|err| fail(&format!("door address: {err}")));
            let silent = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&silent);
            let response = card_response(id);
            thread::Builder::new()
                .name("door".into())
                .stack_size(64 * 1024)
                .spawn(move || serve(&listener, &response, &flag))
                .unwrap_or_else(|err| fail(&format!("cannot start a door thread: {err}")));
            Door {
                addr,
                session: id.clone(),
                silent,
            }
        })
        .collect()
}

/// The whole HTTP response one door gives: its agent card.
fn card_response(session: &str) -> Vec<u8> {
    let card = serde_json::json!({
        "name": "bench",
        "version": "0.1.0",
        "capabilities": {"extensions": [{"uri": CARD_URI, "params": {"sessionId": session}}]},
    })
    .to_string();
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{card}",
        card.len()
    )
    .into_bytes()
}

fn serve(listener: &TcpListener, response: &[u8], silent: &AtomicBool) {
    loop {
        match listener.accept() {
            Ok((conn, _)) if silent.load(Ordering::SeqCst) => hold(conn),
            Ok((conn, _)) => {
                let _ = answer(conn, response);
            }
            // EMFILE and the like: back off rather than spin.
            Err(_) => thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Read the request head, write the card, close.
fn answer(mut conn: TcpStream, response: &[u8]) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf)?;
        if n == 0 || head.len() > 64 * 1024 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    conn.write_all(response)?;
    conn.shutdown(Shutdown::Write)
}

/// Keep the connection open and write nothing until the client gives up and closes it.
fn hold(mut conn: TcpStream) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
    let mut buf = [0u8; 1024];
    while matches!(conn.read(&mut buf), Ok(n) if n > 0) {}
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
    }
}

/// A UUIDv7-shaped session id: `ms` as its time, `n` in the random bits.
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
    stdout: String,
    stderr: String,
    running: usize,
    unreachable: usize,
}

/// One `mur ps` with `HOME=home`, timed from spawn to exit with its output read.
fn ps(home: &Path, header_lines: usize) -> PsRun {
    let start = Instant::now();
    let out = Command::new(MUR)
        .arg("ps")
        .env("HOME", home)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|err| fail(&format!("cannot run {MUR}: {err}")));
    let wall = start.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        fail(&format!("mur ps failed ({}): {stderr}", out.status));
    }
    let statuses: Vec<&str> = stdout
        .lines()
        .skip(header_lines)
        .filter_map(|line| line.split_whitespace().nth(2))
        .collect();
    PsRun {
        wall,
        running: statuses.iter().filter(|s| **s == "running").count(),
        unreachable: statuses.iter().filter(|s| **s == "unreachable").count(),
        stdout,
        stderr,
    }
}

/// Stop if `mur ps` did not see what the scenario set up: its timing would mean nothing.
fn check(run: &PsRun, running: usize, unreachable: usize, what: &str) {
    if (run.running, run.unreachable) != (running, unreachable) {
        fail(&format!(
            "{what}: mur ps listed {} running and {} unreachable, expected {running} and {unreachable}\nstderr: {}",
            run.running, run.unreachable, run.stderr
        ));
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
    let scan = running::list(&open_dir(dir)).unwrap_or_else(|err| fail(&err));
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
                running::prune(entry).expect("a stale record in the bench home is removable");
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
