//! How long `mur formation` takes to bring a roster up and to take it down. A benchmark, not a
//! test: it prints figures and asserts no timing.
//!
//! Run with `cargo bench --bench formation`. It measures the binary users run: the static one
//! `install.sh` builds (the first run builds it), or the one `MUR_BENCH_BIN=/path/to/mur` names;
//! its first lines say which. Every
//! launcher is a real `mur formation`, spawned with `HOME` set to a temporary directory this bench
//! makes (and removes); nothing in the real `~/.murmur` is read or touched.
//!
//! Rosters of 1, 4, 16 and 64 members: the entry member plus N-1 peers, every one the same
//! capsule, whose handler is a two-line `sh` script running `cat`. Two kinds of roster:
//!
//! - `public`: no reachability, public doors, so no token is minted, carried or checked;
//! - `all+auth`: `"reachability": "all"` and every door authenticating (`credentials: []`), so
//!   the launcher mints a door key per member and a formation token per edge (N-1 callees for
//!   each peer, (N-1)² tokens in all), sends every peer an address line, and probes each peer's
//!   authenticated door with the operator token read from its record.
//!
//! Figures, medians of [`RUNS`] runs each ([`RUNS_AT_64`] at 64 members, where one run of the
//! whole section starts 65 processes; one unmeasured run before):
//!
//! - **launch**: from spawning `mur formation ROSTER --json` to the entry member's door answering:
//!   the launcher's readiness line arrives on our end of its stdout, then one `GET` of the entry's
//!   agent card (a fresh connection) succeeds. Printed as the line alone and line + GET. Each
//!   launch is then ended with SIGTERM to the launcher and waited for (also printed);
//! - **teardown**: `mur formation ROSTER --task hello`: from the moment the answer line appears
//!   on our end of the launcher's stdout to the launcher's exit (reaped). Every member cooperates
//!   (each ends on its lifeline's EOF);
//! - **by hand** (from [`BASELINE_FROM`] members up), the baseline, measured in the same run,
//!   each run right after the formation's so both see the same machine: the same N capsules
//!   started directly by the bench as N `mur run CAPSULE --json` processes at once, then each
//!   one's readiness line awaited and one `GET` of its agent card made, in spawn order (the
//!   sessions come up concurrently meanwhile, so the GETs overlap the later starts); then
//!   SIGTERM to all N and every one waited for and reaped. The ratio formation / by hand is
//!   what the launcher's all-or-nothing machinery adds over starting the sessions by hand:
//!   lifelines and channels, a workdir per member, the door probes (with the operator token
//!   read from the record for `all+auth`), peers before the entry member; and on the way down
//!   every lifeline closed, each member awaited, SIGKILL to each peer's process group, the
//!   reaping. Both the launcher's SIGTERM-to-exit and the `--task` teardown are set against the
//!   by-hand SIGTERM-to-all-reaped figure.
//!
//! After every run the bench checks that no process it started is left (any process whose
//! environment holds this bench's `HOME`) and that `~/.murmur/running` is empty.

// Bench scaffolding signals its own children directly; each block says why it is sound.
// `unsafe` stays denied in the product, outside `src/sys`.
#![allow(unsafe_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, ExitStatus};
use std::thread;
use std::time::{Duration, Instant};

mod common;
use common::{Home, Style, fail, leftovers, loadavg, median, mkdir, mur, signal, table, write};

