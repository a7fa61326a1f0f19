//! `mur formation ready`: the readiness of a member that joined from its mounted directory —
//! the Kubernetes readiness probe of a member that calls others.
//!
//! Ready means: this member's own door answers, and every callee's door takes this member's
//! token for it. A formation token verifies only with the door key of the member it is
//! addressed to in the formation that minted it, and a door refuses (401) any token that does
//! not, so an answer that looked the task up — "no such task", for an id no task has — proves
//! the door is that member of this formation. (Session ids are not known in advance here, and a
//! public card could name anything: the token is the proof a card cannot forge.) Checked anew
//! at every probe, so a callee that goes away makes its callers unready again.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::a2a::rpc::{TASK_NOT_FOUND, TASKS_GET};
use crate::door_client::{self, CallError, PROBE};
use crate::net::client::{self, Request};
use crate::net::multi::{self, Exchange};

/// The task id the probe asks for: no task has it (task ids are UUIDs).
const NO_TASK: &str = "murmur-readiness-probe";
/// Where the card is served.
const CARD_PATH: &str = "/.well-known/agent-card.json";

/// Check member readiness for the formation directory `dir` and this member's own door at
/// `own` (`host:port`): `Ok` with one line per check, or `Err` naming every check that failed.
pub fn check(dir: &Path, own: &str) -> Result<Vec<String>, Vec<String>> {
    let mounted = crate::mounted::read(dir).map_err(|why| vec![why])?;
    let (mut passed, mut failed) = (Vec::new(), Vec::new());
    match own_door(own) {
        Ok(()) => passed.push(format!("{}: its door answers at {own}", mounted.member)),
        Err(why) => failed.push(format!("{}: its own door: {why}", mounted.member)),
    }
    for (callee, token) in &mounted.calls {
        let address = &mounted.addresses[callee];
        let answered = crate::mounted::resolve_door(address, Duration::ZERO).and_then(|addr| {
            match door_client::call(&addr, Some(token), TASKS_GET, json!({"id": NO_TASK}), PROBE) {
                Err(CallError::Rpc { code, .. }) if code == TASK_NOT_FOUND => Ok(()),
                Err(CallError::Transport(why)) if why.contains("HTTP 401") => Err(format!(
                    "the door at {addr} is not '{callee}' of {}: it refuses this member's token",
                    mounted.formation_id
                )),
                Err(err) => Err(err.to_string()),
                Ok(_) => Err(format!("the door at {addr} answered a task nobody made")),
            }
        });
        match answered {
            Ok(()) => passed.push(format!(
                "{callee} at {address}: answers as '{callee}' of {}",
                mounted.formation_id
            )),
            Err(why) => failed.push(format!("{callee} at {address}: {why}")),
        }
    }
    if failed.is_empty() {
        Ok(passed)
    } else {
        Err(failed)
    }
}

/// Whether the door at `own` serves its card.
fn own_door(own: &str) -> Result<(), String> {
    let addr = client::parse_door_addr(&crate::mounted::resolve_door(own, Duration::ZERO)?)?;
    let request = Request {
        method: "GET",
        path: CARD_PATH,
        headers: &[],
        body: None,
    };
    let response = multi::one(
        Exchange {
            addr,
            request: request.encode(addr),
        },
        PROBE,
    )?;
    match response.status {
        200 => Ok(()),
        status => Err(format!("its card answered HTTP {status}")),
    }
}
