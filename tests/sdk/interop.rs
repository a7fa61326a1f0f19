//! Interop with the official A2A SDK clients, shared by the `a2a_sdk*` test modules (the test
//! crate declares it once, `tests/it/main.rs`): the real `mur run` door, unmodified, is driven by a
//! script in `tests/sdk/` that uses only the SDK's own client code, and prints one JSON summary
//! line that [`round_trip`] checks — or, for [`interop_stream`], the SDK's streaming call against
//! a handler that writes in two steps, whose events [`check_stream`] checks.
//!
//! | SDK | its client lives in | made by | driven by |
//! | --- | --- | --- | --- |
//! | a2a-sdk (PyPI) 0.3.x | `target/a2a-venv` | `setup.sh py03` | `a2a_client.py` |
//! | a2a-sdk (PyPI) 1.x, A2A 1.0 | `target/a2a1-venv` | `setup.sh py1` | `a2a_client_v1.py`; over HTTP+JSON `a2a_rest.py` (`tests/it/rest.rs`) |
//! | @a2a-js/sdk (npm) 0.3.x | `target/a2a-js03` | `setup.sh js03` | `a2a_client.mjs` |
//! | @a2a-js/sdk (npm) 1.x, A2A 1.0 | `target/a2a-js1` | `setup.sh js1` | `a2a_client.mjs`; over HTTP+JSON `a2a_rest.mjs` (`tests/it/rest.rs`) |
//!
//! Each client is made on first use by `tests/sdk/setup.sh` (once per run of a test binary; one
//! already holding the pinned SDK is kept), or taken from where its environment variable
//! ([`Sdk::env`]) points. When it cannot be made (no Python, venv, node or npm; the registry
//! unreachable) each test using it records itself as skipped (`common::skip`: a loud
//! `*** SKIPPED … ***` line on stderr and a line in `target/tmp/skipped.tsv`) and passes, so
//! `cargo test` works on a machine that cannot reach PyPI or npm.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{OnceLock, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::gate::Gate;
use crate::common::home::{Home, repo};
use crate::common::run::{Drain, run_to_end, wait_child};
use crate::common::session::Session;
use crate::common::skip::skipped;

/// How long the SDK script may take.
const DEADLINE: Duration = Duration::from_secs(90);

/// How long the streaming SDK script may take to report the first chunk (its start included).
const FIRST_CHUNK_DEADLINE: Duration = Duration::from_secs(45);

/// What a stream sends of the streaming handler's `first` and `second` lines
/// (`common::gate::Gate::two_steps`): a newline ending the output so far waits for more output,
/// and the last is never sent (docs/capsules.md, the handler contract) — so the first chunk lacks
/// its newline, and the chunks joined are the stored answer, byte for byte.
const FIRST_SENT: &str = "first";
const ASSEMBLED: &str = "first\nsecond";

/// How the SDK's client is run.
pub enum Runtime {
    /// A Python (its `bin/python`) running this script of `tests/sdk/`.
    Python(&'static str),
    /// node running `tests/sdk/a2a_client.mjs` with this SDK directory.
    Node,
}

/// One official SDK client, pinned by `tests/sdk/setup.sh`.
pub struct Sdk {
    /// `tests/sdk/setup.sh`'s name for it.
    pub setup: &'static str,
    /// Where setup.sh makes it, under the repository.
    pub dir: &'static str,
    /// An environment variable that, when set, names a ready-made one instead (a Python for the
    /// Python SDKs, a directory holding `node_modules/@a2a-js/sdk` for the JS ones); one that
    /// does not work is a failure, not a skip.
    pub env: &'static str,
    pub runtime: Runtime,
    /// The start of the script's `sdk` summary (name and version line).
    pub sdk: &'static str,
    /// The A2A generation it speaks, and so the method names it must send.
    pub protocol: Protocol,
    ready: OnceLock<Result<PathBuf, String>>,
}

/// An A2A generation's method names and task states, as the SDK scripts report them.
pub struct Protocol {
    pub version: &'static str,
    pub send: &'static str,
    pub stream: &'static str,
    pub get: &'static str,
    pub cancel: &'static str,
    pub extended_card: &'static str,
    /// Every method its script may send.
    pub methods: &'static [&'static str],
    pub submitted: &'static str,
    pub working: &'static str,
    pub completed: &'static str,
    pub canceled: &'static str,
}

