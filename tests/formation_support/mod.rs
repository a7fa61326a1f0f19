//! What the formation integration tests share: a throwaway `HOME` and project directory per
//! test, capsules and rosters written on the spot (`/bin/sh` handlers), the real `mur` binary run
//! under deadlines, a launcher whose output is captured while it runs, and the `/proc` readers
//! the tests judge processes by.
//!
//! Everything here is scaffolding; the behaviour under test is always the `mur` binary's.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::fs;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// How long one short `mur` command (ps, stop, a refused launch) may take.
pub const CMD_DEADLINE: Duration = Duration::from_secs(20);
/// How long a formation may take to report itself ready, or to end once told to.
pub const FORMATION_DEADLINE: Duration = Duration::from_secs(20);

pub fn mur_bin() -> &'static str {
    env!("CARGO_BIN_EXE_mur")
}

// ---------------------------------------------------------------------------------------------
// A test's directories
// ---------------------------------------------------------------------------------------------

/// A fresh directory per test: `home/` is `HOME`, `project/` holds the roster and capsules.
/// Removed on drop.
pub struct Env {
    root: PathBuf,
    pub home: PathBuf,
    pub project: PathBuf,
}

impl Env {
    pub fn new() -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let root = std::env::temp_dir().join(format!(
            "mur-formation-test-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let home = root.join("home");
        let project = root.join("project");
        fs::create_dir_all(&home).unwrap();
        fs::create_dir_all(&project).unwrap();
        // Canonical, so paths the binary reports (workdirs) compare equal.
        let home = fs::canonicalize(home).unwrap();
        let project = fs::canonicalize(project).unwrap();
        Env {
            root,
            home,
            project,
        }
    }

    /// `~/.murmur/running`.
    pub fn running(&self) -> PathBuf {
        self.home.join(".murmur/running")
    }

    /// `~/.murmur/formations`.
    pub fn formations(&self) -> PathBuf {
        self.home.join(".murmur/formations")
    }

    /// The `frm_` directories under `~/.murmur/formations`.
    pub fn formation_dirs(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.formations())
            .map(|list| {
                list.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("frm_"))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Every file in `~/.murmur/running` (records, control files, anything).
    pub fn running_files(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.running())
            .map(|list| {
                list.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Every running record, parsed.
    pub fn records(&self) -> Vec<Value> {
        self.running_files()
            .iter()
            .filter(|n| n.starts_with("ses_") && n.ends_with(".json"))
            .filter_map(|n| fs::read(self.running().join(n)).ok())
            .map(|bytes| serde_json::from_slice(&bytes).expect("a record is JSON"))
            .collect()
    }

    /// The record of session `sid`.
    pub fn record(&self, sid: &str) -> Value {
        let bytes = fs::read(self.running().join(format!("{sid}.json")))
            .unwrap_or_else(|err| panic!("no record for {sid}: {err}"));
        serde_json::from_slice(&bytes).unwrap()
    }

    /// `HOME=<this test's home>`: every process the test's `mur` starts carries it.
    pub fn home_env(&self) -> String {
        format!("HOME={}", self.home.display())
    }

    /// Live (not zombie) processes, other than this one, whose environment holds this test's
    /// `HOME`: whatever this test's `mur` processes and their handlers left running.
    pub fn live_processes(&self) -> Vec<u32> {
        processes_with_env(&self.home_env())
    }

    /// Fail unless, within `within`, no process of this test is left.
    #[track_caller]
    pub fn assert_nothing_running(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let left = self.live_processes();
            if left.is_empty() {
                return;
            }
            if Instant::now() >= deadline {
                let described: Vec<String> = left
                    .iter()
                    .map(|p| format!("{p}: {}", cmdline(*p).join(" ")))
                    .collect();
                panic!("processes left running: {described:?}");
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// `mur ARGS` with this `HOME`, in the project directory.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(mur_bin());
        command
            .args(args)
            .env("HOME", &self.home)
            .env_remove("MURMUR_CALL_FD")
            .env_remove("MURMUR_FORMATION_LIFELINE")
            .env_remove("MURMUR_FORMATION_CHANNEL")
            .env_remove("MURMUR_FORMATION_ID")
            .env_remove("NOTIFY_SOCKET")
            .current_dir(&self.project);
        command
    }

    /// Run `mur ARGS` to its end (stdin closed) under [`CMD_DEADLINE`].
    pub fn mur(&self, args: &[&str]) -> Output {
        run(self.command(args), CMD_DEADLINE)
    }

    /// Write a capsule `dir` under the project: `murmur.json` and, when `script` is given, an
    /// executable `handler.sh`. Its directory.
    pub fn capsule(&self, dir: &str, manifest: &Value, script: Option<&str>) -> PathBuf {
        let path = self.project.join(dir);
        fs::create_dir_all(&path).unwrap();
        if let Some(script) = script {
            write_script(&path.join("handler.sh"), script);
        }
        fs::write(
            path.join("murmur.json"),
            serde_json::to_vec_pretty(manifest).unwrap(),
        )
        .unwrap();
        path
    }

    /// Write `roster` as `project/roster.json`; its path.
    pub fn roster(&self, roster: &Value) -> PathBuf {
        let path = self.project.join("roster.json");
        fs::write(&path, serde_json::to_vec_pretty(roster).unwrap()).unwrap();
        path
    }

    /// `mur formation ARGS` started, its output captured while it runs.
    pub fn launch(&self, args: &[&str]) -> Launcher {
        let mut command = self.command(&[&["formation"], args].concat());
        command.stdin(Stdio::null());
        Launcher::spawn(command)
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

pub fn write_script(path: &Path, script: &str) {
    fs::write(path, script).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A manifest for capsule `name` running `./handler.sh`: `accept` peer tasks or not, with an
/// authenticated door (no declared credentials: the operator token only) or a public one.
pub fn manifest(name: &str, accept: bool, auth: bool) -> Value {
    let mut m = json!({
        "name": name,
        "version": "1.0.0",
        "run": ["./handler.sh"],
        "lifecycle": {"task_timeout_secs": 60},
        "exports": {"peer_tasks": {"accept": accept}},
    });
    if auth {
        m["network"] = json!({"authentication": {"credentials": []}});
    }
    m
}

// ---------------------------------------------------------------------------------------------
// Running mur
// ---------------------------------------------------------------------------------------------

/// What one finished `mur` invocation did.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.status.code(),
            Some(code),
            "expected exit {code}\nstdout: {}\nstderr: {}",
            self.stdout,
            self.stderr
        );
        self
    }
}

/// Spawn `command` (stdin closed unless set) with stdout/stderr captured and wait for it, failing
/// the test if it takes longer than `within`.
pub fn run(mut command: Command, within: Duration) -> Output {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn mur");
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    let deadline = Instant::now() + within;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{command:?} did not finish within {within:?}; stderr so far: {}",
                text(&err.0)
            );
        }
        thread::sleep(Duration::from_millis(5));
    };
    // The pipes may be held by a process the command left behind; don't wait on it for ever.
    out.wait(Duration::from_secs(5));
    err.wait(Duration::from_secs(5));
    Output {
        status,
        stdout: text(&out.0),
        stderr: text(&err.0),
    }
}

/// A pipe being read to EOF on a thread: what arrived so far, and whether EOF came.
pub struct Drain(pub Arc<Mutex<Vec<u8>>>, mpsc::Receiver<()>);

impl Drain {
    /// Wait up to `within` for EOF; whether it came.
    pub fn wait(&self, within: Duration) -> bool {
        !matches!(
            self.1.recv_timeout(within),
            Err(mpsc::RecvTimeoutError::Timeout)
        )
    }
}

pub fn drain(mut pipe: impl Read + Send + 'static) -> Drain {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    let sink = buf.clone();
    thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => sink.lock().unwrap().extend_from_slice(&chunk[..n]),
            }
        }
        let _ = tx.send(());
    });
    Drain(buf, rx)
}

