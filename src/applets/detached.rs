//! `mur run -d`: the session started in the background, and the command returning once it is
//! up — its record written and its door answering as it — or failing with the reason.
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

/// The option by which `mur run -d` tells the session it starts that it is detached (read by
/// `mur run`'s own parser).
pub const DETACHED: &str = "detached-session";

/// How long the session has to come up.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// The most of a failed session's stderr kept for the reason.
const MAX_REASON: u64 = 16 * 1024;

/// Start the session `args` (this `mur run`'s own arguments, `-d` among them) describe in the
/// background; print its id (the readiness line with `json`) once it is up.
pub fn start(args: Vec<OsString>, json: bool) -> Outcome {
    let exe = std::env::current_exe()
        .map_err(|err| Failure::Failed(format!("cannot find this mur binary: {err}")))?;
    let mut child_args: Vec<OsString> = vec!["run".into()];
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
        .map_err(|err| Failure::Failed(format!("cannot start the session: {err}")))?;
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
        return fail(&mut child, stderr, "no thread to read its readiness line");
    }
    let line = match rx.recv_timeout(READY_TIMEOUT) {
        Ok(line) if line.ends_with('\n') => line,
        Ok(_) => return fail(&mut child, stderr, "it ended before it was ready"),
        Err(_) => return fail(&mut child, stderr, "it was not ready within 30 s; stopped"),
    };
    let ready: serde_json::Value = serde_json::from_str(&line)
        .map_err(|_| Failure::Failed("the session printed no readiness line".into()))?;
    let id = ready["session_id"].as_str().unwrap_or_default().to_string();
    let url = ready["url"].as_str().unwrap_or_default().to_string();
    if let Err(why) = answers(&id, &url) {
        return fail(
            &mut child,
            stderr,
            &format!("its door does not answer: {why}"),
        );
    }
    let mut out = Out::default();
    out.line(if json { line.trim_end() } else { &id });
    Ok(0)
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

/// The session did not come up: stop it if it still runs (our own child, in its own group),
/// and fail with `why` and what it said on stderr.
fn fail(child: &mut Child, stderr: Option<std::process::ChildStderr>, why: &str) -> Outcome {
    let _ = child.kill();
    let _ = child.wait();
    let mut said = String::new();
    if let Some(err) = stderr {
        let _ = err.take(MAX_REASON).read_to_string(&mut said);
    }
    let said = said.trim_end();
    Err(Failure::Failed(if said.is_empty() {
        format!("the session did not come up: {why}")
    } else {
        format!("the session did not come up: {why}:\n{said}")
    }))
}