/// Every duration in milliseconds; a spread is the median, minimum and maximum.
const STYLE: Style = Style {
    seconds: false,
    tenths_from_10s: false,
    micros: false,
    p90_and_count: false,
};
const SIZES: [usize; 4] = [1, 4, 16, 64];
/// Measured runs per figure, after one unmeasured run.
const RUNS: usize = 10;
/// Measured runs per figure at 64 members: each starts 65 processes (and as many again by hand),
/// so fewer runs keep the whole bench under half a minute on 2 cores (about 16 s at load 4).
const RUNS_AT_64: usize = 5;
/// The smallest roster measured against the by-hand baseline too (below it there is little for
/// the launcher's machinery to add, and little to compare).
const BASELINE_FROM: usize = 16;
/// How long the by-hand sessions may take to come up, or to exit after SIGTERM, before the bench
/// calls them hung.
const BY_HAND_DEADLINE: Duration = Duration::from_secs(60);
/// How long a launcher may take to exit on its own before the bench calls it hung.
const EXIT_DEADLINE: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Public,
    AllAuth,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Public => "public",
            Kind::AllAuth => "all+auth",
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; this harness takes no options.
    // A failure or panic SIGKILLs the launchers alive (their members end with their
    // lifelines), and the home goes half a second later.
    common::guarded("formation", Duration::from_millis(500));
    let home = Home::new();
    common::banner(&home);
    println!(
        "  members: the entry plus N-1 peers, each `sh` running `cat`; {RUNS} measured runs per \
         figure ({RUNS_AT_64} at 64 members) after 1 unmeasured"
    );
    println!();

    let mut summary: Vec<Row> = vec![];
    for kind in [Kind::Public, Kind::AllAuth] {
        let rosters: Vec<(usize, PathBuf)> =
            SIZES.iter().map(|&n| (n, home.roster(kind, n))).collect();
        let by_hand_stop = launches(&home, kind, &rosters, &mut summary);
        teardowns(&home, kind, &rosters, &by_hand_stop, &mut summary);
    }
    print_summary(summary);
}

/// The launch figures of every roster of `kind`, with the by-hand baseline beside them; the
/// by-hand SIGTERM-to-all-reaped medians, by size, for the teardown figures.
fn launches(
    home: &Home,
    kind: Kind,
    rosters: &[(usize, PathBuf)],
    summary: &mut Vec<Row>,
) -> Vec<(usize, Duration)> {
    println!(
        "launch, {}: spawn of `mur formation ROSTER --json` to the entry's door answering",
        kind.label()
    );
    let mut by_hand_stop = vec![];
    for (n, roster) in rosters {
        let mut line = vec![];
        let mut card = vec![];
        let mut stop = vec![];
        let mut hand_ready = vec![];
        let mut hand_stop = vec![];
        for run in 0..=runs(*n) {
            let launch = launch(home, roster, *n, kind);
            let hand = (*n >= BASELINE_FROM).then(|| by_hand(home, kind, *n));
            if run > 0 {
                line.push(launch.line);
                card.push(launch.card);
                stop.push(launch.stop);
                if let Some(hand) = hand {
                    hand_ready.push(hand.ready);
                    hand_stop.push(hand.stop);
                }
            }
        }
        let note = format!(", {} runs", card.len());
        println!(
            "  {n:>2} members  line + GET  {}",
            STYLE.spread_noting(&card, &note)
        );
        println!("              line alone  {}", STYLE.spread(&line));
        println!(
            "              SIGTERM to launcher exit  {}",
            STYLE.spread(&stop)
        );
        let hand = (!hand_ready.is_empty()).then(|| (median(&hand_ready), median(&hand_stop)));
        if let Some((ready, down)) = hand {
            println!(
                "              by hand, {n} `mur run --json` at once, every line + GET  {}",
                STYLE.spread(&hand_ready)
            );
            println!(
                "              by hand, SIGTERM to all {n} to all reaped  {}",
                STYLE.spread(&hand_stop)
            );
            println!(
                "              formation / by hand: launch {}, SIGTERM to exit {}",
                ratio(median(&card), ready),
                ratio(median(&stop), down)
            );
            by_hand_stop.push((*n, down));
        }
        summary.push(Row {
            label: format!("launch, {n} members, {}", kind.label()),
            measured: median(&card),
            by_hand: hand.map(|(ready, _)| ready),
        });
        if let Some((_, down)) = hand {
            summary.push(Row {
                label: format!("SIGTERM to exit, {n} members, {}", kind.label()),
                measured: median(&stop),
                by_hand: Some(down),
            });
        }
    }
    println!();
    by_hand_stop
}

