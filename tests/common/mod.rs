//! What the integration tests of `mur ps`, `mur stop` and `mur token` share: a throwaway `HOME`,
//! running the real binary under a deadline, records written the way `mur run` writes them,
//! processes the test owns, and a tiny door (an HTTP responder thread) that answers as a session.
//!
//! Everything here is test scaffolding; the behaviour under test is always exercised through the
//! `mur` binary itself.

#![allow(dead_code)]

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// The capsule extension `uri` a door names its session under (DESIGN.md §5).
pub const CAPSULE_EXTENSION_URI: &str =
    "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1";

/// How long any single `mur` invocation may take before the test calls it hung.
pub const MUR_DEADLINE: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// Temporary HOME
// ---------------------------------------------------------------------------------------------

/// A fresh directory under the system temp dir, used as `HOME`; removed (with everything in it)
/// on drop.
pub struct TempHome {
    path: PathBuf,
}

impl TempHome {
    pub fn new() -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let path = std::env::temp_dir().join(format!(
            "mur-it-{}-{}-{nanos:x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir(&path).expect("create the temporary HOME");
        Self { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `$HOME/.murmur`.
    pub fn murmur(&self) -> PathBuf {
        self.path.join(".murmur")
    }

    /// `$HOME/.murmur/running`.
    pub fn running(&self) -> PathBuf {
        self.murmur().join("running")
    }

    /// `$HOME/.murmur/running`, created at `0700` (with `~/.murmur`) as `mur run` would.
    pub fn running_dir(&self) -> PathBuf {
        for dir in [self.murmur(), self.running()] {
            if !dir.exists() {
                fs::create_dir(&dir).unwrap();
            }
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        }
        self.running()
    }

    /// `$HOME/.murmur/running/<session_id>.json`.
    pub fn record_path(&self, session_id: &str) -> PathBuf {
        self.running().join(format!("{session_id}.json"))
    }

    /// `$HOME/.murmur/running/<session_id>.control`.
    pub fn control_path(&self, session_id: &str) -> PathBuf {
        self.running().join(format!("{session_id}.control"))
    }

    /// Write `record` as `<session_id>.json` (directory `0700`, file `0600`).
    pub fn write_record(&self, record: &Value) -> PathBuf {
        let id = record["session_id"]
            .as_str()
            .expect("a record has a session_id");
        let path = self.running_dir().join(format!("{id}.json"));
        write_private(&path, &serde_json::to_vec_pretty(record).unwrap());
        path
    }

    /// Write `token` as `<session_id>.control` (`0600`).
    pub fn write_control(&self, session_id: &str, token: &str) -> PathBuf {
        let path = self.running_dir().join(format!("{session_id}.control"));
        write_private(&path, token.as_bytes());
        path
    }

    /// The names of every entry in the running directory, sorted.
    pub fn running_entries(&self) -> Vec<String> {
        let mut names: Vec<String> = match fs::read_dir(self.running()) {
            Ok(listing) => listing
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => vec![],
        };
        names.sort();
        names
    }

    /// A `Command` running the `mur` binary with this `HOME` and an otherwise minimal environment.
    pub fn mur_command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(mur_bin());
        command
            .args(args)
            .env_clear()
            .env("HOME", &self.path)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LC_ALL", "C");
        command
    }

    /// Run `mur ARGS…` with this `HOME` and wait for it (under [`MUR_DEADLINE`]).
    pub fn mur(&self, args: &[&str]) -> Run {
        run(self.mur_command(args))
    }
}

impl Default for TempHome {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TempHome {
    fn drop(&mut self) {
        // Make sure nothing the test re-moded keeps the removal out.
        for dir in [self.murmur(), self.running()] {
            if fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
                let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o700));
            }
        }
        let _ = fs::remove_dir_all(&self.path);
    }
}

pub fn write_private(path: &Path, bytes: &[u8]) {
    fs::write(path, bytes).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
}