pub fn text(buf: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&buf.lock().unwrap()).into_owned()
}

/// A running `mur formation`: stdout read line by line (the readiness line first), stderr
/// captured. Dropped while running, it is SIGKILLed and reaped (its members end by their
/// lifelines).
pub struct Launcher {
    child: Child,
    pub pid: u32,
    stdout: Arc<Mutex<Vec<u8>>>,
    stdout_eof: mpsc::Receiver<()>,
    lines: mpsc::Receiver<String>,
    stderr: Drain,
    status: Option<ExitStatus>,
}

impl Launcher {
    pub fn spawn(mut command: Command) -> Self {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn mur formation");
        let pid = child.id();
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let (line_tx, lines) = mpsc::channel();
        let (eof_tx, stdout_eof) = mpsc::channel();
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        let sink = stdout.clone();
        thread::spawn(move || {
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        sink.lock().unwrap().extend_from_slice(&line);
                        let _ = line_tx.send(String::from_utf8_lossy(&line).trim_end().to_string());
                    }
                }
            }
            let _ = eof_tx.send(());
        });
        let stderr = drain(child.stderr.take().unwrap());
        Launcher {
            child,
            pid,
            stdout,
            stdout_eof,
            lines,
            stderr,
            status: None,
        }
    }

    /// The next stdout line, within `within`; the test fails (with stderr) otherwise.
    pub fn line(&mut self, within: Duration) -> String {
        match self.lines.recv_timeout(within) {
            Ok(line) => line,
            Err(_) => {
                let status = self.child.try_wait().ok().flatten();
                panic!(
                    "no line from the launcher within {within:?} (status {status:?}); stderr: {}",
                    self.stderr()
                )
            }
        }
    }

    /// The `--json` readiness line: `{"formation_id","members":[…]}`.
    pub fn readiness(&mut self) -> Readiness {
        let line = self.line(FORMATION_DEADLINE);
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|_| panic!("readiness line is not JSON: {line}"));
        Readiness(value)
    }

    pub fn signal(&self, signal: i32) {
        assert!(self.status.is_none(), "the launcher has already exited");
        assert_eq!(unsafe { libc::kill(self.pid as i32, signal) }, 0);
    }

    /// Wait (polling) for the launcher to exit, failing the test after `within`.
    pub fn wait(&mut self, within: Duration) -> ExitStatus {
        if let Some(status) = self.status {
            return status;
        }
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.status = Some(status);
                return status;
            }
            if Instant::now() >= deadline {
                panic!(
                    "the launcher did not exit within {within:?}; stderr: {}",
                    self.stderr()
                );
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Wait for the launcher's exit and for EOF on its output (every holder of its pipes gone).
    pub fn finish(&mut self, within: Duration) -> ExitStatus {
        let status = self.wait(within);
        assert!(
            self.stderr.wait(within),
            "the launcher's stderr is still held open (a member left running?)"
        );
        assert!(
            !matches!(
                self.stdout_eof.recv_timeout(within),
                Err(mpsc::RecvTimeoutError::Timeout)
            ),
            "the launcher's stdout is still held open"
        );
        status
    }

    pub fn stdout(&self) -> String {
        text(&self.stdout)
    }

    pub fn stderr(&self) -> String {
        text(&self.stderr.0)
    }

    /// Whether the launcher is still running (and not reaped).
    pub fn running(&mut self) -> bool {
        if self.status.is_some() {
            return false;
        }
        match self.child.try_wait().unwrap() {
            Some(status) => {
                self.status = Some(status);
                false
            }
            None => true,
        }
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The launcher's `--json` readiness line.
pub struct Readiness(pub Value);

impl Readiness {
    pub fn formation_id(&self) -> String {
        self.0["formation_id"]
            .as_str()
            .expect("formation_id")
            .to_string()
    }

    pub fn members(&self) -> Vec<Value> {
        self.0["members"].as_array().expect("members").clone()
    }

    pub fn member(&self, name: &str) -> Value {
        self.members()
            .into_iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("no member {name} in {}", self.0))
    }

    pub fn pid(&self, name: &str) -> u32 {
        self.member(name)["pid"].as_u64().expect("pid") as u32
    }

    pub fn pids(&self) -> Vec<u32> {
        self.members()
            .iter()
            .map(|m| m["pid"].as_u64().expect("pid") as u32)
            .collect()
    }

    pub fn url(&self, name: &str) -> String {
        self.member(name)["url"].as_str().expect("url").to_string()
    }

    pub fn session_id(&self, name: &str) -> String {
        self.member(name)["session_id"]
            .as_str()
            .expect("session_id")
            .to_string()
    }
}

// ---------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------

/// `/proc/<pid>/stat` split after the last `)`: `[state, ppid, …]` (field 3 onwards).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Field 22 of `/proc/<pid>/stat` (the start time in clock ticks).
pub fn process_start(pid: u32) -> Option<String> {
    stat_fields(pid).and_then(|f| f.get(22 - 3).cloned())
}

/// Whether `pid` names a process that has not yet exited: `kill(pid, 0)` finds it and it is
/// not a zombie.
pub fn alive(pid: u32) -> bool {
    let sent = unsafe { libc::kill(pid as i32, 0) };
    let found = sent == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    found && stat_fields(pid).is_some_and(|f| f[0] != "Z")
}

/// Whether `kill(pid, 0)` says there is no such process at all.
pub fn esrch(pid: u32) -> bool {
    let found = unsafe { libc::kill(pid as i32, 0) };
    found == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Fail unless every pid in `pids` has exited within `within`.
#[track_caller]
pub fn assert_gone(pids: &[u32], within: Duration) {
    let deadline = Instant::now() + within;
    while pids.iter().any(|&p| alive(p)) {
        if Instant::now() >= deadline {
            let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
            panic!("still running after {within:?}: {left:?}");
        }
        thread::sleep(Duration::from_millis(5));
    }
}

pub fn environ(pid: u32) -> Vec<u8> {
    fs::read(format!("/proc/{pid}/environ")).unwrap_or_default()
}

pub fn cmdline(pid: u32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

fn all_pids() -> Vec<u32> {
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Live processes (not this one) whose environment holds the entry `needle` (`KEY=value`).
pub fn processes_with_env(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    all_pids()
        .into_iter()
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            environ(pid)
                .split(|&b| b == 0)
                .any(|entry| entry == needle.as_bytes())
        })
        .filter(|&pid| alive(pid))
        .collect()
}

/// The children of `pid` (by the parent field of their stat).
pub fn children_of(pid: u32) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|&p| stat_fields(p).is_some_and(|f| f.get(1) == Some(&pid.to_string())))
        .collect()
}