const A2A_0_3: Protocol = Protocol {
    version: "0.3",
    send: "message/send",
    stream: "message/stream",
    get: "tasks/get",
    cancel: "tasks/cancel",
    extended_card: "agent/getAuthenticatedExtendedCard",
    methods: &[
        "message/send",
        "message/stream",
        "tasks/get",
        "tasks/cancel",
        "agent/getAuthenticatedExtendedCard",
    ],
    submitted: "submitted",
    working: "working",
    completed: "completed",
    canceled: "canceled",
};

const A2A_1_0: Protocol = Protocol {
    version: "1.0",
    send: "SendMessage",
    stream: "SendStreamingMessage",
    get: "GetTask",
    cancel: "CancelTask",
    extended_card: "GetExtendedAgentCard",
    methods: &[
        "SendMessage",
        "SendStreamingMessage",
        "GetTask",
        "ListTasks",
        "CancelTask",
        "GetExtendedAgentCard",
    ],
    submitted: "TASK_STATE_SUBMITTED",
    working: "TASK_STATE_WORKING",
    completed: "TASK_STATE_COMPLETED",
    canceled: "TASK_STATE_CANCELED",
};

pub static PY03: Sdk = Sdk::new(
    "py03",
    "target/a2a-venv",
    "MUR_A2A_PYTHON",
    Runtime::Python("a2a_client.py"),
    "a2a-sdk 0.3.",
    A2A_0_3,
);
pub static PY1: Sdk = Sdk::new(
    "py1",
    "target/a2a1-venv",
    "MUR_A2A1_PYTHON",
    Runtime::Python("a2a_client_v1.py"),
    "a2a-sdk 1.",
    A2A_1_0,
);
pub static JS03: Sdk = Sdk::new(
    "js03",
    "target/a2a-js03",
    "MUR_A2A_JS03_DIR",
    Runtime::Node,
    "@a2a-js/sdk 0.3.",
    A2A_0_3,
);
pub static JS1: Sdk = Sdk::new(
    "js1",
    "target/a2a-js1",
    "MUR_A2A_JS1_DIR",
    Runtime::Node,
    "@a2a-js/sdk 1.",
    A2A_1_0,
);

impl Sdk {
    const fn new(
        setup: &'static str,
        dir: &'static str,
        env: &'static str,
        runtime: Runtime,
        sdk: &'static str,
        protocol: Protocol,
    ) -> Sdk {
        Sdk {
            setup,
            dir,
            env,
            runtime,
            sdk,
            protocol,
            ready: OnceLock::new(),
        }
    }

    /// The Python (for a Python SDK) or SDK directory (for a JS one) to run, or why there is
    /// none. The tests of one binary run in parallel: the first to ask makes it, the others
    /// wait for that and share the outcome.
    fn install(&self) -> Result<PathBuf, String> {
        if let Some(named) = std::env::var_os(self.env).map(PathBuf::from) {
            if let Err(why) = self.probe(&named) {
                panic!("{} is set, but {why}", self.env);
            }
            return Ok(named);
        }
        self.ready
            .get_or_init(|| {
                let made = match self.runtime {
                    Runtime::Python(_) => repo().join(self.dir).join("bin/python"),
                    Runtime::Node => repo().join(self.dir),
                };
                if self.probe(&made).is_ok() {
                    return Ok(made);
                }
                let said = run_setup_sh(self.setup)?;
                self.probe(&made).map(|()| made).map_err(|why| {
                    // setup.sh exits 0 when it cannot make the client; its warning says why.
                    let warning = said
                        .lines()
                        .find_map(|l| l.strip_prefix("*** WARNING: tests/sdk/setup.sh: "))
                        .map(|w| w.trim_end_matches(" ***").to_string());
                    match warning {
                        Some(warning) => format!("tests/sdk/setup.sh {}: {warning}", self.setup),
                        None => {
                            format!("after tests/sdk/setup.sh, {why}; it said: {}", said.trim())
                        }
                    }
                })
            })
            .clone()
    }

