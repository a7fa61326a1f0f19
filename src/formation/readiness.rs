//! Readiness: when a formation's members may be told of each other. A peer is ready when its
//! readiness line arrived and the door at the URL it names answers as the session it names
//! (authenticated doors probed with the operator token from the member's record); one deadline
//! per member, from its spawn. Waiting is all or nothing: the first failure — a report, an exit,
//! a missed deadline — or a signal to the launcher ends it.
//!
//! Each peer's line is read and its door probed on a thread of its own, reporting on a channel;
//! [`await_peers`] alone decides. The entry member's line is relayed by [`relay_entry`], which
//! then copies the rest of its stdout (a `--task` answer) to ours.

use std::io::BufReader;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::members::Members;
use crate::id::{FormationId, SessionId};
use crate::json::channel;
use crate::secret::Secret;
use crate::sys::signal;

/// How often readiness waits look at the launcher's signal flag and the peers' exits.
const TICK: Duration = Duration::from_millis(10);

/// What the readiness line and the door probe proved about one member.
#[derive(Debug, Clone)]
pub struct Ready {
    pub session_id: SessionId,
    pub url: String,
    pub pid: u32,
}

/// What each peer's readiness thread reports: its name, and how its readiness went.
pub type Reports = mpsc::Receiver<(String, Result<Ready, String>)>;

/// A peer whose readiness is awaited: its name and deadline, counted from its spawn.
pub struct Pending {
    pub name: String,
    pub deadline: Instant,
}

/// How waiting for the peers ended.
pub enum PeersReady {
    All(Vec<(String, Ready)>),
    Failed(Vec<String>),
    Signalled(i32),
}

/// Wait for every peer, all or nothing: a peer that reports a failure, exits, or passes its
/// deadline fails the launch, as does a signal to the launcher. Every peer that had failed by
/// then is named.
pub fn await_peers(
    (mut pending, rx): (Vec<Pending>, Reports),
    members: &mut Members,
    ready_timeout: Duration,
) -> PeersReady {
    let mut ready = Vec::new();
    let mut failures = Vec::new();
    while !pending.is_empty() && failures.is_empty() {
        if let Some(caught) = signal::caught_termination() {
            return PeersReady::Signalled(caught);
        }
        match rx.recv_timeout(TICK) {
            Ok((name, outcome)) => {
                pending.retain(|p| p.name != name);
                match outcome {
                    Ok(r) => ready.push((name, r)),
                    Err(why) => failures.push(format!("{name}: {why}")),
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        let now = Instant::now();
        pending.retain(|p| {
            let why = if members.has_exited(&p.name) {
                "exited before it was ready".to_string()
            } else if now >= p.deadline {
                format!("not ready within {}s", ready_timeout.as_secs())
            } else {
                return true;
            };
            failures.push(format!("{}: {why}", p.name));
            false
        });
    }
    if failures.is_empty() {
        PeersReady::All(ready)
    } else {
        PeersReady::Failed(failures)
    }
}

/// Read a peer's readiness line and probe its door until it answers as that session.
pub fn await_ready(
    stdout: std::fs::File,
    id: &FormationId,
    pid: u32,
    deadline: Instant,
) -> Result<Ready, String> {
    let mut reader = BufReader::new(stdout);
    let line = channel::read_line(&mut reader)
        .map_err(|_| "its readiness line was malformed".to_string())?
        .ok_or("exited before it was ready")?;
    let ready = parse_ready(&line, id, pid)?;
    let token = operator_token(&ready.session_id);
    let mut last = String::new();
    while Instant::now() < deadline {
        match crate::door_client::probe_session_id(&ready.url, token.as_ref()) {
            Ok(sid) if sid == ready.session_id.as_str() => return Ok(ready),
            Ok(other) => {
                last = format!(
                    "the door at {} answers as {}",
                    ready.url,
                    other.escape_debug()
                )
            }
            Err(why) => last = why,
        }
        std::thread::sleep(TICK);
    }
    Err(format!("its door never answered as its session ({last})"))
}

fn parse_ready(line: &[u8], id: &FormationId, pid: u32) -> Result<Ready, String> {
    let value: Value = crate::json::strict::from_slice(line)
        .map_err(|_| "printed something that is not a readiness line".to_string())?;
    let field = |key: &str| value.get(key).and_then(Value::as_str);
    let session_id = field("session_id")
        .and_then(|s| SessionId::parse(s).ok())
        .ok_or("its readiness line names no session")?;
    if field("formation_id") != Some(id.as_str()) {
        return Err(format!(
            "its readiness line names formation {}, not {id}",
            field("formation_id").unwrap_or("none")
        ));
    }
    if value.get("pid").and_then(Value::as_u64) != Some(u64::from(pid)) {
        return Err("its readiness line names another process".into());
    }
    let url = field("url")
        .ok_or("its readiness line names no door")?
        .to_string();
    Ok(Ready {
        session_id,
        url,
        pid,
    })
}

/// The operator token in a member's record, for probing an authenticated door.
fn operator_token(session: &SessionId) -> Option<Secret> {
    let dir = crate::home::running_dir_if_present(None).ok()??;
    crate::running::read(&dir, session.as_str())?.door_token
}

/// Pass the entry member's readiness line to `ready`, then copy the rest of its stdout (the
/// answer of a `--task`) to ours.
pub fn relay_entry(stdout: std::fs::File, ready: mpsc::Sender<Vec<u8>>) {
    let mut reader = BufReader::new(stdout);
    if let Ok(Some(line)) = channel::read_line(&mut reader) {
        let _ = ready.send(line);
        crate::sys::wake::notify();
    }
    let _ = std::io::copy(&mut reader, &mut std::io::stdout());
}