/// Every distinct `PREFIX<b64url>.<b64url>` token text in the memory of `pid` (its writable
/// mappings), read through `/proc/<pid>/mem`. `Err` when the memory cannot be read.
pub fn tokens_in_memory(pid: u32, prefix: &str) -> Result<BTreeSet<String>, String> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).map_err(|e| e.to_string())?;
    let mut mem = fs::File::open(format!("/proc/{pid}/mem")).map_err(|e| e.to_string())?;
    let mut found = BTreeSet::new();
    let mut read_any = false;
    for line in maps.lines() {
        let mut parts = line.split_whitespace();
        let (Some(range), Some(perms)) = (parts.next(), parts.next()) else {
            continue;
        };
        if !perms.starts_with("rw") || line.contains("[vvar") || line.contains("[vsyscall]") {
            continue;
        }
        let Some((start, end)) = range.split_once('-') else {
            continue;
        };
        let (start, end) = (
            u64::from_str_radix(start, 16).unwrap(),
            u64::from_str_radix(end, 16).unwrap(),
        );
        if end - start > 256 << 20 {
            continue;
        }
        let mut bytes = vec![0u8; (end - start) as usize];
        if mem.seek(SeekFrom::Start(start)).is_err() || mem.read_exact(&mut bytes).is_err() {
            continue;
        }
        read_any = true;
        found.extend(find_tokens(&bytes, prefix));
    }
    if read_any {
        Ok(found)
    } else {
        Err(format!("no mapping of {pid} could be read"))
    }
}