    /// `Ok` when `path` holds this SDK at its pinned line; otherwise why not.
    fn probe(&self, path: &Path) -> Result<(), String> {
        if !path.exists() {
            return Err(format!("{} does not exist", path.display()));
        }
        let version = match self.runtime {
            Runtime::Python(_) => python_sdk_version(path)?,
            Runtime::Node => {
                let manifest = path.join("node_modules/@a2a-js/sdk/package.json");
                let text = std::fs::read_to_string(&manifest)
                    .map_err(|e| format!("{}: {e}", manifest.display()))?;
                let node = Command::new("node").arg("--version").output();
                if !node.is_ok_and(|o| o.status.success()) {
                    return Err("no node on PATH".to_string());
                }
                let parsed: Value = serde_json::from_str(&text).unwrap_or_default();
                format!("@a2a-js/sdk {}", parsed["version"].as_str().unwrap_or("?"))
            }
        };
        if !version.starts_with(self.sdk) {
            return Err(format!(
                "{} has {version}, not {}x",
                path.display(),
                self.sdk
            ));
        }
        Ok(())
    }

    /// The script's command for the door at `url` (stdin still to be set).
    fn command(&self, installed: &Path, url: &str) -> Command {
        let mut cmd = match self.runtime {
            Runtime::Python(script) => {
                let mut cmd = Command::new(installed);
                cmd.arg(repo().join("tests/sdk").join(script)).arg(url);
                // No __pycache__ left in the source tree.
                cmd.env("PYTHONDONTWRITEBYTECODE", "1");
                cmd
            }
            Runtime::Node => {
                let mut cmd = Command::new("node");
                cmd.arg(repo().join("tests/sdk/a2a_client.mjs"))
                    .arg(url)
                    .arg("--sdk-dir")
                    .arg(installed);
                cmd
            }
        };
        cmd.env_remove("MUR_A2A_TOKEN");
        cmd
    }
}

/// `bash tests/sdk/setup.sh WHICH`, its stdout and stderr; `Err` when it cannot be run at all.
fn run_setup_sh(which: &str) -> Result<String, String> {
    let out = Command::new("bash")
        .arg(repo().join("tests/sdk/setup.sh"))
        .arg(which)
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
            "tests/sdk/setup.sh {which} failed ({}): {}",
            out.status,
            said.trim()
        ));
    }
    Ok(said)
}