/// The teardown figures of every roster of `kind`, against the by-hand SIGTERM figures.
fn teardowns(
    home: &Home,
    kind: Kind,
    rosters: &[(usize, PathBuf)],
    by_hand_stop: &[(usize, Duration)],
    summary: &mut Vec<Row>,
) {
    println!(
        "teardown, {}: `mur formation ROSTER --task hello`, answer line on stdout to the \
             launcher's exit",
        kind.label()
    );
    for (n, roster) in rosters {
        let mut down = vec![];
        let mut total = vec![];
        let mut said = String::new();
        for run in 0..=runs(*n) {
            let task = task(home, roster);
            if run > 0 {
                down.push(task.teardown);
                total.push(task.answer);
            }
            said = task.stopped;
        }
        let note = format!(", {} runs", down.len());
        println!(
            "  {n:>2} members  teardown  {}",
            STYLE.spread_noting(&down, &note)
        );
        println!("              spawn to answer  {}", STYLE.spread(&total));
        let hand = by_hand_stop
            .iter()
            .find(|(size, _)| size == n)
            .map(|&(_, d)| d);
        if let Some(hand) = hand {
            println!(
                "              formation / by hand (SIGTERM to all {n} to all reaped, above): \
                     {}",
                ratio(median(&down), hand)
            );
        }
        println!("              the launcher said: {}", abridged(&said));
        summary.push(Row {
            label: format!("teardown, {n} members, {}", kind.label()),
            measured: median(&down),
            by_hand: hand,
        });
    }
    println!();
}

/// The summary table: every median, the by-hand baseline's beside it, and what is expected.
fn print_summary(summary: Vec<Row>) {
    println!(
        "summary (medians; by hand: the same sessions as `mur run` processes started at once)"
    );
    let mut rows = vec![[
        "figure".to_string(),
        "measured".into(),
        "by hand".into(),
        "formation / by hand".into(),
        "expected".into(),
    ]];
    for row in summary {
        let expected = match row.label.as_str() {
            l if l.starts_with("launch, 64") => "<= 1 s (goal)",
            l if l.starts_with("launch, 16") => "<= 250 ms on 2 cores",
            l if l.starts_with("teardown") => "<= 100 ms",
            _ => "-",
        };
        rows.push([
            row.label,
            STYLE.ms(row.measured),
            row.by_hand.map_or("-".into(), |d| STYLE.ms(d)),
            row.by_hand.map_or("-".into(), |d| ratio(row.measured, d)),
            expected.into(),
        ]);
    }
    table(&rows);
    println!("  load average at the end: {}", loadavg());
    println!("  (no process left behind after any run)");
}

/// Measured runs for a roster of `members`.
fn runs(members: usize) -> usize {
    if members >= 64 { RUNS_AT_64 } else { RUNS }
}

/// One line of the summary: a median, and the by-hand baseline's where there is one.
struct Row {
    label: String,
    measured: Duration,
    by_hand: Option<Duration>,
}

/// `a / b` as `1.23x`.
fn ratio(a: Duration, b: Duration) -> String {
    format!("{:.2}x", a.as_secs_f64() / b.as_secs_f64().max(1e-9))
}

/// The launcher's `stopped: …` line, its list cut after three members (63 peers fill a screen).
fn abridged(said: &str) -> String {
    let names: Vec<&str> = said.split(", ").collect();
    if names.len() <= 4 {
        return said.to_string();
    }
    format!("{}, … ({} in all)", names[..3].join(", "), names.len())
}

struct Launch {
    line: Duration,
    card: Duration,
    stop: Duration,
}

