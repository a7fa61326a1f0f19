//! Interop with the official A2A Python SDK (`a2a-sdk` 0.3.x): the real `mur run` door, unmodified,
//! is driven by `tests/sdk/a2a_client.py`, which uses only the SDK's own client code — its card
//! resolver, its JSON-RPC client, and for an authenticated door its `AuthInterceptor` with an
//! in-memory credential store and the authenticated extended card.
//!
//! The SDK lives in the venv `target/a2a-venv`, which this test makes on first use by running
//! `tests/sdk/setup.sh` (once per run of this test binary; a venv already holding the SDK is
//! kept), or in the Python that `MUR_A2A_PYTHON` names. When the venv cannot be made (no Python,
//! no venv module, PyPI unreachable) each test records itself as skipped (`common::skip`: a loud
//! `*** SKIPPED … ***` line on stderr and a line in `target/tmp/skipped.tsv`) and passes, so
//! `cargo test` works on a machine that cannot reach PyPI.

// Test scaffolding provokes the kernel directly (kill, prctl, waitpid, chroot); each block says
// why it is sound. `unsafe` stays denied in the product, outside `src/sys`.
#![allow(unsafe_code)]

#[allow(dead_code)] // each test file uses a subset of the shared helpers
mod common;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{OnceLock, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use common::{home::Home, skip::skipped};
use serde_json::Value;

/// How long the SDK script, `mur token` or a session's readiness may take.
const DEADLINE: Duration = Duration::from_secs(90);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python that has a2a-sdk 0.3.x, or why there is none. `MUR_A2A_PYTHON`, when set, must
/// work: a Python named on purpose that cannot import the SDK is a failure, not a skip. Otherwise
/// it is the venv `target/a2a-venv`, made by `tests/sdk/setup.sh` the first time a test here
/// asks for it and it does not work yet. The tests of this binary run in parallel: the first
/// makes it, the others wait for that and share the outcome.
fn sdk_python() -> Result<PathBuf, String> {
    if let Some(python) = std::env::var_os("MUR_A2A_PYTHON").map(PathBuf::from) {
        if let Err(why) = probe_sdk(&python) {
            panic!("MUR_A2A_PYTHON is set, but {why}");
        }
        return Ok(python);
    }
    static VENV: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    VENV.get_or_init(|| {
        let python = repo().join("target/a2a-venv/bin/python");
        if probe_sdk(&python).is_ok() {
            return Ok(python);
        }
        let said = run_setup_sh()?;
        probe_sdk(&python).map(|()| python).map_err(|why| {
            // setup.sh exits 0 when it cannot make the venv; its warning says why.
            let warning = said
                .lines()
                .find_map(|l| l.strip_prefix("*** WARNING: tests/sdk/setup.sh: "))
                .map(|w| w.trim_end_matches(" ***").to_string());
            match warning {
                Some(warning) => format!("tests/sdk/setup.sh could not make the venv: {warning}"),
                None => format!("after tests/sdk/setup.sh, {why}; it said: {}", said.trim()),
            }
        })
    })
    .clone()
}

/// `bash tests/sdk/setup.sh`, its stdout and stderr; `Err` when it cannot be run at all.
fn run_setup_sh() -> Result<String, String> {
    let out = Command::new("bash")
        .arg(repo().join("tests/sdk/setup.sh"))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run bash tests/sdk/setup.sh: {e}"))?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Err(format!(
            "tests/sdk/setup.sh failed ({}): {}",
            out.status,
            said.trim()
        ));
    }
    Ok(said)
}

/// `Ok` when `python` imports a2a-sdk 0.3.x; otherwise why not.
fn probe_sdk(python: &Path) -> Result<(), String> {
    if !python.exists() {
        return Err(format!("{} does not exist", python.display()));
    }
    let probe = Command::new(python)
        .args([
            "-c",
            "import a2a.client, importlib.metadata as m; print(m.version('a2a-sdk'))",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{} cannot run: {e}", python.display()))?;
    let version = String::from_utf8_lossy(&probe.stdout).trim().to_string();
    if !probe.status.success() {
        return Err(format!(
            "{} cannot import a2a-sdk: {}",
            python.display(),
            String::from_utf8_lossy(&probe.stderr).trim()
        ));
    }
    if !version.starts_with("0.3.") {
        return Err(format!(
            "{} has a2a-sdk {version}, not 0.3.x",
            python.display()
        ));
    }
    Ok(())
}

/// A `mur run --json` session: its readiness line and its process, SIGTERMed and reaped by
/// [`Session::stop`] (or killed on drop, should the test panic first).
struct Session {
    child: Child,
    ready: Value,
    stderr: PathBuf,
}

impl Session {
    fn start(home: &Home, args: &[&str]) -> Session {
        let stderr = home.path().join(format!("mur-run-{}.stderr", args.len()));
        let mut child = home
            .command(&[&["run", "--json"], args].concat())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("spawn mur run");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut lines = BufReader::new(stdout);
            let mut first = String::new();
            let _ = lines.read_line(&mut first);
            let _ = tx.send(first);
            // Keep the pipe drained (and open) for the session's life.
            let _ = lines.read_to_end(&mut Vec::new());
        });
        let mut session = Session {
            child,
            ready: Value::Null,
            stderr,
        };
        let line = rx.recv_timeout(DEADLINE).unwrap_or_default();
        session.ready = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!(
                "mur run {args:?}: no readiness line ({e}): {line:?}; stderr: {}",
                session.stderr_text()
            )
        });
        session
    }

    fn field(&self, name: &str) -> &str {
        self.ready[name]
            .as_str()
            .unwrap_or_else(|| panic!("readiness line without {name}: {}", self.ready))
    }

    fn stderr_text(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// SIGTERM, then wait for it to exit (143, DESIGN.md §5).
    fn stop(mut self) -> ExitStatus {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: a plain kill(2) on the child this test spawned and has not reaped yet.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0, "SIGTERM");
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for mur run") {
                return status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "mur run did not end within 30 s of SIGTERM"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Run `cmd` with `input` on its stdin; its output, or a panic past [`DEADLINE`].
fn run(mut cmd: Command, input: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id() as libc::pid_t;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(output) => output.expect("wait"),
        Err(_) => {
            // SAFETY: kill(2) on the child spawned above; its waiter thread reaps it.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{cmd:?} did not finish within {DEADLINE:?}");
        }
    }
}

