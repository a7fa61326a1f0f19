//! `mur run -d` and `mur formation -d`: the session (or the formation's launcher) started in the
//! background, and the command returning once it is up — a session's record written and its
//! door answering as it, a formation's every member ready — or failing with the reason.
//!
//! Why a new process (this binary again, `run … --json --detached-session`) rather than a fork:
//! by the time a session runs it has threads, and a fork copies only one; a fresh process is
//! the session exactly as `mur run` starts it in the foreground. It gets a process group of its
//! own (a ^C at the terminal does not reach it) and stdin from /dev/null; its readiness line
//! and, if it fails, its stderr come back through pipes this command reads.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::cli::{Failure, Out, Outcome};

/// The option by which `mur run -d` (`mur formation -d`) tells the process it starts that it is
/// detached (read by the applet's own parser).
pub const DETACHED: &str = "detached-session";

/// How long the session has to come up.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// The most of a failed session's stderr kept for the reason.
const MAX_REASON: u64 = 16 * 1024;

/// What is started in the background: the applet, what it is called in messages, how long it
/// may take to be ready, and how its readiness line is checked — the id printed, or why it is
/// not up.
pub struct Detached {
    pub applet: &'static str,
    pub what: &'static str,
    pub within: Duration,
    pub check: fn(&serde_json::Value) -> Result<String, String>,
}

/// `mur run -d`'s: a session, up once its door answers as it.
pub const SESSION: Detached = Detached {
    applet: "run",
    what: "session",
    within: READY_TIMEOUT,
    check: session_up,
};

/// Start what `args` (the applet's own arguments, `-d` among them) describe in the background;
/// print its id (the readiness line with `json`) once it is up.
pub fn start(detached: &Detached, args: Vec<OsString>, json: bool) -> Outcome {
    let what = detached.what;
    let exe = std::env::current_exe()
        .map_err(|err| Failure::Failed(format!("cannot find this mur binary: {err}")))?;
    let mut child_args: Vec<OsString> = vec![detached.applet.into()];
    child_args.extend(
        args.into_iter()
            .filter(|a| a != "-d" && a != "--detach" && a != "--json"),
    );
    child_args.push("--json".into());
    child_args.push(format!("--{}", DETACHED).into());
    let mut child = Command::new(exe)
        .args(&child_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|err| Failure::Failed(format!("cannot start the {what}: {err}")))?;
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let spawned = std::thread::Builder::new().spawn(move || {
        let mut line = String::new();
        if let Some(out) = stdout {
            let _ = BufReader::new(out).take(64 * 1024).read_line(&mut line);
        }
        let _ = tx.send(line);
    });
    if spawned.is_err() {
        return fail(
            what,
            &mut child,
            stderr,
            "no thread to read its readiness line",
        );
    }
    let line = match rx.recv_timeout(detached.within) {
        Ok(line) if line.ends_with('\n') => line,
        Ok(_) => return fail(what, &mut child, stderr, "it ended before it was ready"),
        Err(_) => {
            let why = format!("it was not ready within {:?}; stopped", detached.within);
            return fail(what, &mut child, stderr, &why);
        }
    };
    let ready: serde_json::Value = serde_json::from_str(&line)
        .map_err(|_| Failure::Failed(format!("the {what} printed no readiness line")))?;
    let id = match (detached.check)(&ready) {
        Ok(id) => id,
        Err(why) => return fail(what, &mut child, stderr, &why),
    };
    let mut out = Out::default();
    out.line(if json { line.trim_end() } else { &id });
    Ok(0)
}

/// A session's readiness line checked: its id, once its door answers as it.
fn session_up(ready: &serde_json::Value) -> Result<String, String> {
    let id = ready["session_id"].as_str().unwrap_or_default();
    let url = ready["url"].as_str().unwrap_or_default();
    answers(id, url).map_err(|why| format!("its door does not answer: {why}"))?;
    Ok(id.to_string())
}

/// Whether the door at `url` answers as session `id`, asked with the operator token from its
/// record (an authenticated door names the session only on its extended card). The record
/// was written before the readiness line; one that cannot be read is a failure too.
fn answers(id: &str, url: &str) -> Result<(), String> {
    let dir = crate::home::running_dir_if_present(None)
        .map_err(String::from)?
        .ok_or("no running directory")?;
    let record = crate::running::read(&dir, id).ok_or("its record cannot be read")?;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match crate::door_client::probe_session_id(url, record.door_token.as_ref()) {
            Ok(said) if said == id => return Ok(()),
            Ok(said) => return Err(format!("it answers as {said}")),
            Err(why) if Instant::now() >= deadline => return Err(why),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// It did not come up: stop it if it still runs (our own child, in its own group), and fail
/// with `why` and what it said on stderr.
fn fail(
    what: &str,
    child: &mut Child,
    stderr: Option<std::process::ChildStderr>,
    why: &str,
) -> Outcome {
    let _ = child.kill();
    let _ = child.wait();
    let mut said = String::new();
    if let Some(err) = stderr {
        let _ = err.take(MAX_REASON).read_to_string(&mut said);
    }
    let said = said.trim_end();
    Err(Failure::Failed(if said.is_empty() {
        format!("the {what} did not come up: {why}")
    } else {
        format!("the {what} did not come up: {why}:\n{said}")
    }))
}
