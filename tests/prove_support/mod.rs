//! What tests/races.rs, tests/faults.rs and tests/leaks.rs share: a throwaway `HOME`, the real
//! `mur` binary run under deadlines, `mur run --json` sessions past their readiness line, a raw
//! HTTP/1.1 client on `TcpStream`, records written the way `mur` writes them (staged, renamed),
//! `/proc` readers, a tmpfs mount guard, and the loud skip line.
//!
//! Scaffolding only: every behaviour under test is the `mur` binary's.

#![allow(dead_code)]

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// The capsule extension `uri` a door names its session under (DESIGN.md §5).
pub const CAPSULE_EXTENSION_URI: &str =
    "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1";

/// How long one short `mur` command may take before the test calls it hung.
pub const CMD_DEADLINE: Duration = Duration::from_secs(30);
/// How long a session may take to print its readiness line.
pub const READY_DEADLINE: Duration = Duration::from_secs(20);

pub fn mur_bin() -> &'static str {
    env!("CARGO_BIN_EXE_mur")
}

/// Print the loud line a skipped check leaves in the test output: straight to the process's
/// stderr, past the test harness's capture, so it shows even when the test passes.
pub fn skipped(what: &str, reason: &str) {
    let line = format!("*** SKIPPED {what}: {reason} ***\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// `MUR_PROVE_SCALE` (default 1): how many times the default amount of work a stress test does.
pub fn scale() -> usize {
    std::env::var("MUR_PROVE_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(1)
}

// ---------------------------------------------------------------------------------------------
// A throwaway HOME
// ---------------------------------------------------------------------------------------------

/// A fresh directory used as `HOME`; removed (with everything in it) on drop.
pub struct Home {
    path: PathBuf,
}

impl Default for Home {
    fn default() -> Self {
        Self::new()
    }
}

impl Home {
    pub fn new() -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let path = std::env::temp_dir().join(format!(
            "mur-prove-{}-{}-{nanos:x}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir(&path).expect("create the temporary HOME");
        let path = fs::canonicalize(&path).unwrap();
        Self { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn murmur(&self) -> PathBuf {
        self.path.join(".murmur")
    }

    pub fn running(&self) -> PathBuf {
        self.murmur().join("running")
    }

    pub fn record_path(&self, session_id: &str) -> PathBuf {
        self.running().join(format!("{session_id}.json"))
    }

    /// `~/.murmur/running` created `0700` (with `~/.murmur`), as `mur run` would.
    pub fn running_dir(&self) -> PathBuf {
        for dir in [self.murmur(), self.running()] {
            if !dir.exists() {
                fs::create_dir(&dir).unwrap();
            }
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        }
        self.running()
    }

    /// The names in `~/.murmur/running` (none when it is missing), sorted.
    pub fn running_entries(&self) -> Vec<String> {
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

    /// A `mur ARGS…` command with this `HOME`, a minimal environment, run from `HOME`.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(mur_bin());
        command
            .args(args)
            .env_clear()
            .env("HOME", &self.path)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LC_ALL", "C")
            .current_dir(&self.path);
        command
    }

    /// Run `mur ARGS…` to its end under [`CMD_DEADLINE`].
    pub fn mur(&self, args: &[&str]) -> Output {
        run(self.command(args), CMD_DEADLINE)
    }

    /// `mur run --json ARGS…`, past its readiness line.
    pub fn start(&self, args: &[&str]) -> Session {
        let mut full = vec!["run", "--json"];
        full.extend_from_slice(args);
        Session::spawn(self.command(&full))
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

pub fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

// ---------------------------------------------------------------------------------------------
// Running mur to its end
// ---------------------------------------------------------------------------------------------

/// What one finished command did, and when it ran.
#[derive(Debug, Clone)]
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub started: Instant,
    pub ended: Instant,
}

impl Output {
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "exit code; stdout: {:?}; stderr: {:?}",
            self.stdout,
            self.stderr
        );
        self
    }

    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim_end())
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {:?}", self.stdout))
    }
}

/// Spawn `command` (stdin closed) with stdout/stderr captured and wait for it under `deadline`;
/// past it the command is killed and the test fails.
pub fn run(mut command: Command, deadline: Duration) -> Output {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = command.spawn().expect("spawn mur");
    let out = Drain::start(child.stdout.take().unwrap());
    let err = Drain::start(child.stderr.take().unwrap());
    let status = match wait_child(&mut child, deadline) {
        Some(status) => status,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{command:?} still running after {deadline:?}; stderr: {}",
                err.text()
            );
        }
    };
    let ended = Instant::now();
    out.wait(Duration::from_secs(5));
    err.wait(Duration::from_secs(5));
    Output {
        code: status.code(),
        stdout: out.text(),
        stderr: err.text(),
        started,
        ended,
    }
}

/// A pipe read to EOF on a thread.
pub struct Drain {
    bytes: Arc<Mutex<Vec<u8>>>,
    done: mpsc::Receiver<()>,
}

impl Drain {
    pub fn start(mut pipe: impl Read + Send + 'static) -> Drain {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let (tx, done) = mpsc::channel();
        let sink = bytes.clone();
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
        Drain { bytes, done }
    }

    /// Wait up to `within` for EOF; whether it came.
    pub fn wait(&self, within: Duration) -> bool {
        !matches!(
            self.done.recv_timeout(within),
            Err(mpsc::RecvTimeoutError::Timeout)
        )
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes.lock().unwrap()).into_owned()
    }
}

