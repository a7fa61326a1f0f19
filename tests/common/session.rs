//! One live `mur run --json` session, past its readiness line, and the JSON-RPC bodies and task
//! readers the tests talk to it with.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::door::session_of;
use super::http::{Http, HttpAnswer, HttpResponse, http};
use super::run::{Drain, still_running, wait_child};
use super::wait::{WAIT, wait_for};

/// How long a session may take to print its readiness line.
pub const READY_DEADLINE: Duration = Duration::from_secs(20);

/// One live `mur run --json` child, past its readiness line. SIGTERMed (then SIGKILLed) and
/// reaped on drop if still running.
pub struct Session {
    pub child: Child,
    /// The readiness line as printed, and parsed.
    pub ready_line: String,
    pub ready: Value,
    pub id: String,
    /// `host:port`.
    pub url: String,
    pub pid: u32,
    /// When the readiness line arrived.
    pub ready_at: Instant,
    stdout: Drain,
    stderr: Drain,
    status: Option<ExitStatus>,
}

impl Session {
    /// Spawn `command` (a `mur run --json …`) and wait (under [`READY_DEADLINE`]) for its
    /// readiness line.
    pub fn spawn(command: Command) -> Session {
        Self::spawn_with_stderr(command, None)
    }

    /// [`Session::spawn`] with the session's stderr given (a FIFO nobody reads), not read by
    /// the test: [`Session::stderr`] is then empty.
    pub fn spawn_with_stderr(mut command: Command, given: Option<Stdio>) -> Session {
        let piped = given.is_none();
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(given.unwrap_or_else(Stdio::piped));
        let mut child = command.spawn().expect("spawn mur run");
        let stderr = match child.stderr.take().filter(|_| piped) {
            Some(pipe) => Drain::start(pipe),
            None => Drain::start(std::io::empty()),
        };
        let (line_tx, line_rx) = mpsc::channel();
        let reader = BufReader::new(child.stdout.take().unwrap());
        // The readiness line first; then keep draining so a late write never blocks the session.
        let stdout = Drain::after(reader, move |reader| {
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = line_tx.send(line);
        });
        let line = match line_rx.recv_timeout(READY_DEADLINE) {
            Ok(line) if line.ends_with('\n') => line,
            other => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "no readiness line from {command:?} ({other:?}); stderr: {:?}",
                    stderr.text()
                );
            }
        };
        let ready_at = Instant::now();
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
            ready_at,
            stdout,
            stderr,
            status: None,
        }
    }

    /// Whether the process is still running (reaps it if it exited).
    pub fn alive(&mut self) -> bool {
        still_running(&mut self.child, &mut self.status)
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own unreaped child; no pointers.
        let rc = unsafe { libc::kill(self.pid as libc::pid_t, signal) };
        assert_eq!(rc, 0, "kill({}, {signal})", self.pid);
    }

    /// Wait for the process to exit; its status. Panics after `within`.
    #[track_caller]
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        if let Some(status) = self.status {
            return status;
        }
        let status = wait_child(&mut self.child, within).unwrap_or_else(|| {
            panic!(
                "mur run (pid {}) still running after {within:?}; stderr: {:?}",
                self.pid,
                self.stderr.text()
            )
        });
        self.status = Some(status);
        status
    }

    /// Everything `mur run` printed: the readiness line and the rest of stdout, and stderr.
    /// Complete once the process has exited.
    pub fn printed(&self) -> (String, String) {
        if self.status.is_some() {
            self.stdout.wait(Duration::from_secs(5));
            self.stderr.wait(Duration::from_secs(5));
        }
        let mut stdout = self.ready_line.clone();
        stdout.push_str(&self.stdout.text());
        (stdout, self.stderr.text())
    }

    /// What `mur run` has written to stderr so far.
    pub fn stderr(&self) -> String {
        self.printed().1
    }

    /// What `mur run` has written to stderr, once it holds `said`: a session's stderr lines are
    /// written by a thread of their own, so one queued before the door answered may be written
    /// after (panics, showing stderr, when it never comes).
    pub fn stderr_saying(&self, said: &str) -> String {
        wait_for(WAIT, &format!("stderr saying {said:?}"), || {
            Some(self.stderr()).filter(|text| text.contains(said))
        })
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

    /// One JSON-RPC call on a fresh connection, sent as a client of the method's generation
    /// would: an A2A 1.0 method (a PascalCase name, `SendMessage`) with `A2A-Version: 1.0`,
    /// anything else with no header. The raw HTTP response.
    pub fn rpc_http(&self, token: Option<&str>, method: &str, params: Value) -> HttpResponse {
        let v1 = method.starts_with(|c: char| c.is_ascii_uppercase());
        self.rpc_as(token, v1.then_some("1.0"), method, params)
    }

    /// One JSON-RPC call on a fresh connection with the `A2A-Version` header given (none for
    /// `None`): the raw HTTP response.
    pub fn rpc_as(
        &self,
        token: Option<&str>,
        version: Option<&str>,
        method: &str,
        params: Value,
    ) -> HttpResponse {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.connect()
            .post_as("/", token, version, body.to_string().as_bytes())
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

    /// A blocking `message/send` of `text` on a fresh `Connection: close` request: the raw
    /// JSON-RPC answer.
    pub fn try_send(&self, token: Option<&str>, text: &str) -> std::io::Result<HttpAnswer> {
        let body = send_body(text);
        http(&self.url, "POST", "/", token, body.to_string().as_bytes())
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

/// An A2A 1.0 user message with `parts` (1.0's shapes: `ROLE_USER`, no `kind`).
pub fn v1_message(parts: Value) -> Value {
    json!({"messageId": "m-1", "role": "ROLE_USER", "parts": parts})
}

/// 1.0 `SendMessage` (or `SendStreamingMessage`) params: one user message with `parts`.
pub fn v1_send(parts: Value) -> Value {
    json!({"message": v1_message(parts)})
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

/// A `message/send` JSON-RPC body with one text part (no `configuration`: the door's default,
/// blocking).
pub fn send_body(text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": {"kind": "message", "role": "user", "messageId": "m-1",
                    "parts": [{"kind": "text", "text": text}]}}})
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