/// One `mur formation ROSTER --json` brought up, its entry's card read, then SIGTERMed.
fn launch(home: &Home, roster: &Path, members: usize, kind: Kind) -> Launch {
    let start = Instant::now();
    let mut launcher = Launcher::spawn(home, roster, &["--json"]);
    let line = launcher.read_line();
    let line_at = start.elapsed();
    let ready: serde_json::Value = serde_json::from_str(&line)
        .unwrap_or_else(|_| launcher.fail(&format!("the launcher printed {line:?}")));
    let listed = ready["members"].as_array().cloned().unwrap_or_default();
    if listed.len() != members {
        launcher.fail(&format!(
            "{members} members expected, the launcher listed {line}"
        ));
    }
    let entry = listed
        .iter()
        .find(|m| m["entry"] == true)
        .unwrap_or_else(|| launcher.fail(&format!("no entry member in {line}")));
    let url = entry["url"].as_str().unwrap_or_default().to_string();
    let session = entry["session_id"].as_str().unwrap_or_default().to_string();
    let card = get_card(&url).unwrap_or_else(|why| launcher.fail(&why));
    let card_at = start.elapsed();
    // A public door's card names its session; an authenticated door's public card does not.
    if kind == Kind::Public && !card.contains(&session) {
        launcher.fail(&format!("the entry's card does not name {session}: {card}"));
    }
    let pids: Vec<u32> = listed
        .iter()
        .filter_map(|m| m["pid"].as_u64().map(|p| p as u32))
        .collect();
    let began = Instant::now();
    signal(launcher.pid, libc::SIGTERM);
    let status = launcher.wait();
    let stop = began.elapsed();
    if status.code() != Some(143) {
        launcher.fail(&format!("after SIGTERM the launcher ended {status}"));
    }
    if let Some(pid) = pids
        .iter()
        .find(|p| Path::new(&format!("/proc/{p}")).exists())
    {
        launcher.fail(&format!("member pid {pid} outlived its launcher"));
    }
    launcher.finish(home);
    Launch {
        line: line_at,
        card: card_at,
        stop,
    }
}

struct Task {
    answer: Duration,
    teardown: Duration,
    stopped: String,
}

/// One `mur formation ROSTER --task hello`, run to its own end.
fn task(home: &Home, roster: &Path) -> Task {
    let start = Instant::now();
    let mut launcher = Launcher::spawn(home, roster, &["--task", "hello"]);
    let line = launcher.read_line();
    let answered = Instant::now();
    if line.trim_end() != "hello" {
        launcher.fail(&format!("the formation answered {line:?}"));
    }
    let status = launcher.wait();
    let teardown = answered.elapsed();
    if !status.success() {
        launcher.fail(&format!("the launcher ended {status}"));
    }
    let stopped = launcher.finish(home);
    Task {
        answer: answered - start,
        teardown,
        stopped: stopped
            .lines()
            .find_map(|l| l.strip_prefix("mur formation: "))
            .unwrap_or("(nothing on stderr)")
            .to_string(),
    }
}

/// One `mur formation` process: stdout read line by line, stderr collected on a thread.
struct Launcher {
    child: Option<Child>,
    pid: u32,
    stdout: BufReader<std::process::ChildStdout>,
    stderr: Option<thread::JoinHandle<String>>,
}