/// `try_wait` until the child exits or `within` passes.
pub fn wait_child(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().expect("wait for a child") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Poll `condition` until it holds; panic naming `what` after `within`.
#[track_caller]
pub fn wait_until(within: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------------------------

/// One live `mur run --json` child, past its readiness line. SIGTERMed (then SIGKILLed) and
/// reaped on drop if still running.
pub struct Session {
    pub child: Child,
    pub ready: Value,
    pub id: String,
    /// `host:port`.
    pub url: String,
    pub pid: u32,
    /// When the readiness line arrived.
    pub ready_at: Instant,
    stderr: Drain,
    status: Option<ExitStatus>,
}

impl Session {
    pub fn spawn(mut command: Command) -> Session {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn mur run");
        let stderr = Drain::start(child.stderr.take().unwrap());
        let (tx, rx) = mpsc::channel();
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        thread::spawn(move || {
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = tx.send(line);
            // Keep draining so a late write never blocks the session.
            let mut sink = [0u8; 4096];
            while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
        });
        let line = match rx.recv_timeout(READY_DEADLINE) {
            Ok(line) if line.ends_with('\n') => line,
            other => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "no readiness line from {command:?} ({other:?}); stderr: {}",
                    stderr.text()
                );
            }
        };
        let ready_at = Instant::now();
        let ready: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("readiness line is not JSON ({e}): {line:?}"));
        let id = ready["session_id"]
            .as_str()
            .expect("session_id")
            .to_string();
        let url = ready["url"].as_str().expect("url").to_string();
        let pid = ready["pid"].as_u64().expect("pid") as u32;
        assert_eq!(pid, child.id(), "the readiness line names mur run's pid");
        Session {
            child,
            ready,
            id,
            url,
            pid,
            ready_at,
            stderr,
            status: None,
        }
    }

    pub fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// Whether the process is still running (reaps it if it exited).
    pub fn alive(&mut self) -> bool {
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

    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own unreaped child; no pointers.
        let rc = unsafe { libc::kill(self.pid as libc::pid_t, signal) };
        assert_eq!(rc, 0, "kill({}, {signal})", self.pid);
    }

    #[track_caller]
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        if let Some(status) = self.status {
            return status;
        }
        let status = wait_child(&mut self.child, within).unwrap_or_else(|| {
            panic!(
                "mur run (pid {}) still running after {within:?}; stderr: {}",
                self.pid,
                self.stderr.text()
            )
        });
        self.status = Some(status);
        status
    }

    /// `GET /.well-known/agent-card.json` on a fresh connection.
    pub fn card(&self) -> Value {
        let answer = http(&self.url, "GET", "/.well-known/agent-card.json", None, b"")
            .expect("fetch the card");
        assert_eq!(answer.status, 200, "card: {}", answer.text());
        answer.json()
    }

    /// A blocking `message/send` of `text`: the JSON-RPC answer.
    pub fn send(&self, token: Option<&str>, text: &str) -> std::io::Result<HttpAnswer> {
        let body = send_body(text);
        http(&self.url, "POST", "/", token, body.to_string().as_bytes())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        // SAFETY: kill(2) on our own unreaped child.
        unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGTERM) };
        if wait_child(&mut self.child, Duration::from_secs(10)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A `message/send` JSON-RPC body with one text part (blocking).
pub fn send_body(text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": {"kind": "message", "role": "user", "messageId": "m-1",
                    "parts": [{"kind": "text", "text": text}]}}})
}