/// `a2a-sdk X.Y.Z` as `python` imports it, or why it cannot.
fn python_sdk_version(python: &Path) -> Result<String, String> {
    let probe = Command::new(python)
        .args([
            "-c",
            "import a2a.client, importlib.metadata as m; print(m.version('a2a-sdk'))",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{} cannot run: {e}", python.display()))?;
    if !probe.status.success() {
        return Err(format!(
            "{} cannot import a2a-sdk: {}",
            python.display(),
            String::from_utf8_lossy(&probe.stderr).trim()
        ));
    }
    Ok(format!(
        "a2a-sdk {}",
        String::from_utf8_lossy(&probe.stdout).trim()
    ))
}

/// Which door a test opens.
#[derive(Clone, Copy)]
pub enum Door {
    /// `mur run` with no manifest: the embedded echo capsule, public.
    Echo,
    /// A capsule whose manifest declares `network.authentication` and runs `/bin/sh -c cat`.
    Authenticated,
}

/// Run `sdk` against a fresh `door` and check everything its script reports (see
/// [`round_trip`]); the test records itself as skipped instead when the SDK cannot be had.
/// `test` is the calling test function's name.
#[track_caller]
pub fn interop(sdk: &Sdk, door: Door, test: &str) {
    let Some(installed) = installed(sdk, test) else {
        return;
    };
    let home = Home::new();
    let (session, token, text, name) = match door {
        Door::Echo => (
            home.start(&[]),
            None,
            "hello from the A2A SDK: ünïcode ✓",
            "echo",
        ),
        Door::Authenticated => {
            let manifest = home.write_capsule(
                "capsule",
                json!({
                    "name": "sdk-auth",
                    "version": "1.2.3",
                    "run": ["/bin/sh", "-c", "cat"],
                    "network": {"authentication": {"credentials": [
                        {"name": "reader", "scopes": ["tasks/get"]},
                    ]}},
                }),
                None,
            );
            let session = home.start(&[manifest.parent().unwrap().to_str().unwrap()]);
            let token = home.token(&[&session.id]);
            assert!(token.starts_with("mdt1."), "mur token printed {token:?}");
            (
                session,
                Some(token),
                "two lines\nthrough /bin/sh cat",
                "sdk-auth",
            )
        }
    };
    assert_eq!(session.ready["name"], name, "{}", session.ready_line);

    let summary = round_trip(sdk, &installed, &session, text, token.as_deref());
    assert_eq!(summary["card"]["name"], name, "{summary}");
    end(session);
}

/// `sdk`'s client, or `None` when it cannot be had (the test `test` then records itself as
/// skipped). Also for the HTTP+JSON drivers of `tests/it/rest.rs`.
pub fn installed(sdk: &Sdk, test: &str) -> Option<PathBuf> {
    sdk.install()
        .map_err(|why| skipped(test, &format!("the A2A SDK interop test: {why}")))
        .ok()
}

/// SIGTERM ends the session as it should: exit 143.
fn end(mut session: Session) {
    session.signal(libc::SIGTERM);
    let status = session.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(143), "mur run after SIGTERM: {status}");
}

/// Run the SDK script against `session` (bearer `token` on its stdin, never in argv) and check
/// its summary: every check of the script passed; the SDK is the pinned one, speaking its
/// generation's method names (1.0: and `A2A-Version: 1.0` on every request); the task completed
/// with `text` as its answer, was read back, and its cancel and an unknown task's get were
/// answered with A2A errors; the card (the extended card, with a token) named the session.
fn round_trip(
    sdk: &Sdk,
    installed: &Path,
    session: &Session,
    text: &str,
    token: Option<&str>,
) -> Value {
    let mut cmd = sdk.command(installed, &session.url);
    cmd.args(["--text", text, "--session-id", &session.id]);
    if token.is_some() {
        cmd.arg("--token-stdin");
    }
    let stdin = token.map(|t| format!("{t}\n")).unwrap_or_default();
    let output = run_to_end(cmd, Some(stdin.as_bytes()), DEADLINE);
    let (stdout, stderr) = (&output.stdout, &output.stderr);
    println!("{} client: {}", sdk.setup, stdout.trim());
    assert!(
        output.status.success(),
        "the SDK client failed ({}):\nstdout: {stdout}\nstderr: {stderr}\nmur run stderr: {}",
        output.status,
        session.stderr()
    );
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("the SDK client's summary is not JSON ({e}): {stdout}"));
    assert_eq!(summary["ok"], true, "{summary}");
    assert!(
        summary["sdk"]
            .as_str()
            .is_some_and(|s| s.starts_with(sdk.sdk)),
        "{summary}"
    );
    let p = &sdk.protocol;
    assert_eq!(summary["protocol"], p.version, "{summary}");
    assert_eq!(summary["task"]["state"], p.completed, "{summary}");
    assert_eq!(summary["task"]["answer"], text, "{summary}");
    assert_eq!(summary["session_id"], session.id.as_str(), "{summary}");
    assert_eq!(summary["authenticated"], token.is_some(), "{summary}");
    check_wire(&sdk.protocol, &summary, token.is_some());
    if matches!(sdk.runtime, Runtime::Node) && p.version == "1.0" {
        // @a2a-js/sdk 1.x's `listTasks({})` sends the enum it was not given as "UNRECOGNIZED",
        // which ProtoJSON makes "no filter": the caller's tasks, not -32602.
        let plain = &summary["list_plain"];
        assert_eq!(plain["status"], json!(["UNRECOGNIZED"]), "{summary}");
        assert_eq!(plain["error"], Value::Null, "listTasks({{}}): {summary}");
        assert_eq!(plain["listed"], true, "listTasks({{}}): {summary}");
    }
    if let Some(token) = token {
        assert!(!stdout.contains(token) && !stderr.contains(token));
        assert_eq!(summary["extended_card"], true, "{summary}");
        assert_eq!(summary["security_scheme"], "bearer", "{summary}");
    }
    summary
}