/// The permission bits of `path` (not following a final link).
pub fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path)
        .unwrap_or_else(|err| panic!("{}: {err}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

pub fn mur_bin() -> &'static str {
    env!("CARGO_BIN_EXE_mur")
}

// ---------------------------------------------------------------------------------------------
// Running mur
// ---------------------------------------------------------------------------------------------

/// What one `mur` invocation did.
#[derive(Debug)]
pub struct Run {
    /// The exit code; `None` if it died of a signal.
    pub code: Option<i32>,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    /// Panic, showing everything, unless the exit code is `code`.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "expected exit {code}; got {:?}\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// stdout parsed as one JSON document.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim_end()).unwrap_or_else(|err| {
            panic!(
                "stdout is not one JSON document ({err}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

/// Spawn `command` with stdin closed and stdout/stderr captured, and wait for it under
/// [`MUR_DEADLINE`]: a hang is a test failure, never a stuck suite.
pub fn run(mut command: Command) -> Run {
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mur");
    let stdout = drain(child.stdout.take().unwrap());
    let stderr = drain(child.stderr.take().unwrap());
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > MUR_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mur did not finish within {MUR_DEADLINE:?}");
        }
        thread::sleep(Duration::from_millis(5));
    };
    let elapsed = started.elapsed();
    Run {
        code: status.code(),
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        elapsed,
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = vec![];
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Poll `condition` every few milliseconds until it holds, failing the test with `what` once
/// `within` has passed.
#[track_caller]
pub fn wait_until(within: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        thread::sleep(Duration::from_millis(5));
    }
}

// ---------------------------------------------------------------------------------------------
// Identifiers and records
// ---------------------------------------------------------------------------------------------

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// `PREFIX` + the 32 lowercase hex digits of a UUIDv7 minted at Unix-ms `ms`.
pub fn id_at(prefix: &str, ms: u64) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let seed = splitmix(n ^ (u64::from(std::process::id()) << 32) ^ now_ms().rotate_left(17));
    let rand_a = seed & 0xfff;
    let rand_b = (splitmix(seed) & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{prefix}{:012x}7{rand_a:03x}{rand_b:016x}",
        ms & 0xffff_ffff_ffff
    )
}

/// Now in Unix ms, but strictly later than every earlier call in this process: ids minted one
/// after the other sort in the order they were minted, as `mur` assumes of real ones.
fn next_ms() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let mut last = LAST.load(Ordering::SeqCst);
    loop {
        let next = now_ms().max(last + 1);
        match LAST.compare_exchange(last, next, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return next,
            Err(actual) => last = actual,
        }
    }
}

/// A fresh session id, minted now, later than every one minted before it.
pub fn session_id() -> String {
    id_at("ses_", next_ms())
}

/// A fresh formation id, minted now.
pub fn formation_id() -> String {
    id_at("frm_", next_ms())
}

/// `id` with its last characters replaced by `suffix` (lowercase hex).
pub fn with_suffix(id: &str, suffix: &str) -> String {
    format!("{}{suffix}", &id[..id.len() - suffix.len()])
}

/// Now as RFC 3339 UTC, less `ago_secs`.
pub fn rfc3339_ago(ago_secs: u64) -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - ago_secs;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A record with exactly the nine required keys.
pub fn record(session_id: &str, pid: u32, process_start: &str, url: &str) -> Value {
    json!({
        "session_id": session_id,
        "url": url,
        "pid": pid,
        "process_start": process_start,
        "capsule_name": "echo",
        "capsule_version": "0.1.0",
        "workdir": "/tmp",
        "outlives_launcher": true,
        "started_at": rfc3339_ago(90),
    })
}

/// A record naming `process` (its pid and its real start time).
pub fn record_for(session_id: &str, process: &Proc, url: &str) -> Value {
    record(session_id, process.pid(), &process.start(), url)
}

/// `127.0.0.1:PORT` where nothing listens (a port just bound and released): a door that is not
/// there, refused at once.
pub fn dead_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr.to_string()
}

// ---------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------

/// Field 22 of `/proc/<pid>/stat`, counted after the last `)`.
pub fn start_token(pid: u32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(22 - 3).map(str::to_string)
}

/// Field 3 of `/proc/<pid>/stat` (the state letter).
pub fn proc_state(pid: u32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().next().map(str::to_string)
}

/// `/proc/<pid>/comm`, without its newline.
pub fn comm(pid: u32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|c| c.trim_end().to_string())
}

/// A process the test started; killed and reaped on drop if still there.
pub struct Proc {
    child: Child,
    status: Option<ExitStatus>,
}

impl Proc {
    /// Start `program ARGS…` with stdio closed.
    pub fn spawn(program: &str, args: &[&str]) -> Self {
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Self::from_command(command)
    }

    pub fn from_command(mut command: Command) -> Self {
        let child = command.spawn().expect("spawn a test process");
        Self {
            child,
            status: None,
        }
    }

