//! Leaks (DESIGN.md §3, §5, §7): a whole formation run under `strace -f`, every `execve`, `write`,
//! `writev`, `pwrite*`, `send*` of every process and thread it starts recorded with the
//! descriptor's target (`-yy`), then every secret — door tokens (`mdt1`), control tokens
//! (`ctl1`), formation tokens (`mft1`) and formation door keys — looked for in all of it.
//!
//! A secret may appear only where the design puts it:
//! - door and control tokens: in the running records and control files (and their staging files)
//!   under `~/.murmur/running`;
//! - formation door keys and `mft1` tokens: in the channel pipes (launcher → member), identified
//!   from the log as the pipe each member takes over as `MURMUR_FORMATION_CHANNEL`;
//! - any token: right after `Bearer ` in HTTP on a loopback TCP socket (door probes, calls).
//!
//! Never in an `execve` argv or environment, never in stdout/stderr or any other pipe, socket or
//! file. The runs are started under `umask 000`, and every file `mur` leaves under `HOME` must
//! still have its mode: directories 0700, records, control files and markers 0600.
//!
//! Needs `strace` (skipped loudly without it).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use common::{
    home::Home,
    http::http,
    run::{Drain, mur_bin, run, wait_child},
    session::{completed_text, send_body},
    skip::skipped,
    tokens::is_token,
};
use serde_json::{Value, json};

/// How long a traced formation may take to become ready or to end.
const TRACED_DEADLINE: Duration = Duration::from_secs(90);

const TRACED_SYSCALLS: &str = "trace=execve,execveat,write,writev,pwrite64,pwritev,pwritev2,\
    sendto,sendmsg,sendmmsg,sendfile,splice,copy_file_range,fcntl";

// ---------------------------------------------------------------------------------------------
// The formation
// ---------------------------------------------------------------------------------------------

const LEAD: &str = "#!/bin/sh\n\
text=$(cat)\n\
r=$(printf '%s' \"$text\" | \"$MUR\" formation call reviewer -)\n\
s=$(\"$MUR\" formation call summarizer \"$text\")\n\
printf 'lead: %s + %s\\n' \"$r\" \"$s\"\n";
const REVIEWER: &str = "#!/bin/sh\nprintf 'reviewed[%s]%s' \"$(cat)\" \"${MOOD:+ ($MOOD)}\"\n";
const SUMMARIZER: &str = "#!/bin/sh\nprintf 'summary[%s]' \"$(cat)\"\n";

/// A root holding `home/` (the `HOME`) and `project/` (roster and capsules, outside `HOME` so
/// every file under `HOME` is one `mur` made). Removed on drop.
struct Dirs {
    _root: Home,
    root: PathBuf,
    home: PathBuf,
    project: PathBuf,
}

impl Dirs {
    fn new() -> Dirs {
        let root = Home::new();
        let root_path = root.path().to_path_buf();
        let (home, project) = (root_path.join("home"), root_path.join("project"));
        fs::create_dir(&home).unwrap();
        fs::create_dir(&project).unwrap();
        Dirs {
            _root: root,
            root: root_path,
            home,
            project,
        }
    }