/// The calls the script saw on the wire (`METHOD:HTTP status`, in its summary): the
/// generation's own method names only; the send, the two gets (the task, and the unknown one)
/// and the cancel answered with HTTP 200 (A2A errors travel with 200), with a token also the
/// extended card, after the send refused with 401; for 1.0, `A2A-Version: 1.0` on every request.
fn check_wire(p: &Protocol, summary: &Value, authenticated: bool) {
    let calls: Vec<&str> = summary["rpc_calls"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let count = |call: String| calls.iter().filter(|c| **c == call).count();
    let mut wanted = vec![(p.send, 1), (p.get, 2), (p.cancel, 1)];
    if authenticated {
        wanted.push((p.extended_card, 1));
        assert_eq!(count(format!("{}:401", p.send)), 1, "{summary}");
    }
    for (method, times) in wanted {
        assert!(
            count(format!("{method}:200")) >= times,
            "{times} {method} answered with HTTP 200 on the wire: {summary}"
        );
    }
    let foreign: Vec<&&str> = calls
        .iter()
        .filter(|c| {
            !p.methods
                .contains(&c.rsplit_once(':').map_or(**c, |(m, _)| m))
        })
        .collect();
    assert!(
        foreign.is_empty(),
        "methods not of A2A {}: {foreign:?}: {summary}",
        p.version
    );
    check_version_header(p, summary);
}

/// For 1.0: `A2A-Version: 1.0` on every request the script sent.
fn check_version_header(p: &Protocol, summary: &Value) {
    if p.version == "1.0" {
        assert_eq!(summary["a2a_versions"], json!(["1.0"]), "{summary}");
    }
}

/// How long the slow handler of [`interop_cancel`] would run if nobody canceled it.
const SLOW_HANDLER_SECS: u64 = 30;

/// Cancel a running task through `sdk`'s own `cancel_task` / `cancelTask` (`--cancel`): the
/// handler (`echo started`, then a `sleep` in the background that it waits for, whose pid it
/// writes to a file first) is running — the task reads `working` — when the SDK cancels it.
/// The state the SDK returns must be canceled (the door answers a cancel once the task's
/// process tree is gone, not before), the handler's `sleep` must already be gone (reaped) when
/// the SDK has that answer, and `GetTask` right after must say canceled too; all well within
/// the handler's own 30 s. Records itself as skipped when the SDK cannot be had.
#[track_caller]
pub fn interop_cancel(sdk: &Sdk, test: &str) {
    let Some(installed) = installed(sdk, test) else {
        return;
    };
    let home = Home::new();
    let pid_file = home.dir("slow").join("sleep.pid");
    let script = format!(
        "#!/bin/sh\ncat >/dev/null\nsleep {SLOW_HANDLER_SECS} &\necho $! >'{}'\necho started\n\
         wait\n",
        pid_file.display()
    );
    let manifest = home.write_capsule(
        "slow",
        json!({"name": "sdk-slow", "version": "1.0.0"}),
        Some(&script),
    );
    let session = home.start(&[manifest.parent().unwrap().to_str().unwrap()]);
    let mut cmd = sdk.command(&installed, &session.url);
    cmd.args(["--text", "go", "--cancel"]).arg(&pid_file);
    let began = Instant::now();
    let output = run_to_end(cmd, None, DEADLINE);
    let took = began.elapsed();
    let (stdout, stderr) = (&output.stdout, &output.stderr);
    println!("{} client: {}", sdk.setup, stdout.trim());
    assert!(
        output.status.success(),
        "the SDK client failed ({}):\nstdout: {stdout}\nstderr: {stderr}\nmur run stderr: {}",
        output.status,
        session.stderr()
    );
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("the SDK client's summary is not JSON ({e}): {stdout}"));
    assert_eq!(summary["ok"], true, "{summary}");
    assert!(
        summary["sdk"]
            .as_str()
            .is_some_and(|s| s.starts_with(sdk.sdk)),
        "{summary}"
    );
    let p = &sdk.protocol;
    assert_eq!(summary["protocol"], p.version, "{summary}");
    let cancel = &summary["cancel"];
    assert_eq!(
        cancel["running"], p.working,
        "the task ran when it was canceled: {summary}"
    );
    assert_eq!(
        cancel["returned"], p.canceled,
        "the state the SDK's cancel returns: {summary}"
    );
    assert_eq!(
        cancel["handler_left"],
        Value::Null,
        "the handler's process tree is gone when the cancel is answered: {summary}"
    );
    assert_eq!(
        cancel["after"], p.canceled,
        "GetTask after the cancel: {summary}"
    );
    assert!(
        took < Duration::from_secs(SLOW_HANDLER_SECS),
        "the cancel ended the task, not the handler's own end ({took:?}): {summary}"
    );
    let calls: Vec<&str> = summary["rpc_calls"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        calls
            .iter()
            .filter(|c| **c == format!("{}:200", p.cancel))
            .count(),
        1,
        "one {} on the wire: {summary}",
        p.cancel
    );
    check_version_header(p, &summary);
    let kept = session.get_task(None, cancel["id"].as_str().unwrap_or_default());
    assert_eq!(kept["status"]["state"], "canceled", "{kept}");
    end(session);
}