/// Run the SDK script against `session` (bearer `token` on its stdin, never in argv) and check
/// its summary: every SDK check passed, the answer is `text`, the card named the session.
fn sdk_round_trip(python: &Path, session: &Session, text: &str, token: Option<&str>) -> Value {
    let mut cmd = Command::new(python);
    cmd.arg(repo().join("tests/sdk/a2a_client.py"))
        .args([session.field("url"), "--text", text])
        .args(["--session-id", session.field("session_id")])
        .env_remove("MUR_A2A_TOKEN");
    if token.is_some() {
        cmd.arg("--token-stdin");
    }
    let output = run(cmd, &token.map(|t| format!("{t}\n")).unwrap_or_default());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("a2a_client.py: {}", stdout.trim());
    assert!(
        output.status.success(),
        "the SDK client failed ({}):\nstdout: {stdout}\nstderr: {stderr}\nmur run stderr: {}",
        output.status,
        session.stderr_text()
    );
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("the SDK client's summary is not JSON ({e}): {stdout}"));
    assert_eq!(summary["ok"], true, "{summary}");
    assert!(
        summary["sdk"]
            .as_str()
            .is_some_and(|s| s.starts_with("a2a-sdk 0.3.")),
        "{summary}"
    );
    assert_eq!(summary["task"]["state"], "completed", "{summary}");
    assert_eq!(summary["task"]["answer"], text, "{summary}");
    assert_eq!(
        summary["session_id"],
        session.field("session_id"),
        "{summary}"
    );
    assert_eq!(summary["authenticated"], token.is_some(), "{summary}");
    if let Some(token) = token {
        assert!(!stdout.contains(token) && !stderr.contains(token));
        assert_eq!(summary["extended_card"], true, "{summary}");
    }
    summary
}

#[test]
fn the_sdk_sends_a_task_to_the_embedded_echo_door_and_gets_it_back() {
    let python = match sdk_python() {
        Ok(python) => python,
        Err(why) => {
            skipped(
                "the_sdk_sends_a_task_to_the_embedded_echo_door_and_gets_it_back",
                &format!("the A2A SDK interop test: {why}"),
            );
            return;
        }
    };
    let home = Home::new();
    let session = Session::start(&home, &[]);
    assert_eq!(session.field("name"), "echo");

    let text = "hello from the A2A SDK: ünïcode ✓";
    let summary = sdk_round_trip(&python, &session, text, None);
    assert_eq!(summary["card"]["name"], "echo");

    let status = session.stop();
    assert_eq!(status.code(), Some(143), "mur run after SIGTERM: {status}");
}

#[test]
fn the_sdk_authenticates_with_the_operator_token_and_reads_the_extended_card() {
    let python = match sdk_python() {
        Ok(python) => python,
        Err(why) => {
            skipped(
                "the_sdk_authenticates_with_the_operator_token_and_reads_the_extended_card",
                &format!("the A2A SDK interop test: {why}"),
            );
            return;
        }
    };
    let home = Home::new();
    let capsule = home.path().join("capsule");
    fs::create_dir(&capsule).unwrap();
    fs::write(
        capsule.join("murmur.json"),
        serde_json::json!({
            "name": "sdk-auth",
            "version": "1.2.3",
            "run": ["/bin/sh", "-c", "cat"],
            "network": {"authentication": {"credentials": [
                {"name": "reader", "scopes": ["tasks/get"]},
            ]}},
        })
        .to_string(),
    )
    .unwrap();
    let session = Session::start(&home, &[capsule.to_str().unwrap()]);
    assert_eq!(session.field("name"), "sdk-auth");

    let mut token = home.command(&["token", session.field("session_id")]);
    token.env_remove("MUR_A2A_TOKEN");
    let token = run(token, "");
    assert!(
        token.status.success(),
        "mur token: {}",
        String::from_utf8_lossy(&token.stderr)
    );
    let token = String::from_utf8(token.stdout).unwrap();
    let token = token.trim();
    assert!(token.starts_with("mdt1."), "mur token printed {token:?}");

    let text = "two lines\nthrough /bin/sh cat";
    let summary = sdk_round_trip(&python, &session, text, Some(token));
    assert_eq!(summary["card"]["name"], "sdk-auth");
    assert_eq!(summary["security_scheme"], "bearer", "{summary}");

    let status = session.stop();
    assert_eq!(status.code(), Some(143), "mur run after SIGTERM: {status}");
}
