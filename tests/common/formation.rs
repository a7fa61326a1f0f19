//! What the `mur formation` tests share: a test's directories (a `HOME` and a project holding
//! the roster and capsules), a launcher whose output is captured while it runs, and its
//! readiness line.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::home::{fresh_dir, list_dir, write_script};
use super::process::{cmdline, processes_with_env};
use super::run::{Drain, Output, mur_command, run, still_running, wait_child};

/// How long one short `mur` command of a formation test (ps, stop, a refused launch) may take.
pub const FORMATION_CMD_DEADLINE: Duration = Duration::from_secs(20);
/// How long a formation may take to report itself ready, or to end once told to.
pub const FORMATION_DEADLINE: Duration = Duration::from_secs(20);

/// A formation test's directories: `home/` is `HOME`, `project/` holds the roster and the
/// members' capsules. Fresh per test, removed on drop. (A `mur run` test uses
/// [`super::home::Home`] instead.)
pub struct FormationFixture {
    root: PathBuf,
    pub home: PathBuf,
    pub project: PathBuf,
}

impl Default for FormationFixture {
    fn default() -> Self {
        Self::new()
    }
}

impl FormationFixture {
    pub fn new() -> Self {
        let root = fresh_dir("mur-formation-test");
        let home = root.join("home");
        let project = root.join("project");
        fs::create_dir_all(&home).unwrap();
        fs::create_dir_all(&project).unwrap();
        FormationFixture {
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
        let mut names = list_dir(&self.formations());
        names.retain(|n| n.starts_with("frm_"));
        names
    }

    /// Every file in `~/.murmur/running` (records, control files, anything).
    pub fn running_files(&self) -> Vec<String> {
        list_dir(&self.running())
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

    /// `mur ARGS` with this `HOME`, in the project directory (see [`mur_command`]).
    pub fn command(&self, args: &[&str]) -> Command {
        mur_command(&self.home, &self.project, args)
    }

    /// Run `mur ARGS` to its end (stdin closed) under [`FORMATION_CMD_DEADLINE`].
    #[track_caller]
    pub fn mur(&self, args: &[&str]) -> Output {
        run(self.command(args), FORMATION_CMD_DEADLINE)
    }

    /// Write a member's capsule `dir` under the project: `murmur.json` and, when `script` is
    /// given, an executable `handler.sh`. Its directory (what a roster's `capsule` may name).
    pub fn write_member_capsule(
        &self,
        dir: &str,
        manifest: &Value,
        script: Option<&str>,
    ) -> PathBuf {
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

impl Drop for FormationFixture {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
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
// The launcher
// ---------------------------------------------------------------------------------------------

/// A running `mur formation`: stdout read line by line (the readiness line first), stderr
/// captured. Dropped while running, it is SIGKILLed and reaped (its members end by their
/// lifelines).
pub struct Launcher {
    child: Child,
    pub pid: u32,
    stdout: Drain,
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
        let stderr = Drain::start(child.stderr.take().unwrap());
        Launcher {
            child,
            pid,
            stdout: Drain {
                bytes: stdout,
                done: stdout_eof,
            },
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
        // SAFETY: kill(2) takes plain integers; the launcher is our unreaped child.
        assert_eq!(unsafe { libc::kill(self.pid as i32, signal) }, 0);
    }

    /// Wait (polling) for the launcher to exit, failing the test after `within`.
    #[track_caller]
    pub fn wait(&mut self, within: Duration) -> ExitStatus {
        if let Some(status) = self.status {
            return status;
        }
        let status = wait_child(&mut self.child, within).unwrap_or_else(|| {
            panic!(
                "the launcher did not exit within {within:?}; stderr: {}",
                self.stderr()
            )
        });
        self.status = Some(status);
        status
    }

    /// Wait for the launcher's exit and for EOF on its output (every holder of its pipes gone).
    pub fn finish(&mut self, within: Duration) -> ExitStatus {
        let status = self.wait(within);
        assert!(
            self.stderr.wait(within),
            "the launcher's stderr is still held open (a member left running?)"
        );
        assert!(
            self.stdout.wait(within),
            "the launcher's stdout is still held open"
        );
        status
    }

    pub fn stdout(&self) -> String {
        self.stdout.text()
    }

    pub fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// Whether the launcher is still running (and not reaped).
    pub fn running(&mut self) -> bool {
        still_running(&mut self.child, &mut self.status)
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
// JSON-RPC bodies
// ---------------------------------------------------------------------------------------------

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