    fn write_member_capsule(&self, name: &str, manifest: Value, script: &str) {
        let dir = self.project.join(name);
        fs::create_dir_all(&dir).unwrap();
        let handler = dir.join("handler.sh");
        fs::write(&handler, script).unwrap();
        fs::set_permissions(&handler, fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(
            dir.join("murmur.json"),
            serde_json::to_vec_pretty(&manifest).unwrap(),
        )
        .unwrap();
    }

    /// lead (entry) calls reviewer and summarizer; every door authenticates; the reviewer also
    /// declares a credential and control.
    fn roster(&self) -> PathBuf {
        let base = |name: &str, accept: bool| {
            json!({
                "name": name,
                "version": "1.0.0",
                "run": ["./handler.sh"],
                "lifecycle": {"task_timeout_secs": 60},
                "exports": {"peer_tasks": {"accept": accept}},
                "network": {"authentication": {"credentials": []}},
            })
        };
        self.write_member_capsule("lead", base("lead", false), LEAD);
        let mut reviewer = base("reviewer", true);
        reviewer["network"]["authentication"]["credentials"] =
            json!([{"name": "client", "scopes": ["message/send", "tasks/get"]}]);
        reviewer["control"] = json!({"settings": ["MOOD"], "secrets": ["API_KEY"]});
        self.write_member_capsule("reviewer", reviewer, REVIEWER);
        self.write_member_capsule("summarizer", base("summarizer", true), SUMMARIZER);
        let roster = self.project.join("roster.json");
        fs::write(
            &roster,
            json!({
                "members": [
                    {"name": "lead", "capsule": "lead", "entry": true},
                    {"name": "reviewer", "capsule": "reviewer"},
                    {"name": "summarizer", "capsule": "summarizer"},
                ],
                "reachability": [{"from": "lead", "to": ["reviewer", "summarizer"]}],
            })
            .to_string(),
        )
        .unwrap();
        roster
    }

    fn running(&self) -> PathBuf {
        self.home.join(".murmur/running")
    }

    /// `sh -c 'umask 000; exec strace … mur formation ROSTER ARGS…'`.
    fn traced_formation(&self, log: &Path, roster: &Path, args: &[&str]) -> Command {
        let mut command = Command::new("sh");
        command
            .args([
                "-c",
                "umask 000; exec \"$@\"",
                "sh",
                "strace",
                "-f",
                "--seccomp-bpf",
            ])
            .args([
                "-qq",
                "-v",
                "-yy",
                "-s",
                "4000000",
                "-e",
                TRACED_SYSCALLS,
                "-o",
            ])
            .arg(log)
            .arg(mur_bin())
            .arg("formation")
            .arg(roster)
            .args(args)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LC_ALL", "C")
            .current_dir(&self.project)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }
}

/// `None` when `strace -f` can trace here; otherwise why not.
fn strace_unavailable() -> Option<String> {
    let installed = Command::new("sh")
        .args(["-c", "command -v strace"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        return Some("strace is not installed (command -v strace)".into());
    }
    let out = Command::new("strace")
        .args([
            "-f",
            "--seccomp-bpf",
            "-qq",
            "-o",
            "/dev/null",
            "-e",
            "trace=write",
            "true",
        ])
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "strace cannot trace here ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Some(format!("strace cannot be run: {e}")),
    }
}

// ---------------------------------------------------------------------------------------------
// Modes under HOME
// ---------------------------------------------------------------------------------------------

/// Walk everything under `home` (not `home` itself): every directory must be 0700 and every
/// file 0600. Returns how many directories and files were checked.
fn assert_private_tree(home: &Path, when: &str) -> (usize, usize) {
    let (mut dirs, mut files) = (0, 0);
    let mut wrong = vec![];
    let mut stack = vec![home.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(listing) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in listing.flatten() {
            let path = entry.path();
            let Ok(meta) = fs::symlink_metadata(&path) else {
                continue; // gone meanwhile
            };
            let mode = meta.permissions().mode() & 0o7777;
            if meta.is_dir() {
                dirs += 1;
                if mode != 0o700 {
                    wrong.push(format!("{} is a directory at {mode:o}", path.display()));
                }
                stack.push(path);
            } else {
                files += 1;
                if !meta.is_file() || mode != 0o600 {
                    wrong.push(format!(
                        "{} is {:?} at {mode:o}",
                        path.display(),
                        meta.file_type()
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{when}, under umask 000: {wrong:#?}");
    (dirs, files)
}

// ---------------------------------------------------------------------------------------------
// Reading the strace log
// ---------------------------------------------------------------------------------------------

/// One traced call that carries bytes (or, for `execve`, argv and environment).
#[derive(Debug)]
struct Call {
    pid: u32,
    syscall: String,
    /// The `-yy` annotation of the descriptor written to (a path, `pipe:[N]`,
    /// `TCP:[a->b]`, `UNIX-STREAM:[…]`), or `execve`.
    target: String,
    /// The fd number (`None` for `execve`).
    fd: Option<i32>,
    /// Every quoted string in the call's arguments, still escaped as strace prints them (a
    /// token's characters are never escaped, so a token reads the same either way).
    strings: Vec<String>,
    truncated: bool,
}

/// The quoted strings of `args` (strace's C-style escaping kept), and whether any was cut short
/// (`"…"...`).
fn quoted_strings(args: &str) -> (Vec<String>, bool) {
    let bytes = args.as_bytes();
    let (mut strings, mut truncated) = (vec![], false);
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'"' {
            i += 1;
            continue;
        }
        let start = i + 1;
        let mut j = start;
        while j < bytes.len() && bytes[j] != b'"' {
            j += if bytes[j] == b'\\' { 2 } else { 1 };
        }
        let end = j.min(bytes.len());
        strings.push(args[start..end].to_string());
        if args[end..].starts_with("\"...") {
            truncated = true;
        }
        i = end + 1;
    }
    (strings, truncated)
}

/// Parse the log: every call that carries bytes, in log order, plus each `fcntl` on a pipe.
fn parse_log(log: &str) -> (Vec<Call>, Vec<(u32, i32, String)>) {
    let mut calls = vec![];
    let mut fcntls = vec![];
    for line in log.lines() {
        let Some((pid, rest)) = line.split_once(' ') else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        let rest = rest.trim_start();
        if rest.starts_with("<...") || rest.starts_with("+++") || rest.starts_with("---") {
            continue;
        }
        let Some((syscall, args)) = rest.split_once('(') else {
            continue;
        };
        if syscall == "execve" || syscall == "execveat" {
            let (strings, truncated) = quoted_strings(args);
            // Without -v strace abbreviates the environment as `/* N vars */`: unscanned.
            let truncated = truncated || args.contains(" vars */");
            calls.push(Call {
                pid,
                syscall: syscall.into(),
                target: "execve".into(),
                fd: None,
                strings,
                truncated,
            });
            continue;
        }
        // `FD<annotation>, …`
        let digits: String = args.chars().take_while(char::is_ascii_digit).collect();
        let Ok(fd) = digits.parse::<i32>() else {
            continue;
        };
        let after = &args[digits.len()..];
        let target = match after
            .strip_prefix('<')
            .and_then(|a| a.find(">, ").map(|end| &a[..end]))
        {
            Some(target) => target.to_string(),
            None => format!("fd {fd} (unannotated)"),
        };
        if syscall == "fcntl" {
            fcntls.push((pid, fd, target));
            continue;
        }
        let (strings, truncated) = quoted_strings(after);
        calls.push(Call {
            pid,
            syscall: syscall.into(),
            target,
            fd: Some(fd),
            strings,
            truncated,
        });
    }
    (calls, fcntls)
}

/// Every `PREFIX<b64url>.<b64url(32 bytes)>` in `text` whose payload decodes to JSON.
fn tokens_in(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(prefix) {
        let start = from + at;
        let end = text[start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
            .map_or(text.len(), |n| start + n);
        let candidate = &text[start..end];
        if is_token(candidate) {
            found.insert(candidate.to_string());
        }
        from = start + prefix.len();
    }
    found
}

/// The values of `\"door_key\":\"…\"` in an escaped channel line.
fn door_keys_in(text: &str) -> BTreeSet<String> {
    let marker = "door_key\\\":\\\"";
    text.match_indices(marker)
        .map(|(at, _)| {
            text[at + marker.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
                .collect::<String>()
        })
        .filter(|key| key.len() >= 40)
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    DoorToken,
    ControlToken,
    FormationToken,
    DoorKey,
}

/// What the log shows about where secrets went.
#[derive(Default, Debug)]
struct Findings {
    secrets: BTreeMap<String, Kind>,
    execves: usize,
    calls: usize,
    /// Writes to descriptors 1 and 2 (stdout and stderr of some process).
    stdio_writes: usize,
    targets: usize,
    channel_pipes: BTreeSet<String>,
    /// Allowed appearances, by where.
    allowed: BTreeMap<&'static str, usize>,
    leaks: Vec<String>,
    truncated: Vec<String>,
    opaque: Vec<String>,
}

fn is_loopback_tcp(target: &str) -> bool {
    target
        .strip_prefix("TCP:[")
        .and_then(|t| t.strip_suffix(']'))
        .and_then(|t| t.split_once("->"))
        .is_some_and(|(a, b)| a.starts_with("127.0.0.1:") && b.starts_with("127.0.0.1:"))
}

/// Whether `name` (a file in the running dir) is a record or control file, or the staging file
/// of one (`.<name>.<pid>.<n>.tmp`).
fn is_record_or_control(name: &str) -> bool {
    let base = name
        .strip_prefix('.')
        .and_then(|n| n.strip_suffix(".tmp"))
        .and_then(|n| n.rsplitn(3, '.').nth(2))
        .unwrap_or(name);
    base.starts_with("ses_") && (base.ends_with(".json") || base.ends_with(".control"))
}

/// What the strace `log` of a run under `home` shows about where secrets went.
fn analyse(log: &str, home: &Path) -> Findings {
    let (calls, fcntls) = parse_log(log);
    let running = home.join(".murmur/running");
    let running = running.to_string_lossy();
    let mut f = Findings {
        calls: calls.len(),
        stdio_writes: calls.iter().filter(|c| matches!(c.fd, Some(1 | 2))).count(),
        ..Findings::default()
    };
    find_channel_pipes(&mut f, &calls, &fcntls);
    let streams = streams_by_target(&mut f, &calls);
    f.targets = streams.len();
    find_secrets(&mut f, log, &streams);
    place_secrets(&mut f, &streams, &running);
    f
}

/// Counts the execves and records the channel pipes: the pipe each member process takes over
/// as MURMUR_FORMATION_CHANNEL=<fd>.
fn find_channel_pipes(f: &mut Findings, calls: &[Call], fcntls: &[(u32, i32, String)]) {
    let mut channel_fd: BTreeMap<u32, i32> = BTreeMap::new();
    for call in calls.iter().filter(|c| c.target == "execve") {
        f.execves += 1;
        for s in &call.strings {
            if let Some(fd) = s.strip_prefix("MURMUR_FORMATION_CHANNEL=") {
                channel_fd.insert(call.pid, fd.parse().unwrap_or(-1));
            }
        }
    }
    // Only a member's first fcntl on that number is the channel being taken over: once the
    // channel closes, the number can be reused for another pipe (a handler's stdout, say).
    let mut taken: BTreeSet<u32> = BTreeSet::new();
    for (pid, fd, target) in fcntls {
        if channel_fd.get(pid) == Some(fd) && taken.insert(*pid) && target.starts_with("pipe:[") {
            f.channel_pipes.insert(target.clone());
        }
    }
}

/// Every byte stream, concatenated per target in log order (a secret split across writes is
/// still found); truncated and opaque calls are noted in `f` on the way.
fn streams_by_target(f: &mut Findings, calls: &[Call]) -> BTreeMap<String, String> {
    let mut streams: BTreeMap<String, String> = BTreeMap::new();
    for call in calls {
        if call.truncated {
            f.truncated
                .push(format!("{} {} {}", call.pid, call.syscall, call.target));
        }
        if matches!(
            call.syscall.as_str(),
            "sendfile" | "splice" | "copy_file_range"
        ) {
            f.opaque
                .push(format!("{} {} {}", call.pid, call.syscall, call.target));
        }
        let key = if call.target == "execve" {
            format!("execve by {}", call.pid)
        } else {
            call.target.clone()
        };
        let stream = streams.entry(key).or_default();
        for s in &call.strings {
            stream.push_str(s);
            if call.target == "execve" {
                stream.push('\n');
            }
        }
    }
    streams
}

/// The secrets: every token anywhere in the log, and the door keys in the channel lines.
fn find_secrets(f: &mut Findings, log: &str, streams: &BTreeMap<String, String>) {
    for (prefix, kind) in [
        ("mdt1.", Kind::DoorToken),
        ("ctl1.", Kind::ControlToken),
        ("mft1.", Kind::FormationToken),
    ] {
        for token in tokens_in(log, prefix) {
            f.secrets.insert(token, kind);
        }
    }
    for (target, stream) in streams {
        if f.channel_pipes.contains(target) {
            for key in door_keys_in(stream) {
                f.secrets.insert(key, Kind::DoorKey);
            }
        }
    }
}

/// Every appearance of every secret in `streams`, counted as allowed (by where) or noted as a
/// leak.
fn place_secrets(f: &mut Findings, streams: &BTreeMap<String, String>, running: &str) {
    for (target, stream) in streams {
        for (secret, kind) in &f.secrets {
            for (at, _) in stream.match_indices(secret.as_str()) {
                let place = allowed_place(&f.channel_pipes, running, target, stream, at, *kind);
                match place {
                    Some(place) => *f.allowed.entry(place).or_default() += 1,
                    None => f.leaks.push(format!(
                        "{kind:?} {}… in {target}: …{}…",
                        &secret[..12.min(secret.len())],
                        &stream[at.saturating_sub(80)..at]
                    )),
                }
            }
        }
    }
}

/// Where a secret of `kind` found at byte `at` of `target`'s `stream` is allowed to be, or
/// `None` when it is a leak.
fn allowed_place(
    channel_pipes: &BTreeSet<String>,
    running: &str,
    target: &str,
    stream: &str,
    at: usize,
    kind: Kind,
) -> Option<&'static str> {
    let file_name = target
        .strip_prefix(&format!("{running}/"))
        .filter(|n| !n.contains('/'));
    if target.starts_with("execve") {
        None
    } else if file_name.is_some_and(is_record_or_control)
        && matches!(kind, Kind::DoorToken | Kind::ControlToken)
    {
        Some("record/control files")
    } else if channel_pipes.contains(target) && matches!(kind, Kind::DoorKey | Kind::FormationToken)
    {
        Some("channel pipes")
    } else if is_loopback_tcp(target) && kind != Kind::DoorKey && stream[..at].ends_with("Bearer ")
    {
        Some("loopback HTTP Authorization")
    } else {
        None
    }
}

#[track_caller]
fn assert_no_leaks(f: &Findings, what: &str) {
    println!(
        "{what}: {} traced calls carrying bytes ({} execve, {} writes to stdout/stderr) to {} targets; {} channel pipes; secrets: {} \
         ({} door tokens, {} control, {} formation tokens, {} door keys); allowed appearances {:?}; \
         {} leaks; {} truncated strings; {} opaque copies",
        f.calls,
        f.execves,
        f.stdio_writes,
        f.targets,
        f.channel_pipes.len(),
        f.secrets.len(),
        f.secrets
            .values()
            .filter(|k| **k == Kind::DoorToken)
            .count(),
        f.secrets
            .values()
            .filter(|k| **k == Kind::ControlToken)
            .count(),
        f.secrets
            .values()
            .filter(|k| **k == Kind::FormationToken)
            .count(),
        f.secrets.values().filter(|k| **k == Kind::DoorKey).count(),
        f.allowed,
        f.leaks.len(),
        f.truncated.len(),
        f.opaque.len(),
    );
    assert!(
        f.truncated.is_empty(),
        "{what}: strings strace cut short: {:?}",
        f.truncated
    );
    assert!(
        f.opaque.is_empty(),
        "{what}: copies the log cannot show: {:?}",
        f.opaque
    );
    assert!(
        f.leaks.is_empty(),
        "{what}: {} leaks:\n{}",
        f.leaks.len(),
        f.leaks.join("\n")
    );
    // The log saw every kind of secret the run makes.
    for kind in [
        Kind::DoorToken,
        Kind::ControlToken,
        Kind::FormationToken,
        Kind::DoorKey,
    ] {
        assert!(
            f.secrets.values().any(|k| *k == kind),
            "{what}: no {kind:?} seen in the log: the scan saw nothing"
        );
    }
    assert_eq!(
        f.channel_pipes.len(),
        3,
        "{what}: one channel pipe per member"
    );
    assert!(
        f.allowed
            .get("loopback HTTP Authorization")
            .is_some_and(|&n| n > 0)
    );
}

/// Fail if any secret appears in `text` (what the test itself read from a process).
#[track_caller]
fn assert_clean(text: &str, secrets: &BTreeMap<String, Kind>, what: &str) {
    for secret in secrets.keys() {
        assert!(!text.contains(secret.as_str()), "{what} holds a secret");
    }
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

#[test]
fn a_formation_task_under_strace_leaks_no_secret_and_umask_000_widens_nothing() {
    if let Some(why) = strace_unavailable() {
        skipped(
            "a_formation_task_under_strace_leaks_no_secret_and_umask_000_widens_nothing",
            &format!("the strace leak scan (--task): {why}"),
        );
        return;
    }
    let t0 = Instant::now();
    let dirs = Dirs::new();
    let roster = dirs.roster();
    let log = dirs.root.join("strace.log");
    let out = run(
        dirs.traced_formation(&log, &roster, &["--task", "hello"]),
        TRACED_DEADLINE,
    );
    out.expect_code(0);
    assert_eq!(out.stdout, "lead: reviewed[hello] + summary[hello]\n");
    let text = fs::read_to_string(&log).expect("the strace log");
    let findings = analyse(&text, &dirs.home);
    assert_no_leaks(&findings, "formation --task under strace");
    assert_clean(&out.stdout, &findings.secrets, "the launcher's stdout");
    assert_clean(&out.stderr, &findings.secrets, "the launcher's stderr");
    let (d, f) = assert_private_tree(&dirs.home, "after the run");
    println!(
        "formation --task: {d} directories and {f} files under HOME at 0700/0600 after a umask-000 run; \
         log {} kB; {:.1?}",
        text.len() / 1024,
        t0.elapsed()
    );
}

/// strace, and once known the launcher under it: both killed if the test fails before they
/// end (strace's tracees go with their tracer's kill only if the launcher goes).
struct Reaper(std::process::Child, Option<u32>);

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(pid) = self.1 {
            // SAFETY: kill(2) with plain integers.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A served formation under strace: the tracer, its stderr drained, and its stdout both sent
/// line by line and kept whole.
struct TracedServe {
    child: Reaper,
    stderr: Drain,
    lines: mpsc::Receiver<String>,
    stdout_seen: Arc<Mutex<String>>,
}

/// Starts `mur formation ROSTER --json` under strace, logging to `log`.
fn spawn_traced_serve(dirs: &Dirs, log: &Path, roster: &Path) -> TracedServe {
    let mut child = dirs
        .traced_formation(log, roster, &["--json"])
        .spawn()
        .expect("spawn strace");
    let stderr = Drain::start(child.stderr.take().unwrap());
    let (tx, lines) = mpsc::channel();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let stdout_seen = Arc::new(Mutex::new(String::new()));
    {
        let seen = stdout_seen.clone();
        thread::spawn(move || {
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                seen.lock().unwrap().push_str(&line);
                let _ = tx.send(line.clone());
                line.clear();
            }
        });
    }
    TracedServe {
        child: Reaper(child, None),
        stderr,
        lines,
        stdout_seen,
    }
}

/// The members of the readiness line, which must name three.
fn readiness_members(traced: &TracedServe) -> Vec<Value> {
    let ready: Value = match traced.lines.recv_timeout(TRACED_DEADLINE) {
        Ok(line) => serde_json::from_str(&line).expect("a readiness line"),
        Err(_) => panic!("no readiness line; stderr: {}", traced.stderr.text()),
    };
    let members = ready["members"].as_array().expect("members").clone();
    assert_eq!(members.len(), 3, "{ready}");
    members
}

/// The record of session `sid`, read from the running directory.
fn read_record(dirs: &Dirs, sid: &str) -> Value {
    serde_json::from_slice(
        &fs::read(dirs.running().join(format!("{sid}.json"))).expect("a member's record"),
    )
    .unwrap()
}

/// The tokens the members' records hold (door tokens and credentials) and the launcher they
/// name; checks on the way that every member runs under umask 000.
fn record_tokens(dirs: &Dirs, members: &[Value]) -> (BTreeMap<String, Kind>, Option<u32>) {
    let mut from_files: BTreeMap<String, Kind> = BTreeMap::new();
    let mut launcher = None;
    for member in members {
        let sid = member["session_id"].as_str().unwrap();
        let record = read_record(dirs, sid);
        launcher = record["formation_launcher"]["pid"]
            .as_u64()
            .map(|p| p as u32);
        from_files.insert(
            record["door_token"].as_str().unwrap().to_string(),
            Kind::DoorToken,
        );
        for token in record["credentials"]
            .as_object()
            .into_iter()
            .flat_map(|c| c.values())
        {
            from_files.insert(token.as_str().unwrap().to_string(), Kind::DoorToken);
        }
        let pid = member["pid"].as_u64().unwrap() as u32;
        assert_eq!(
            status_umask(pid).as_deref(),
            Some("0000"),
            "member {sid} runs under umask 000"
        );
    }
    (from_files, launcher)
}

/// The member named `name`.
fn member<'a>(members: &'a [Value], name: &str) -> &'a Value {
    members.iter().find(|m| m["name"] == name).unwrap()
}

/// A `message/send` of `text` to the entry's door at `url`: the completed task's text.
fn send_to_entry(url: &str, token: &str, text: &str) -> String {
    let answer = http(
        url,
        "POST",
        "/",
        Some(token),
        send_body(text).to_string().as_bytes(),
    )
    .expect("message/send to the entry");
    assert_eq!(answer.status, 200, "{}", answer.text());
    completed_text(&answer.json()).unwrap_or_else(|| panic!("{}", answer.text()))
}

/// Work it: a task through the entry (lead calls both peers with formation tokens), a control
/// setting on the reviewer (with the `control` token), and another task that sees it.
fn work_the_formation(dirs: &Dirs, members: &[Value], control: &str) {
    let lead = members.iter().find(|m| m["entry"] == true).unwrap();
    let lead_record = read_record(dirs, lead["session_id"].as_str().unwrap());
    let lead_token = lead_record["door_token"].as_str().unwrap();
    let lead_url = lead["url"].as_str().unwrap();
    assert_eq!(
        send_to_entry(lead_url, lead_token, "hello"),
        "lead: reviewed[hello] + summary[hello]"
    );
    let put = http(
        member(members, "reviewer")["url"].as_str().unwrap(),
        "PUT",
        "/control/settings/MOOD",
        Some(control),
        br#"{"value": "calm"}"#,
    )
    .expect("PUT a control setting");
    assert!(
        (200..300).contains(&put.status),
        "{} {}",
        put.status,
        put.text()
    );
    assert_eq!(
        send_to_entry(lead_url, lead_token, "again"),
        "lead: reviewed[again] (calm) + summary[again]"
    );
}

/// Stops the formation through its `launcher`; strace ends when every tracee has, and every
/// record and control file is gone.
fn stop_traced(traced: &mut TracedServe, dirs: &Dirs, launcher: u32) {
    assert_eq!(
        // SAFETY: kill(2) with plain integers, on the launcher this test started under strace.
        unsafe { libc::kill(launcher as libc::pid_t, libc::SIGTERM) },
        0
    );
    let status =
        wait_child(&mut traced.child.0, TRACED_DEADLINE).expect("strace ends with the formation");
    traced.child.1 = None;
    assert_eq!(status.code(), Some(143), "stderr: {}", traced.stderr.text());
    traced.stderr.wait(Duration::from_secs(5));
    assert!(
        fs::read_dir(dirs.running()).unwrap().next().is_none(),
        "every record and control file is gone"
    );
}

#[test]
fn a_served_formation_under_strace_leaks_no_secret_and_umask_000_widens_nothing() {
    if let Some(why) = strace_unavailable() {
        skipped(
            "a_served_formation_under_strace_leaks_no_secret_and_umask_000_widens_nothing",
            &format!("the strace leak scan (served): {why}"),
        );
        return;
    }
    let t0 = Instant::now();
    let dirs = Dirs::new();
    let roster = dirs.roster();
    let log = dirs.root.join("strace.log");
    let mut traced = spawn_traced_serve(&dirs, &log, &roster);
    let members = readiness_members(&traced);

    // While it serves: the records and the control file hold the tokens the test will look for.
    let (mut from_files, launcher) = record_tokens(&dirs, &members);
    traced.child.1 = launcher;
    let control_path = dirs.running().join(format!(
        "{}.control",
        member(&members, "reviewer")["session_id"].as_str().unwrap()
    ));
    let control = fs::read_to_string(&control_path).expect("the reviewer's control file");
    from_files.insert(control.trim().to_string(), Kind::ControlToken);
    assert_eq!(
        from_files.len(),
        5,
        "3 operator tokens, 1 credential token, 1 control token"
    );
    let (d, f) = assert_private_tree(&dirs.home, "while it serves");
    println!(
        "served formation: {d} directories and {f} files under HOME at 0700/0600 while it serves"
    );

    work_the_formation(&dirs, &members, control.trim());
    stop_traced(
        &mut traced,
        &dirs,
        launcher.expect("the records name the launcher"),
    );
    let (d, f) = assert_private_tree(&dirs.home, "after it ended");

    let text = fs::read_to_string(&log).expect("the strace log");
    let findings = analyse(&text, &dirs.home);
    for (token, kind) in &from_files {
        assert_eq!(
            findings.secrets.get(token),
            Some(kind),
            "the log shows the {kind:?} the files held"
        );
    }
    assert_no_leaks(&findings, "served formation under strace");
    assert_clean(
        &traced.stdout_seen.lock().unwrap(),
        &findings.secrets,
        "the launcher's stdout",
    );
    assert_clean(
        &traced.stderr.text(),
        &findings.secrets,
        "the launcher's stderr",
    );
    println!(
        "served formation: {d} directories and {f} files under HOME at 0700/0600 after it ended; \
         log {} kB; {:.1?}",
        text.len() / 1024,
        t0.elapsed()
    );
}

/// The `Umask:` line of `/proc/<pid>/status`.
fn status_umask(pid: u32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .map(|v| v.trim().to_string())
}