impl Launcher {
    fn spawn(home: &Home, roster: &Path, args: &[&str]) -> Self {
        let (mut child, stdout) = common::spawn_mur(
            Command::new(mur()).arg("formation").arg(roster).args(args),
            home.root(),
            home.root(),
        );
        let pid = child.id();
        let stderr: Option<ChildStderr> = child.stderr.take();
        let stderr = thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut stderr) = stderr {
                let _ = stderr.read_to_string(&mut text);
            }
            text
        });
        Self {
            child: Some(child),
            pid,
            stdout,
            stderr: Some(stderr),
        }
    }

    fn read_line(&mut self) -> String {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(n) if n > 0 => line,
            _ => self.fail("the launcher closed its stdout without a line"),
        }
    }

    /// Wait for the launcher to exit (it must within [`EXIT_DEADLINE`]) and reap it.
    fn wait(&mut self) -> ExitStatus {
        let Some(child) = self.child.as_mut() else {
            fail("the launcher was already reaped");
        };
        let start = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    self.child = None;
                    common::unregister(self.pid);
                    return status;
                }
                Ok(None) if start.elapsed() > EXIT_DEADLINE => {
                    self.fail("the launcher did not exit within 60 s")
                }
                Ok(None) => thread::sleep(Duration::from_micros(200)),
                Err(err) => fail(&format!("wait: {err}")),
            }
        }
    }

    /// After the exit: its stderr; and check that nothing it started is left.
    fn finish(mut self, home: &Home) -> String {
        let stderr = self
            .stderr
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        let left = leftovers(home.root());
        if !left.is_empty() {
            fail(&format!(
                "processes left behind: {left:?}; the launcher said: {stderr}"
            ));
        }
        let running = home.root().join(".murmur").join("running");
        let records: Vec<_> = std::fs::read_dir(&running)
            .map(|dir| dir.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
            .unwrap_or_default();
        if !records.is_empty() {
            fail(&format!(
                "records left in {}: {records:?}",
                running.display()
            ));
        }
        stderr
    }

    /// SIGTERM the launcher, wait for it (SIGKILL after 30 s), print its stderr, and fail.
    fn fail(&mut self, why: &str) -> ! {
        if let Some(mut child) = self.child.take() {
            signal(self.pid, libc::SIGTERM);
            let start = Instant::now();
            while matches!(child.try_wait(), Ok(None)) && start.elapsed() < Duration::from_secs(30)
            {
                thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let stderr = self
            .stderr
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        fail(&format!("{why}\nthe launcher's stderr: {stderr}"))
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        if self.child.is_some() {
            signal(self.pid, libc::SIGTERM);
            let _ = self.wait();
        }
    }
}

struct ByHand {
    ready: Duration,
    stop: Duration,
}

/// The baseline: `members` capsules of `kind` started by the bench itself as as many
/// `mur run CAPSULE --json` processes at once, each one's readiness line read and its card
/// fetched (in spawn order); then SIGTERM to every one, and every one waited for and reaped.
/// Afterwards the same checks as after a formation: no process left, no record left.
fn by_hand(home: &Home, kind: Kind, members: usize) -> ByHand {
    let cap = home.capsule(kind);
    let watchdog = Watchdog::arm(BY_HAND_DEADLINE, "the by-hand sessions came up");
    let start = Instant::now();
    let mut sessions: Vec<ByHandSession> = (0..members)
        .map(|_| {
            let (mut child, stdout) = common::spawn_mur(
                Command::new(mur()).arg("run").arg(&cap).arg("--json"),
                home.root(),
                home.root(),
            );
            ByHandSession {
                pid: child.id(),
                stderr: child.stderr.take(),
                child,
                stdout,
            }
        })
        .collect();
    for session in &mut sessions {
        let mut line = String::new();
        if !matches!(session.stdout.read_line(&mut line), Ok(n) if n > 0) {
            let pid = session.pid;
            fail(&format!(
                "a by-hand session (pid {pid}) closed its stdout without a line: {}",
                session.stderr_text()
            ));
        }
        let ready: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|_| fail(&format!("a by-hand session printed {line:?}")));
        let url = ready["url"].as_str().unwrap_or_default();
        let card = get_card(url).unwrap_or_else(|why| fail(&why));
        let session_id = ready["session_id"].as_str().unwrap_or_default();
        if kind == Kind::Public && !card.contains(session_id) {
            fail(&format!(
                "the card at {url} does not name {session_id}: {card}"
            ));
        }
    }
    let ready = start.elapsed();
    drop(watchdog);

    let watchdog = Watchdog::arm(BY_HAND_DEADLINE, "the by-hand sessions exited on SIGTERM");
    let began = Instant::now();
    for session in &sessions {
        signal(session.pid, libc::SIGTERM);
    }
    // Blocking waits in spawn order: the last to return is the last to exit, within a wake-up.
    let statuses: Vec<_> = sessions
        .iter_mut()
        .map(|session| {
            let status = session.child.wait();
            common::unregister(session.pid);
            status
        })
        .collect();
    let stop = began.elapsed();
    drop(watchdog);
    for (session, status) in sessions.iter_mut().zip(statuses) {
        match status {
            Ok(status) if status.code() == Some(143) => {}
            other => {
                let pid = session.pid;
                fail(&format!(
                    "after SIGTERM a by-hand session (pid {pid}) ended {other:?}: {}",
                    session.stderr_text()
                ))
            }
        }
    }
    let left = leftovers(home.root());
    if !left.is_empty() {
        fail(&format!("processes left behind by hand: {left:?}"));
    }
    let running = home.root().join(".murmur").join("running");
    if std::fs::read_dir(&running).is_ok_and(|mut dir| dir.next().is_some()) {
        fail(&format!("records left in {} by hand", running.display()));
    }
    ByHand { ready, stop }
}

/// One `mur run --json` the bench started itself; its stderr read only once it has exited
/// (a session says little there, well within a pipe's buffer, so it never blocks on it).
struct ByHandSession {
    child: Child,
    pid: u32,
    stdout: BufReader<std::process::ChildStdout>,
    stderr: Option<ChildStderr>,
}

impl ByHandSession {
    /// Its stderr: read to the end only if it has exited, so a failure report cannot hang on a
    /// session still running (which [`fail`] then SIGKILLs).
    fn stderr_text(&mut self) -> String {
        let mut text = String::new();
        if matches!(self.child.try_wait(), Ok(Some(_)))
            && let Some(stderr) = self.stderr.as_mut()
        {
            let _ = stderr.read_to_string(&mut text);
        }
        text
    }
}

/// Fails the bench (SIGKILLing every process it started) if it is not dropped within its
/// deadline: a by-hand session's readiness line and exit are awaited by blocking calls, which
/// only this can bound.
struct Watchdog {
    disarm: Option<std::sync::mpsc::Sender<()>>,
}

impl Watchdog {
    fn arm(deadline: Duration, what: &'static str) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(deadline) {
                fail(&format!("hung: not {what} within {}s", deadline.as_secs()));
            }
        });
        Self { disarm: Some(tx) }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Dropping the sender disconnects the channel: the watchdog thread ends at once.
        self.disarm.take();
    }
}