    /// `sleep 1000`.
    pub fn sleeper() -> Self {
        Self::spawn("sleep", &["1000"])
    }

    /// `cat` reading a pipe the test holds: it exits 0 as soon as [`Proc::take_stdin`]'s handle
    /// is dropped.
    pub fn cat_on_pipe() -> Self {
        let mut command = Command::new("cat");
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Self::from_command(command)
    }

    pub fn take_stdin(&mut self) -> ChildStdin {
        self.child.stdin.take().expect("spawned with a piped stdin")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process's start time as `mur` reads it.
    pub fn start(&self) -> String {
        start_token(self.pid()).expect("read the start time of a test process")
    }

    /// Whether the process is still running (reaps it if it has exited).
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

    /// Whether the process has exited (zombie, not reaped yet), without reaping it.
    pub fn is_zombie(&self) -> bool {
        proc_state(self.pid()).as_deref() == Some("Z")
    }

    /// Wait for the process to end (under `within`) and reap it.
    #[track_caller]
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        if let Some(status) = self.status {
            return status;
        }
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.status = Some(status);
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "pid {} did not exit within {within:?}",
                self.pid()
            );
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Whether the process ignores `signal` (`SigIgn` in `/proc/<pid>/status`).
    pub fn ignores(&self, signal: i32) -> bool {
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|line| line.strip_prefix("SigIgn:"))
            .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
            .is_some_and(|mask| mask & (1 << (signal - 1)) != 0)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A process that has exited and been reaped: its pid names nothing (for now).
pub fn exited_pid() -> (u32, String) {
    let mut p = Proc::sleeper();
    let pid = p.pid();
    let start = p.start();
    p.child.kill().unwrap();
    p.wait_exit(Duration::from_secs(10));
    (pid, start)
}

/// Make a FIFO at `path`.
pub fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

// ---------------------------------------------------------------------------------------------
// Doors
// ---------------------------------------------------------------------------------------------

/// How a test door behaves.
#[derive(Default)]
pub struct DoorSpec {
    /// The session its card names.
    pub session_id: String,
    /// `Some`: an authenticated door — its public card names no session, and every `POST /`
    /// needs `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Answer `agent/getAuthenticatedExtendedCard` with method-not-found and serve the card
    /// under the A2A 1.0 name `GetExtendedAgentCard` only (the original runtime's newer doors).
    pub v1_only: bool,
    /// Accept connections and never answer.
    pub silent: bool,
    /// Run on an authorized `session/stop`, before it is answered.
    pub on_stop: Option<Box<dyn Fn() + Send + Sync>>,
}

/// One request a door received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `GET /…` path, or the JSON-RPC method of a `POST /`.
    pub what: String,
    pub authorization: Option<String>,
}

/// A small HTTP responder answering as a session, on `127.0.0.1:0`.
pub struct Door {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    closing: Arc<AtomicBool>,
    acceptor: Option<thread::JoinHandle<()>>,
}

impl Door {
    pub fn start(spec: DoorSpec) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(vec![]));
        let closing = Arc::new(AtomicBool::new(false));
        let spec = Arc::new(spec);
        let acceptor = {
            let (seen, closing) = (seen.clone(), closing.clone());
            thread::spawn(move || {
                for stream in listener.incoming() {
                    if closing.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (spec, seen) = (spec.clone(), seen.clone());
                    thread::spawn(move || serve(stream, &spec, &seen));
                }
            })
        };
        Self {
            addr,
            seen,
            closing,
            acceptor: Some(acceptor),
        }
    }

    /// A public door answering as `session_id`.
    pub fn public(session_id: &str) -> Self {
        Self::start(DoorSpec {
            session_id: session_id.into(),
            ..DoorSpec::default()
        })
    }

    /// `host:port`, as a record's `url`.
    pub fn url(&self) -> String {
        self.addr.to_string()
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The requests that were `what` (a JSON-RPC method or a GET path).
    pub fn seen_of(&self, what: &str) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.what == what).collect()
    }
}

