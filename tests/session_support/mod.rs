//! What the integration tests of `mur run` share (tests/run.rs, tests/door_input.rs): a throwaway
//! `HOME`, capsules written as real `/bin/sh` handlers, real `mur run` sessions spawned from the
//! binary under test, a tiny keep-alive HTTP/1.1 client over `TcpStream` (so raw and malformed
//! bytes can be sent), and process checks.
//!
//! Every wait here is a poll against a deadline; nothing sleeps blindly.

#![allow(dead_code)]

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// The capsule extension `uri` (DESIGN.md §5).
pub const CAPSULE_EXTENSION_URI: &str =
    "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1";

/// The default deadline for anything the tests wait on.
pub const WAIT: Duration = Duration::from_secs(15);

/// How long a one-shot `mur` command may run before the test calls it hung.
pub const MUR_DEADLINE: Duration = Duration::from_secs(30);

pub fn mur_bin() -> &'static str {
    env!("CARGO_BIN_EXE_mur")
}

// ---------------------------------------------------------------------------------------------
// Polling
// ---------------------------------------------------------------------------------------------

/// Poll `condition` every 20 ms until it holds; panic naming `what` after `within`.
pub fn wait_until(within: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    loop {
        if condition() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// Poll `probe` until it yields `Some`; panic naming `what` after `within`.
pub fn wait_for<T>(within: Duration, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------------
// Temporary HOME and capsules
// ---------------------------------------------------------------------------------------------

/// A fresh directory used as `HOME` (and as the parent of capsules and workdirs); removed on drop.
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
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let path = std::env::temp_dir().join(format!(
            "mur-run-it-{}-{}-{nanos:x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir(&path).expect("create the temporary HOME");
        // Canonical, so it compares equal to what `mur run` canonicalizes workdirs to.
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

    pub fn control_path(&self, session_id: &str) -> PathBuf {
        self.running().join(format!("{session_id}.control"))
    }

    pub fn record(&self, session_id: &str) -> Value {
        let bytes = fs::read(self.record_path(session_id)).expect("read the running record");
        serde_json::from_slice(&bytes).expect("the running record is JSON")
    }

    /// The names in `~/.murmur/running` (none when it does not exist), sorted.
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

    /// A new empty directory under the home.
    pub fn dir(&self, name: &str) -> PathBuf {
        let dir = self.path.join(name);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A `mur ARGS…` command with this `HOME`, run from the home directory.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(mur_bin());
        command
            .args(args)
            .env("HOME", &self.path)
            .env_remove("NOTIFY_SOCKET")
            .env_remove("MURMUR_FORMATION_LIFELINE")
            .env_remove("MURMUR_FORMATION_CHANNEL")
            .current_dir(&self.path);
        command
    }

    /// Run `mur ARGS…` to its end (stdin empty) under [`MUR_DEADLINE`].
    pub fn mur(&self, args: &[&str]) -> Output {
        let mut command = self.command(args);
        command.stdin(Stdio::null());
        run_to_end(command, None, MUR_DEADLINE)
    }

    /// Write a capsule: `<home>/<name>/murmur.json` from `manifest` (with `"run": ["./handler.sh"]`
    /// added when it has no `run`) and, when `script` is given, `handler.sh` (mode 0755). The
    /// manifest's path.
    pub fn capsule(&self, name: &str, mut manifest: Value, script: Option<&str>) -> PathBuf {
        let dir = self.dir(name);
        if manifest.get("run").is_none() {
            manifest["run"] = json!(["./handler.sh"]);
        }
        if let Some(script) = script {
            let handler = dir.join("handler.sh");
            fs::write(&handler, script).unwrap();
            fs::set_permissions(&handler, fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = dir.join("murmur.json");
        fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
        path
    }

    /// `mur run --json ARGS…`, waiting for its readiness line.
    pub fn start(&self, args: &[&str]) -> Session {
        let mut full = vec!["run", "--json"];
        full.extend_from_slice(args);
        Session::spawn(self.command(&full))
    }

    /// `mur token ARGS…`: the one token it prints.
    pub fn token(&self, args: &[&str]) -> String {
        let mut full = vec!["token"];
        full.extend_from_slice(args);
        let out = self.mur(&full);
        out.expect_code(0);
        let token = out
            .stdout
            .strip_suffix('\n')
            .expect("a token and a newline");
        assert!(
            !token.is_empty() && !token.contains(char::is_whitespace),
            "one token: {:?}",
            out.stdout
        );
        token.to_string()
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

pub fn mode_of(path: &Path) -> u32 {
    fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

// ---------------------------------------------------------------------------------------------
// Running `mur` to its end
// ---------------------------------------------------------------------------------------------

/// What a finished `mur` command did.
#[derive(Debug)]
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
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

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {:?}", self.stdout))
    }
}

/// Spawn `command` with piped output (and `stdin` written, then closed), wait for it under
/// `deadline` (killing it and panicking past it).
pub fn run_to_end(mut command: Command, stdin: Option<&[u8]>, deadline: Duration) -> Output {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    if stdin.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut child = command.spawn().expect("spawn mur");
    if let Some(bytes) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(bytes).unwrap();
    }
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    let status = match wait_child(&mut child, deadline) {
        Some(status) => status,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{command:?} still running after {deadline:?}; stderr: {:?}",
                String::from_utf8_lossy(&err.lock())
            );
        }
    };
    // The pipes close when the process (and anything holding them) is gone; a leftover
    // holder must not hang the test either.
    let stdout = read_when_closed(&out);
    let stderr = read_when_closed(&err);
    Output {
        code: status.code(),
        stdout,
        stderr,
    }
}

struct Drained {
    bytes: Arc<Mutex<Vec<u8>>>,
    done: mpsc::Receiver<()>,
}

impl Drained {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.bytes.lock().unwrap()
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> Drained {
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
    Drained { bytes, done }
}

fn read_when_closed(drained: &Drained) -> String {
    let _ = drained.done.recv_timeout(Duration::from_secs(5));
    String::from_utf8_lossy(&drained.lock()).into_owned()
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
        thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------------------------

/// One live `mur run --json` child, past its readiness line.
pub struct Session {
    pub child: Child,
    /// The readiness line as printed, and parsed.
    pub ready_line: String,
    pub ready: Value,
    pub id: String,
    /// `host:port`.
    pub url: String,
    pub pid: u32,
    stdout: Drained,
    stderr: Drained,
    status: Option<ExitStatus>,
}

impl Session {
    /// Spawn `command` (a `mur run --json …`) and wait for its readiness line.
    pub fn spawn(mut command: Command) -> Session {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn mur run");
        let stderr = drain(child.stderr.take().unwrap());
        let (line_tx, line_rx) = mpsc::channel();
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        let rest = Arc::new(Mutex::new(Vec::new()));
        let (done_tx, done) = mpsc::channel();
        let sink = rest.clone();
        thread::spawn(move || {
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = line_tx.send(line);
            let mut chunk = [0u8; 8192];
            loop {
                match reader.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink.lock().unwrap().extend_from_slice(&chunk[..n]),
                }
            }
            let _ = done_tx.send(());
        });
        let line = match line_rx.recv_timeout(WAIT) {
            Ok(line) if line.ends_with('\n') => line,
            other => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "no readiness line from {command:?} ({other:?}); stderr: {:?}",
                    String::from_utf8_lossy(&stderr.lock())
                );
            }
        };
        let ready: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the readiness line is not JSON ({e}): {line:?}"));
        let id = ready["session_id"]
            .as_str()
            .expect("session_id")
            .to_string();
        let url = ready["url"].as_str().expect("url").to_string();
        let pid = ready["pid"].as_u64().expect("pid") as u32;
        assert_eq!(
            pid,
            child.id(),
            "the readiness line names mur run's own pid"
        );
        Session {
            child,
            ready_line: line,
            ready,
            id,
            url,
            pid,
            stdout: Drained { bytes: rest, done },
            stderr,
            status: None,
        }
    }

    /// Whether the process is still running (not exited).
    pub fn alive(&mut self) -> bool {
        if self.status.is_some() {
            return false;
        }
        match self.child.try_wait().expect("wait for mur run") {
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

    /// Wait for the process to exit; its status. Panics after `within`.
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        if let Some(status) = self.status {
            return status;
        }
        let status = wait_child(&mut self.child, within).unwrap_or_else(|| {
            panic!(
                "mur run (pid {}) still running after {within:?}; stderr: {:?}",
                self.pid,
                String::from_utf8_lossy(&self.stderr.lock())
            )
        });
        self.status = Some(status);
        status
    }

    /// Everything `mur run` printed: the readiness line and the rest of stdout, and stderr.
    /// Complete once the process has exited.
    pub fn printed(&self) -> (String, String) {
        if self.status.is_some() {
            let _ = self.stdout.done.recv_timeout(Duration::from_secs(5));
            let _ = self.stderr.done.recv_timeout(Duration::from_secs(5));
        }
        let mut stdout = self.ready_line.clone();
        stdout.push_str(&String::from_utf8_lossy(&self.stdout.lock()));
        (
            stdout,
            String::from_utf8_lossy(&self.stderr.lock()).into_owned(),
        )
    }

    pub fn stderr(&self) -> String {
        self.printed().1
    }

    // --- the door -----------------------------------------------------------------------------

    pub fn connect(&self) -> Http {
        Http::connect(&self.url)
    }

    pub fn card(&self) -> Value {
        let response = self.connect().get("/.well-known/agent-card.json");
        assert_eq!(response.status, 200, "card: {}", response.text());
        response.json()
    }

    /// One JSON-RPC call on a fresh connection: the whole response object (HTTP 200 asserted).
    pub fn rpc(&self, token: Option<&str>, method: &str, params: Value) -> Value {
        let response = self.rpc_http(token, method, params);
        assert_eq!(
            response.status,
            200,
            "{method}: HTTP {} {}",
            response.status,
            response.text()
        );
        let answer = response.json();
        assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
        answer
    }

    /// One JSON-RPC call on a fresh connection: the raw HTTP response.
    pub fn rpc_http(&self, token: Option<&str>, method: &str, params: Value) -> HttpResponse {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.connect().post("/", token, body.to_string().as_bytes())
    }

    /// A JSON-RPC call that must succeed: its `result`.
    pub fn call(&self, token: Option<&str>, method: &str, params: Value) -> Value {
        let answer = self.rpc(token, method, params);
        assert!(answer.get("error").is_none(), "{method}: {answer}");
        answer["result"].clone()
    }

    /// A JSON-RPC call that must fail: its error code.
    pub fn call_err(&self, token: Option<&str>, method: &str, params: Value) -> i64 {
        let answer = self.rpc(token, method, params);
        assert!(answer.get("result").is_none(), "{method}: {answer}");
        answer["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{method}: no error code: {answer}"))
    }

    /// `message/send` of `text` (blocking unless `blocking` is false): the task.
    pub fn send(&self, token: Option<&str>, text: &str, blocking: bool) -> Value {
        self.call(token, "message/send", send_params(&[text], blocking))
    }

    pub fn get_task(&self, token: Option<&str>, id: &str) -> Value {
        self.call(token, "tasks/get", json!({"id": id}))
    }

    /// Poll `tasks/get` until the task reaches a final state; the task.
    pub fn wait_task(&self, token: Option<&str>, id: &str, within: Duration) -> Value {
        wait_for(within, &format!("task {id} to end"), || {
            let task = self.get_task(token, id);
            let state = task["status"]["state"].as_str().unwrap_or("").to_string();
            ["completed", "failed", "canceled", "rejected"]
                .contains(&state.as_str())
                .then_some(task)
        })
    }

    /// The new connection, valid card request every bad-input test ends with: it must be served
    /// and name this session, and the process must still be running.
    pub fn assert_still_serving(&mut self) {
        let response = wait_for(WAIT, "the door to serve a card again", || {
            Http::try_connect(&self.url)
                .ok()
                .and_then(|mut c| {
                    c.try_request("GET", "/.well-known/agent-card.json", &[], b"")
                        .ok()
                })
                .filter(|r| r.status == 200)
        });
        assert_eq!(session_of(&response.json()), Some(self.id.clone()));
        assert!(self.alive(), "mur run is still running");
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        // An orderly end first, so handler groups go with it; then no mercy.
        // SAFETY: kill(2) on our own unreaped child.
        unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGTERM) };
        if wait_child(&mut self.child, Duration::from_secs(10)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `message/send` params with these text parts.
pub fn send_params(parts: &[&str], blocking: bool) -> Value {
    let parts: Vec<Value> = parts
        .iter()
        .map(|t| json!({"kind": "text", "text": t}))
        .collect();
    json!({
        "message": {"kind": "message", "role": "user", "messageId": "m-1", "parts": parts},
        "configuration": {"blocking": blocking},
    })
}

/// The text of a task's `status.message`.
pub fn status_text(task: &Value) -> String {
    task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no status message text: {task}"))
        .to_string()
}

/// The text of a task's first artifact.
pub fn artifact_text(task: &Value) -> String {
    task["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no artifact text: {task}"))
        .to_string()
}

pub fn state(task: &Value) -> String {
    task["status"]["state"].as_str().unwrap_or("").to_string()
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

// ---------------------------------------------------------------------------------------------
// A tiny HTTP/1.1 client
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    /// Names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == &name.to_ascii_lowercase())
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

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

/// One keep-alive connection to a door.
pub struct Http {
    pub stream: TcpStream,
    host: String,
    buf: Vec<u8>,
}

impl Http {
    pub fn connect(addr: &str) -> Http {
        Self::try_connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
    }

    pub fn try_connect(addr: &str) -> std::io::Result<Http> {
        let sock: SocketAddr = addr.parse().expect("host:port");
        let stream = TcpStream::connect_timeout(&sock, Duration::from_secs(5))?;
        stream.set_read_timeout(Some(Duration::from_secs(15)))?;
        stream.set_write_timeout(Some(Duration::from_secs(15)))?;
        Ok(Http {
            stream,
            host: addr.to_string(),
            buf: Vec::new(),
        })
    }

    pub fn set_read_timeout(&self, timeout: Duration) {
        self.stream.set_read_timeout(Some(timeout)).unwrap();
    }

    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Send one request (with `Host` and, for a body or a POST/PUT, `Content-Length`) and read
    /// its response.
    pub fn try_request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<HttpResponse> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.host);
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if !body.is_empty() || matches!(method, "POST" | "PUT") {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body);
        self.send_raw(&bytes)?;
        self.read_response()
    }

    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> HttpResponse {
        self.try_request(method, path, headers, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    pub fn get(&mut self, path: &str) -> HttpResponse {
        self.request("GET", path, &[], b"")
    }

    /// A POST with a JSON body and, when given, a bearer token.
    pub fn post(&mut self, path: &str, token: Option<&str>, body: &[u8]) -> HttpResponse {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Content-Type", "application/json")];
        if let Some(auth) = &auth {
            headers.push(("Authorization", auth.as_str()));
        }
        self.request("POST", path, &headers, body)
    }

    /// Read one response: status line, headers, and a `Content-Length` body (or, without one,
    /// everything to EOF).
    pub fn read_response(&mut self) -> std::io::Result<HttpResponse> {
        let head_end = loop {
            if let Some(at) = find(&self.buf, b"\r\n\r\n") {
                break at;
            }
            if !self.fill()? {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!(
                        "connection closed before a response head ({} bytes: {:?})",
                        self.buf.len(),
                        String::from_utf8_lossy(&self.buf)
                    ),
                ));
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let mut fields = status_line.splitn(3, ' ');
        let version = fields.next().unwrap_or("");
        let status: u16 = fields
            .next()
            .and_then(|s| s.parse().ok())
            .filter(|_| version == "HTTP/1.1")
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("bad status line {status_line:?}"),
                )
            })?;
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        self.buf.drain(..head_end + 4);
        let length = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map(|(_, v)| v.parse::<usize>().expect("a numeric Content-Length"));
        let body = match length {
            Some(length) => {
                while self.buf.len() < length {
                    if !self.fill()? {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            "connection closed mid-body",
                        ));
                    }
                }
                self.buf.drain(..length).collect()
            }
            None => {
                while self.fill()? {}
                std::mem::take(&mut self.buf)
            }
        };
        Ok(HttpResponse {
            status,
            headers,
            body,
        })
    }

    /// Read more bytes into the buffer; `false` at EOF.
    fn fill(&mut self) -> std::io::Result<bool> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n > 0)
    }

    /// Whether the peer has closed: a read returns EOF (or a reset) within `within`, with nothing
    /// (else) left to read.
    pub fn closed_within(&mut self, within: Duration) -> bool {
        self.set_read_timeout(within);
        let mut chunk = [0u8; 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return true,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

// ---------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------

/// The state letter of `/proc/<pid>/stat`, `None` when there is no such process.
pub fn proc_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Gone: no such process, or a zombie nobody has reaped yet.
pub fn pid_dead(pid: u32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks; no pointers.
    let exists = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
    !exists || matches!(proc_state(pid), None | Some('Z') | Some('X'))
}

/// Wait until every pid is dead, then assert it (the message names the survivors).
pub fn assert_all_dead(pids: &[u32], within: Duration, what: &str) {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline && !pids.iter().all(|&p| pid_dead(p)) {
        thread::sleep(Duration::from_millis(20));
    }
    let alive: Vec<(u32, Option<char>)> = pids
        .iter()
        .filter(|&&p| !pid_dead(p))
        .map(|&p| (p, proc_state(p)))
        .collect();
    assert!(alive.is_empty(), "{what}: still alive: {alive:?}");
}

/// The pids a handler wrote to `path` (one a line) once it holds `count` of them.
pub fn read_pids(path: &Path, count: usize) -> Vec<u32> {
    wait_for(
        WAIT,
        &format!("{} to hold {count} pids", path.display()),
        || {
            let text = fs::read_to_string(path).ok()?;
            let pids: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
            (pids.len() >= count).then_some(pids)
        },
    )
}

/// A handler script that starts two background children and records three pids in
/// `<dir>/pids` (the file appears whole, renamed into place), then waits forever:
/// its own (`$$`, the group leader, which takes 0.5 s to exit after a SIGTERM); a child that
/// ignores SIGTERM, so only a SIGKILL to the group ends it; and a child that, on SIGTERM, writes
/// `<dir>/termed` and exits — proof the whole group was asked to end before it was killed.
pub fn group_script(dir: &Path) -> String {
    format!(
        "#!/bin/sh\n\
         exec < /dev/null\n\
         trap 'sleep 0.5; exit 143' TERM\n\
         echo $$ > '{dir}/pids.tmp'\n\
         sh -c 'trap \"\" TERM; exec sleep 120' &\n\
         echo $! >> '{dir}/pids.tmp'\n\
         sh -c 'trap \"echo term > {dir}/termed; exit 0\" TERM; while :; do sleep 0.05; done' &\n\
         echo $! >> '{dir}/pids.tmp'\n\
         mv '{dir}/pids.tmp' '{dir}/pids'\n\
         wait\n\
         sleep 120\n",
        dir = dir.display()
    )
}

/// Wait for the three pids [`group_script`] records, checking they are all running.
pub fn group_pids(dir: &Path) -> Vec<u32> {
    let pids = read_pids(&dir.join("pids"), 3);
    assert!(
        pids.iter().all(|&p| !pid_dead(p)),
        "the handler and its children run: {pids:?}"
    );
    pids
}

/// After the group of a [`group_script`] handler was ended: it got SIGTERM first (the trapping
/// child said so) and every process in it is gone (the SIGTERM-ignoring one needed a SIGKILL).
pub fn assert_group_ended(dir: &Path, pids: &[u32], what: &str) {
    assert_all_dead(pids, Duration::from_secs(5), what);
    assert!(
        dir.join("termed").exists(),
        "{what}: the group was not sent SIGTERM before SIGKILL"
    );
}

/// A lifeline pipe: the read end is inherited by the next spawn of the command it was attached
/// to (as `MURMUR_FORMATION_LIFELINE`) and by nothing else — both ends are close-on-exec here and
/// the child clears the flag on the read end only, between fork and exec.
pub struct Lifeline {
    read: Option<OwnedFd>,
    write: Option<OwnedFd>,
}

impl Lifeline {
    pub fn attach(command: &mut Command) -> Lifeline {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 fills the two-int array it is given.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
        assert_eq!(rc, 0, "pipe2");
        // SAFETY: both descriptors were just created and are owned here alone.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let read_fd = read.as_raw_fd();
        command.env("MURMUR_FORMATION_LIFELINE", read_fd.to_string());
        // SAFETY: fcntl is async-signal-safe; only the read end's flags change, in the child.
        unsafe {
            command.pre_exec(move || {
                if libc::fcntl(read_fd, libc::F_SETFD, 0) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        Lifeline {
            read: Some(read),
            write: Some(write),
        }
    }

    /// After the spawn: close this process's copy of the read end, so EOF depends on the write
    /// end alone.
    pub fn spawned(&mut self) {
        self.read = None;
    }

    /// Close the write end: EOF on the child's lifeline.
    pub fn cut(&mut self) {
        self.write = None;
    }
}