/// One `GET /.well-known/agent-card.json` on a fresh connection; the body of its 200.
fn get_card(url: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(url).map_err(|err| format!("connect {url}: {err}"))?;
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    stream
        .write_all(
            format!(
                "GET /.well-known/agent-card.json HTTP/1.1\r\nHost: {url}\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .map_err(|err| format!("write to {url}: {err}"))?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|err| format!("read from {url}: {err}"))?;
    match response.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200 ") => Ok(body.to_string()),
        _ => Err(format!("the entry's door answered {response:?}")),
    }
}

impl Home {
    /// `<kind>/cap`, the one capsule every member of a `kind` roster runs, written on first use.
    fn capsule(&self, kind: Kind) -> PathBuf {
        let cap = self.root().join(kind.label().replace('+', "-")).join("cap");
        if !cap.exists() {
            mkdir(&cap);
            let mut manifest = serde_json::json!({
                "name": "cat", "version": "1.0.0", "run": ["./handler.sh"],
            });
            if kind == Kind::AllAuth {
                manifest["exports"] = serde_json::json!({"peer_tasks": {"accept": true}});
                manifest["network"] = serde_json::json!({"authentication": {"credentials": []}});
            }
            write(&cap.join("murmur.json"), manifest.to_string().as_bytes());
            let script = cap.join("handler.sh");
            write(&script, b"#!/bin/sh\ncat\n");
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
                .unwrap_or_else(|err| fail(&format!("{}: {err}", script.display())));
        }
        cap
    }

    /// `<kind>/roster-<n>.json` beside the capsule `<kind>/cap`, written on first use.
    fn roster(&self, kind: Kind, n: usize) -> PathBuf {
        let cap = self.capsule(kind);
        let dir = cap
            .parent()
            .unwrap_or_else(|| fail("the capsule has no parent"));
        let mut members =
            vec![serde_json::json!({"name": "entry", "capsule": "cap", "entry": true})];
        members.extend(
            (1..n).map(|i| serde_json::json!({"name": format!("peer-{i}"), "capsule": "cap"})),
        );
        let mut roster = serde_json::json!({ "members": members });
        if kind == Kind::AllAuth {
            roster["reachability"] = serde_json::json!("all");
        }
        let path = dir.join(format!("roster-{n}.json"));
        write(&path, roster.to_string().as_bytes());
        path
    }
}