impl Drop for Door {
    fn drop(&mut self) {
        self.closing.store(true, Ordering::SeqCst);
        // Wake the acceptor so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// The card a door answers with; `with_session` adds the capsule extension naming `session_id`.
pub fn card(url: &str, session_id: &str, with_session: bool, authenticated: bool) -> Value {
    let mut extensions = vec![];
    if with_session {
        extensions.push(json!({
            "uri": CAPSULE_EXTENSION_URI,
            "params": {"sessionId": session_id},
        }));
    }
    let mut card = json!({
        "protocolVersion": "0.3.0",
        "name": "echo",
        "version": "0.1.0",
        "url": format!("http://{url}/"),
        "preferredTransport": "JSONRPC",
        "capabilities": {"streaming": false, "extensions": extensions},
        "skills": [{"id": "task", "name": "task"}],
    });
    if authenticated {
        card["securitySchemes"] = json!({"bearer": {"type": "http", "scheme": "bearer"}});
        card["supportsAuthenticatedExtendedCard"] = json!(true);
    }
    card
}

struct Request {
    method: String,
    path: String,
    authorization: Option<String>,
    body: Vec<u8>,
}

fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut length = 0usize;
    let mut authorization = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 {
            return None;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().ok()?;
        } else if name.eq_ignore_ascii_case("authorization") {
            authorization = Some(value.to_string());
        }
    }
    let mut body = vec![0; length.min(1 << 20)];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        path,
        authorization,
        body,
    })
}

fn respond(stream: &mut TcpStream, status: &str, extra: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Write);
}

fn serve(mut stream: TcpStream, spec: &DoorSpec, seen: &Mutex<Vec<Seen>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    if spec.silent {
        // Hold the connection, read whatever comes, answer nothing, until the client goes.
        let mut sink = [0u8; 4096];
        while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
        return;
    }
    let Some(request) = read_request(&mut stream) else {
        return;
    };
    let url = stream.local_addr().unwrap().to_string();
    let authenticated = spec.token.is_some();
    if request.method == "GET" {
        seen.lock().unwrap().push(Seen {
            what: request.path.clone(),
            authorization: request.authorization.clone(),
        });
        if request.path == "/.well-known/agent-card.json" {
            let public = card(&url, &spec.session_id, !authenticated, authenticated);
            respond(&mut stream, "200 OK", "", public.to_string().as_bytes());
        } else {
            respond(&mut stream, "404 Not Found", "", b"{}");
        }
        return;
    }
    let call: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let method = call["method"].as_str().unwrap_or("").to_string();
    let id = call.get("id").cloned().unwrap_or(Value::Null);
    seen.lock().unwrap().push(Seen {
        what: method.clone(),
        authorization: request.authorization.clone(),
    });
    let bearer = spec.token.as_ref().map(|token| format!("Bearer {token}"));
    if bearer.is_some() && request.authorization != bearer {
        respond(
            &mut stream,
            "401 Unauthorized",
            "WWW-Authenticate: Bearer realm=\"echo\"\r\n",
            b"",
        );
        return;
    }
    let method_not_found = || {
        json!({"jsonrpc": "2.0", "id": id,
               "error": {"code": -32601, "message": "Method not found"}})
    };
    let answer = match method.as_str() {
        "agent/getAuthenticatedExtendedCard" if authenticated && !spec.v1_only => {
            json!({"jsonrpc": "2.0", "id": id, "result": card(&url, &spec.session_id, true, true)})
        }
        "GetExtendedAgentCard" if authenticated && spec.v1_only => {
            json!({"jsonrpc": "2.0", "id": id, "result": card(&url, &spec.session_id, true, true)})
        }
        "session/stop" => {
            if let Some(on_stop) = &spec.on_stop {
                on_stop();
            }
            json!({"jsonrpc": "2.0", "id": id, "result": {}})
        }
        _ => method_not_found(),
    };
    respond(&mut stream, "200 OK", "", answer.to_string().as_bytes());
}

// ---------------------------------------------------------------------------------------------
// Reading `mur ps`
// ---------------------------------------------------------------------------------------------

/// `mur ps --json`'s capsule objects, by session id.
pub fn capsules(doc: &Value) -> Vec<Value> {
    doc["capsules"]
        .as_array()
        .unwrap_or_else(|| panic!("no capsules array in {doc}"))
        .clone()
}

/// The capsule object for `session_id` in a `mur ps --json` document, if listed.
pub fn capsule<'a>(doc: &'a Value, session_id: &str) -> Option<&'a Value> {
    doc["capsules"]
        .as_array()?
        .iter()
        .find(|c| c["session_id"] == session_id)
}

/// The status `mur ps --json` gives `session_id`, or `None` when it is not listed.
pub fn status_of(doc: &Value, session_id: &str) -> Option<String> {
    capsule(doc, session_id).map(|c| c["status"].as_str().unwrap_or("").to_string())
}