/// Stream from a door whose handler writes `first` and `second`, a line each, in two steps, with
/// `sdk`'s own streaming call (`--stream`: a2a-sdk's `send_message` on a streaming `Client`,
/// @a2a-js/sdk's `sendMessageStream`), and check each event it delivers ([`check_stream`]). The
/// handler writes its second line only once the gate file exists, and the test makes that file only after the
/// script has reported the first chunk: so the test passes only if the first chunk reached the SDK
/// while the handler still ran (chunks sent at the end never come, and the script is failed after
/// [`FIRST_CHUNK_DEADLINE`]). Records itself as skipped when the SDK cannot be had.
#[track_caller]
pub fn interop_stream(sdk: &Sdk, test: &str) {
    let Some(installed) = installed(sdk, test) else {
        return;
    };
    let home = Home::new();
    let gate = Gate::new(&home);
    let manifest = home.write_capsule(
        "streaming",
        json!({"name": "sdk-stream", "version": "1.0.0"}),
        Some(&gate.two_steps()),
    );
    let session = home.start(&[manifest.parent().unwrap().to_str().unwrap()]);
    let mut client = Streaming::spawn(sdk, &installed, &session);

    let first = client.first_chunk(&session);
    assert!(
        first["first_chunk"] == FIRST_SENT,
        "the SDK's first event with text, while the handler waits at its gate, must be {:?}: \
         {first}\n{}",
        FIRST_SENT,
        client.evidence(&session)
    );
    gate.open();

    let summary = client.summary(sdk, &session);
    check_stream(&sdk.protocol, &summary);
    assert_eq!(
        first["event"], 2,
        "the first chunk reported was the first artifact event: {summary}"
    );
    let task = &summary["events"][0]["id"];
    let kept = session.get_task(None, task.as_str().unwrap_or_default());
    assert_eq!(kept["status"]["state"], "completed", "{kept}");
    assert_eq!(
        kept["artifacts"][0]["parts"][0]["text"], ASSEMBLED,
        "the stored answer is the stream assembled: {kept}"
    );
    end(session);
}

/// An SDK script streaming from the door: its stdout line by line as it comes, its stderr kept.
/// Killed on drop if still running.
struct Streaming {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: Drain,
    said: Vec<String>,
}