/// Every `PREFIX<b64url>.<b64url>` in `bytes` whose payload decodes to JSON.
pub fn find_tokens(bytes: &[u8], prefix: &str) -> BTreeSet<String> {
    let p = prefix.as_bytes();
    let mut found = BTreeSet::new();
    let mut i = 0;
    while i + p.len() <= bytes.len() {
        if &bytes[i..i + p.len()] != p {
            i += 1;
            continue;
        }
        let mut j = i + p.len();
        while j < bytes.len()
            && (bytes[j].is_ascii_alphanumeric() || matches!(bytes[j], b'-' | b'_' | b'.'))
        {
            j += 1;
        }
        let candidate = String::from_utf8_lossy(&bytes[i..j]).into_owned();
        let parts: Vec<&str> = candidate.split('.').collect();
        if parts.len() == 3
            && parts[2].len() == 43
            && b64_decode(parts[1])
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .is_some()
        {
            found.insert(candidate);
        }
        i = j.max(i + 1);
    }
    found
}

// ---------------------------------------------------------------------------------------------
// Tokens and doors
// ---------------------------------------------------------------------------------------------

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// base64url without padding.
pub fn b64_encode(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &b)| acc | (u32::from(b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

pub fn b64_decode(text: &str) -> Option<Vec<u8>> {
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for c in text.bytes() {
        let v = B64.iter().position(|&b| b == c)? as u32;
        bits = (bits << 6) | v;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
        }
    }
    Some(out)
}

/// The JSON payload of a `prefix.payload.mac` token.
pub fn token_payload(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("a token has a payload");
    serde_json::from_slice(&b64_decode(payload).expect("b64url")).expect("JSON payload")
}

/// An HTTP answer from a door.
#[derive(Debug)]
pub struct HttpAnswer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl HttpAnswer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|_| panic!("not JSON: {} {}", self.status, self.body))
    }
}

/// `POST /` to the door at `url` (`host:port`) with `body`, `authorization` sent verbatim as
/// the header's value when given.
pub fn post(url: &str, authorization: Option<&str>, body: &Value) -> HttpAnswer {
    let body = body.to_string();
    let mut request = format!(
        "POST / HTTP/1.1\r\nHost: {url}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(value) = authorization {
        request.push_str(&format!("Authorization: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    let mut stream = TcpStream::connect(url).expect("connect to the door");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .expect("read the door's answer");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status code");
    HttpAnswer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// A JSON-RPC request body.
pub fn rpc(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

/// A `message/send` of `text`.
pub fn send_text(text: &str) -> Value {
    rpc(
        "message/send",
        json!({"message": {"kind": "message", "role": "user", "messageId": "m1",
            "parts": [{"kind": "text", "text": text}]}}),
    )
}

/// Poll `condition` until it holds, failing with `what` after `within`.
#[track_caller]
pub fn wait_until(within: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !condition() {
        if Instant::now() >= deadline {
            panic!("timed out after {within:?} waiting for {what}");
        }
        thread::sleep(Duration::from_millis(5));
    }
}