/// `params.sessionId` of a card's capsule extension.
pub fn session_of(card: &Value) -> Option<String> {
    card["capabilities"]["extensions"]
        .as_array()?
        .iter()
        .find(|e| e["uri"] == CAPSULE_EXTENSION_URI)?["params"]["sessionId"]
        .as_str()
        .map(str::to_string)
}

/// The answer text of a completed `message/send` answer (`None` unless it completed).
pub fn completed_text(answer: &Value) -> Option<String> {
    let task = &answer["result"];
    (task["status"]["state"] == "completed").then(|| {
        task["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string()
    })
}

// ---------------------------------------------------------------------------------------------
// A raw HTTP/1.1 client
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
pub struct HttpAnswer {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl HttpAnswer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "HTTP {} body is not JSON ({e}): {}",
                self.status,
                self.text()
            )
        })
    }
}

/// One request on a fresh connection (`Connection: close`), read to EOF.
pub fn http(
    url: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &[u8],
) -> std::io::Result<HttpAnswer> {
    let addr: SocketAddr = url.parse().expect("host:port");
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    stream.set_write_timeout(Some(Duration::from_secs(20)))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {url}\r\nConnection: close\r\n");
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if !body.is_empty() || method == "POST" || method == "PUT" {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    stream.write_all(&bytes)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    parse_answer(&answer).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not an HTTP answer: {:?}", String::from_utf8_lossy(&answer)),
        )
    })
}