impl Streaming {
    fn spawn(sdk: &Sdk, installed: &Path, session: &Session) -> Streaming {
        let mut cmd = sdk.command(installed, &session.url);
        cmd.args(["--stream", "--text", "go"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn the SDK client");
        let stderr = Drain::start(child.stderr.take().unwrap());
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Streaming {
            child,
            lines,
            stderr,
            said: Vec::new(),
        }
    }

    /// The script's `first_chunk` line, which must come within [`FIRST_CHUNK_DEADLINE`] (the
    /// lines before it, one per event, are kept); failing the test (the script killed,
    /// everything shown) when it does not.
    #[track_caller]
    fn first_chunk(&mut self, session: &Session) -> Value {
        let deadline = Instant::now() + FIRST_CHUNK_DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let said: Value = serde_json::from_str(&line).unwrap_or_default();
                    self.said.push(line);
                    if said.get("first_chunk").is_some() || said.get("ok").is_some() {
                        return said;
                    }
                }
                Err(why) => panic!(
                    "no first chunk reached the SDK within {FIRST_CHUNK_DEADLINE:?} while the \
                     handler waited at its gate ({why:?})\n{}",
                    self.evidence(session)
                ),
            }
        }
    }

    /// Everything there is to see, the script stopped first.
    fn evidence(&mut self, session: &Session) -> String {
        if wait_child(&mut self.child, Duration::ZERO).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        self.stderr.wait(Duration::from_secs(5));
        format!(
            "client stdout: {}\nclient stderr: {}\nmur run stderr: {}",
            self.said.join("\n"),
            self.stderr.text(),
            session.stderr()
        )
    }

    /// The script's summary, its last line, once it has exited (within [`DEADLINE`]) and said
    /// every check held, with the pinned SDK speaking its generation.
    #[track_caller]
    fn summary(&mut self, sdk: &Sdk, session: &Session) -> Value {
        let exited = wait_child(&mut self.child, DEADLINE);
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.said.push(line);
        }
        let last = self.said.last().cloned().unwrap_or_default();
        println!("{} client: {}", sdk.setup, self.said.join("\n"));
        let summary: Value = serde_json::from_str(&last).unwrap_or_default();
        assert!(
            exited.is_some_and(|s| s.success()) && summary["ok"] == true,
            "the SDK client failed ({exited:?})\n{}",
            self.evidence(session)
        );
        assert!(
            summary["sdk"]
                .as_str()
                .is_some_and(|s| s.starts_with(sdk.sdk)),
            "{summary}"
        );
        assert_eq!(summary["protocol"], sdk.protocol.version, "{summary}");
        summary
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        if wait_child(&mut self.child, Duration::ZERO).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The events the SDK delivered, in order: the task (submitted), its status working, one
/// artifact update per chunk (the first not appending, every later one appending, only the last
/// marked `lastChunk`) whose text joins to what the handler wrote, then the completed status
/// (0.3: the only one `final`), and nothing after it. On the wire: one call, the generation's
/// streaming method, answered 200 with as many events as the SDK delivered (1.0: under
/// `A2A-Version: 1.0`).
fn check_stream(p: &Protocol, summary: &Value) {
    let events = summary["events"].as_array().cloned().unwrap_or_default();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert!(
        events.len() >= 4
            && kinds[..2] == ["task", "status"]
            && kinds[2..kinds.len() - 1].iter().all(|k| *k == "artifact")
            && kinds.last() == Some(&"status"),
        "task, status, artifact…, status: {summary}"
    );
    assert_eq!(events[0]["state"], p.submitted, "{summary}");
    assert_eq!(events[1]["state"], p.working, "{summary}");
    let settled = &events[events.len() - 1];
    assert_eq!(settled["state"], p.completed, "{summary}");
    if p.version == "0.3" {
        let finals: Vec<&Value> = events.iter().map(|e| &e["final"]).collect();
        assert_eq!(finals[1], false, "{summary}");
        assert_eq!(finals[finals.len() - 1], true, "{summary}");
    }
    let chunks = &events[2..events.len() - 1];
    let text: String = chunks.iter().filter_map(|c| c["text"].as_str()).collect();
    assert_eq!(
        text, ASSEMBLED,
        "the chunks join to stdout less its trailing newline: {summary}"
    );
    for (i, chunk) in chunks.iter().enumerate() {
        assert_eq!(
            chunk["append"] == true,
            i > 0,
            "append after the first: {summary}"
        );
        let last = i + 1 == chunks.len();
        assert_eq!(
            chunk["last"] == true,
            last,
            "only the last chunk: {summary}"
        );
    }
    if let Some(answer) = summary.get("sdk_answer") {
        assert_eq!(answer, &json!(ASSEMBLED), "the SDK's own task: {summary}");
    }
    assert_eq!(
        summary["rpc_calls"],
        json!([format!("{}:200", p.stream)]),
        "{summary}"
    );
    assert_eq!(summary["stream_events"], json!([events.len()]), "{summary}");
    check_version_header(p, summary);
}
