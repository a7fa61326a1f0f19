//! How long `mur formation` takes to bring a roster up and to take it down. A benchmark, not a
//! test: it prints figures and asserts no timing.
//!
//! Run with `cargo bench --bench formation`. Cargo builds the `mur` binary for it (the bench
//! profile inherits `[profile.release]`) and passes its path as `CARGO_BIN_EXE_mur`. Every
//! launcher is a real `mur formation`, spawned with `HOME` set to a temporary directory this bench
//! makes (and removes); nothing in the real `~/.murmur` is read or touched.
//!
//! Rosters of 1, 4 and 16 members: the entry member plus N-1 peers, every one the same capsule,
//! whose handler is a two-line `sh` script running `cat`. Two kinds of roster:
//!
//! - `public`: no reachability, public doors, so no token is minted, carried or checked;
//! - `all+auth`: `"reachability": "all"` and every door authenticating (`credentials: []`), so
//!   the launcher mints a door key per member and a formation token per edge (N-1 callees for
//!   each peer, (N-1)² tokens in all), sends every peer an address line, and probes each peer's
//!   authenticated door with the operator token read from its record.
//!
//! Figures, medians of [`RUNS`] runs each (one unmeasured run before):
//!
//! - **launch**: from spawning `mur formation ROSTER --json` to the entry member's door answering:
//!   the launcher's readiness line arrives on our end of its stdout, then one `GET` of the entry's
//!   agent card (a fresh connection) succeeds. Printed as the line alone and line + GET. Each
//!   launch is then ended with SIGTERM to the launcher and waited for (also printed);
//! - **teardown**: `mur formation ROSTER --task hello`: from the moment the answer line appears
//!   on our end of the launcher's stdout to the launcher's exit (reaped). Every member cooperates
//!   (each ends on its lifeline's EOF).
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
use common::{Home, MUR, Style, fail, leftovers, loadavg, median, mkdir, signal, table, write};

/// Every duration in milliseconds; a spread is the median, minimum and maximum.
const STYLE: Style = Style {
    seconds: false,
    tenths_from_10s: false,
    micros: false,
    p90_and_count: false,
};
const SIZES: [usize; 3] = [1, 4, 16];
/// Measured runs per figure, after one unmeasured run.
const RUNS: usize = 10;
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
         figure after 1 unmeasured"
    );
    println!();

    let mut summary = vec![];
    for kind in [Kind::Public, Kind::AllAuth] {
        let rosters: Vec<(usize, PathBuf)> =
            SIZES.iter().map(|&n| (n, home.roster(kind, n))).collect();
        println!(
            "launch, {}: spawn of `mur formation ROSTER --json` to the entry's door answering",
            kind.label()
        );
        for (n, roster) in &rosters {
            let mut line = vec![];
            let mut card = vec![];
            let mut stop = vec![];
            for run in 0..=RUNS {
                let launch = launch(&home, roster, *n, kind);
                if run > 0 {
                    line.push(launch.line);
                    card.push(launch.card);
                    stop.push(launch.stop);
                }
            }
            println!("  {n:>2} members  line + GET  {}", STYLE.spread(&card));
            println!("              line alone  {}", STYLE.spread(&line));
            println!(
                "              SIGTERM to launcher exit  {}",
                STYLE.spread(&stop)
            );
            summary.push((
                format!("launch, {n} members, {}", kind.label()),
                median(&card),
            ));
        }
        println!();
        println!(
            "teardown, {}: `mur formation ROSTER --task hello`, answer line on stdout to the \
             launcher's exit",
            kind.label()
        );
        for (n, roster) in &rosters {
            let mut down = vec![];
            let mut total = vec![];
            let mut said = String::new();
            for run in 0..=RUNS {
                let task = task(&home, roster);
                if run > 0 {
                    down.push(task.teardown);
                    total.push(task.answer);
                }
                said = task.stopped;
            }
            println!("  {n:>2} members  teardown  {}", STYLE.spread(&down));
            println!("              spawn to answer  {}", STYLE.spread(&total));
            println!("              the launcher said: {said}");
            summary.push((
                format!("teardown, {n} members, {}", kind.label()),
                median(&down),
            ));
        }
        println!();
    }

    println!("summary (medians)");
    let mut rows = vec![["figure".to_string(), "measured".into(), "expected".into()]];
    for (label, took) in summary {
        let expected = match label.as_str() {
            l if l.starts_with("launch, 16") => "<= 250 ms on 2 cores",
            l if l.starts_with("teardown") => "<= 100 ms",
            _ => "-",
        };
        rows.push([label, STYLE.ms(took), expected.into()]);
    }
    table(&rows);
    println!("  load average at the end: {}", loadavg());
    println!("  (no process left behind after any run)");
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
            Command::new(MUR).arg("formation").arg(roster).args(args),
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
    /// `<kind>/roster-<n>.json` beside the capsule `<kind>/cap`, written on first use.
    fn roster(&self, kind: Kind, n: usize) -> PathBuf {
        let dir = self.root().join(kind.label().replace('+', "-"));
        let cap = dir.join("cap");
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