/// One whole HTTP answer (head and everything after it).
pub fn parse_answer(bytes: &[u8]) -> Option<HttpAnswer> {
    let end = find(bytes, b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some(HttpAnswer {
        status,
        head,
        body: bytes[end + 4..].to_vec(),
    })
}

pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Read one response with a `Content-Length` body off a keep-alive stream, using and refilling
/// `buf` (bytes past it stay there). `None` on EOF or error before a whole response.
pub fn read_one_response(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<HttpAnswer> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some(end) = find(buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let length: usize = head
                .lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(n, _)| n.trim().eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                let status = head.split_whitespace().nth(1)?.parse().ok()?;
                let body = buf[end + 4..end + 4 + length].to_vec();
                buf.drain(..end + 4 + length);
                return Some(HttpAnswer { status, head, body });
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// `127.0.0.1:PORT` where nothing listens.
pub fn dead_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr.to_string()
}

// ---------------------------------------------------------------------------------------------
// Ids and records
// ---------------------------------------------------------------------------------------------

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A pseudo-random `u64` (not for secrets): different on every call.
pub fn random_u64() -> u64 {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    splitmix(
        nanos ^ (u64::from(std::process::id()) << 40) ^ splitmix(N.fetch_add(1, Ordering::Relaxed)),
    )
}

/// A fresh well-formed `ses_` id (UUIDv7, minted now) that no `mur` ever minted.
pub fn session_id() -> String {
    id_with("ses_")
}

pub fn id_with(prefix: &str) -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let seed = random_u64();
    let rand_a = seed & 0xfff;
    let rand_b = (splitmix(seed) & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{prefix}{:012x}7{rand_a:03x}{rand_b:016x}",
        ms & 0xffff_ffff_ffff
    )
}

/// A record with the nine required keys.
pub fn record(session_id: &str, pid: u32, process_start: &str, url: &str) -> Value {
    json!({
        "session_id": session_id,
        "url": url,
        "pid": pid,
        "process_start": process_start,
        "capsule_name": "decoy",
        "capsule_version": "0.0.1",
        "workdir": "/tmp",
        "outlives_launcher": true,
        "started_at": "2026-01-01T00:00:00Z",
    })
}

/// Write `record` as `<dir>/<session_id>.json` the way `mur` does: a `0600` staging file whose
/// name does not end in `.json`, renamed into place, so no reader ever sees it half-written.
pub fn write_record_atomically(dir: &Path, record: &Value) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let id = record["session_id"].as_str().expect("session_id");
    let target = dir.join(format!("{id}.json"));
    let staging = dir.join(format!(
        ".{id}.json.test{}.{}.tmp",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    fs::write(&staging, serde_json::to_vec(record).unwrap()).unwrap();
    fs::set_permissions(&staging, fs::Permissions::from_mode(0o600)).unwrap();
    fs::rename(&staging, &target).unwrap();
    target
}

// ---------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------

fn stat_after_comm(pid: u32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Field 22 of `/proc/<pid>/stat`, as `mur` reads it.
pub fn start_token(pid: u32) -> Option<String> {
    stat_after_comm(pid)?.get(22 - 3).cloned()
}

/// The state letter of `/proc/<pid>/stat`.
pub fn proc_state(pid: u32) -> Option<String> {
    stat_after_comm(pid)?.first().cloned()
}

/// A field of `/proc/<pid>/status` in kB (`VmHWM`, `VmRSS`) or as a count (`Threads`).
pub fn status_field(pid: u32, name: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// A process the test started (stdio closed); killed and reaped on drop.
pub struct Proc {
    pub child: Child,
    status: Option<ExitStatus>,
}

impl Proc {
    pub fn spawn(program: &str, args: &[&str]) -> Proc {
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn a test process");
        Proc {
            child,
            status: None,
        }
    }

    pub fn sleeper() -> Proc {
        Proc::spawn("sleep", &["1000"])
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn start(&self) -> String {
        start_token(self.pid()).expect("read a test process's start time")
    }

    /// Still running: not reaped, not a zombie.
    pub fn alive(&mut self) -> bool {
        if self.status.is_some() {
            return false;
        }
        match self.child.try_wait().unwrap() {
            Some(status) => {
                self.status = Some(status);
                false
            }
            None => proc_state(self.pid()).as_deref() != Some("Z"),
        }
    }

    /// How it ended, if it has.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        self.alive();
        self.status
    }

    pub fn kill(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

// ---------------------------------------------------------------------------------------------
// A small tmpfs
// ---------------------------------------------------------------------------------------------

/// A tmpfs mounted on a directory for as long as this guard lives: unmounted (lazily, if busy)
/// on drop, whatever the test did.
pub struct Mount {
    pub dir: PathBuf,
}

impl Mount {
    /// `mount -t tmpfs -o OPTIONS tmpfs DIR`; the `Err` is why it could not be done.
    pub fn tmpfs(dir: &Path, options: &str) -> Result<Mount, String> {
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs -o {options} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Mount {
            dir: dir.to_path_buf(),
        })
    }

    /// `mount -o remount,MODE DIR` (`ro` or `rw`).
    #[track_caller]
    pub fn remount(&self, mode: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,{mode}")])
            .arg(&self.dir)
            .status()
            .expect("run mount");
        assert!(status.success(), "remount {mode} {}", self.dir.display());
    }

    /// Write a file until the filesystem says it is full; how many bytes went in.
    pub fn fill(&self) -> u64 {
        let mut file = fs::File::create(self.dir.join("filler")).expect("create the filler");
        let chunk = [0x5au8; 4096];
        let mut written = 0u64;
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(_) => break,
            }
        }
        let _ = file.sync_all();
        written
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&self.dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}
