//! `mur cancel`: end one task of a running session, leaving the session running — what the
//! door's `tasks/cancel` does, from the command line, with the operator token from the record
//! so no token is ever typed.

use std::time::Duration;

use serde_json::{Value, json};

use super::Applet;
use crate::a2a::rpc::{TASK_NOT_CANCELABLE, TASK_NOT_FOUND, TASKS_CANCEL, TASKS_GET};
use crate::cli::spec::{Kind, Spec};
use crate::cli::{Failure, Out, Outcome};
use crate::door_client::{self, CallError};
use crate::net::client::Deadlines;
use crate::running::Entry;
use crate::secret::Secret;

pub const APPLET: Applet = Applet {
    name: "cancel",
    summary: "cancel one task of a running session",
    usage: "\
Usage: mur cancel [ADDR] TASK_ID [--json]
       mur cancel --url HOST:PORT TASK_ID [--json]

Cancel one task, leaving its session running, and print the task's id and the
state it ended in:
  tsk_0199...  canceled
ADDR is @N, a full ses_ id, a capsule NAME or NAME@VERSION, or a suffix of at
least 4 characters (see 'mur stop --help'); without it, the only running
session, or, when several run, the one that has the task (each is asked). The call carries the session's operator token, read from its record
(never from the command line). A queued task, or one waiting for input, ends
at once; a running one when its handler's processes have gone (SIGTERM, then
SIGKILL 2 s later), so this can take a few seconds.

Options:
  --url HOST:PORT  cancel at this door instead (no token: a public door, such
                   as one of another machine's sessions behind a tunnel)
  --json           print the task as the door answered it (one that had already
                   ended: as it ended, exit status 1)
  -h, --help       this text

A door that speaks only A2A 1.0 (the original runtime's) is asked CancelTask
when it does not know tasks/cancel.

Exit status: 0 when the task is now canceled; 1 when it is not (it had already
ended: its state is said), no such task is visible, or the session is not
running; 2 on a usage error.
",
    main,
    spec: &SPEC,
};

/// `cancel`'s command line, the one table its parser and the shell completions read.
static SPEC: Spec = Spec::new(super::DOOR_OPTIONS, &[Kind::Address, Kind::Text]);

/// How long a cancel may take: a running handler gets SIGTERM, then SIGKILL 2 s later, and the
/// answer waits for its processes to go.
const CANCEL: Deadlines = Deadlines {
    connect: Duration::from_secs(2),
    response: Duration::from_secs(30),
};

/// The 1.0 names of `tasks/cancel` and `tasks/get`, for doors that speak only 1.0.
const CANCEL_TASK: &str = "CancelTask";
const GET_TASK: &str = "GetTask";

fn main(args: Vec<std::ffi::OsString>) -> Outcome {
    let super::DoorArgs {
        positional,
        url,
        json: as_json,
    } = super::door_args(&SPEC, args)?;
    let (address, task_id) = match (positional.as_slice(), &url) {
        ([task], _) => (None, task.clone()),
        ([_, _], Some(_)) => {
            return Err(Failure::Usage(
                "--url names the door: give TASK_ID alone, not ADDR".into(),
            ));
        }
        ([address, task], None) => (Some(address.as_str()), task.clone()),
        _ => return Err(Failure::Usage("name the task: [ADDR] TASK_ID".into())),
    };
    let (door, token, label) = match url {
        Some(url) => (url.clone(), None, url),
        None => {
            let running = super::running("cancel")?;
            let entry = match (address, running.as_slice()) {
                (None, [_, _, ..]) => holder_of(&task_id, &running)?,
                _ => super::one_session(address, &running)?,
            };
            let record = &entry.record;
            let label = record.session_id.to_string();
            (record.url.clone(), record.door_token.clone(), label)
        }
    };
    cancel(&door, token.as_ref(), &task_id, &label, as_json)
}

/// The one running session that has task `task_id`: each door is asked for it (`tasks/get`, or
/// `GetTask` at a door that speaks only 1.0) with its operator token, in turn. Task ids are
/// unique, so `mur cancel TASK` needs no address when several sessions run.
fn holder_of<'a>(task_id: &str, running: &'a [Entry]) -> Result<&'a Entry, Failure> {
    running
        .iter()
        .find(|entry| get(&entry.record.url, entry.record.door_token.as_ref(), task_id).is_some())
        .ok_or_else(|| {
            Failure::Failed(format!(
                "none of the {} running sessions has task {} (mur ps lists them; name one: \
                 mur cancel ADDR TASK_ID)",
                running.len(),
                task_id.escape_debug()
            ))
        })
}

/// Ask the door at `door` to cancel `task_id`; print what became of it.
fn cancel(
    door: &str,
    token: Option<&Secret>,
    task_id: &str,
    label: &str,
    as_json: bool,
) -> Outcome {
    let shown = task_id.escape_debug();
    let answer = door_client::call_either(
        door,
        token,
        [TASKS_CANCEL, CANCEL_TASK],
        json!({"id": task_id}),
        CANCEL,
    );
    let task = match answer {
        Ok((_, task)) => task,
        Err(CallError::Rpc { code, .. }) if code == TASK_NOT_FOUND => {
            return Err(Failure::Failed(format!(
                "no task {shown} at {label} (or not one this token may see)"
            )));
        }
        Err(CallError::Rpc { code, message }) if code == TASK_NOT_CANCELABLE => {
            let why = format!("task {shown} was not canceled: {message}");
            return match as_json.then(|| get(door, token, task_id)).flatten() {
                // A script asked for the task: it gets it as it ended, and exit 1 all the same.
                Some(ended) => {
                    crate::cli::warn("cancel", &why);
                    Out::default().line(&ended.to_string());
                    Ok(1)
                }
                None => Err(Failure::Failed(why)),
            };
        }
        Err(err) => return Err(Failure::Failed(format!("{label}: {err}"))),
    };
    let state = state_of(&task);
    let mut out = Out::default();
    if as_json {
        out.line(&task.to_string());
    } else {
        out.line(&format!(
            "{shown}  {}",
            state.as_deref().unwrap_or("unknown")
        ));
    }
    Ok(i32::from(state.as_deref() != Some("canceled")))
}

/// Task `task_id` as the door at `door` has it now, if it answers with it.
fn get(door: &str, token: Option<&Secret>, task_id: &str) -> Option<Value> {
    let params = json!({"id": task_id});
    door_client::call_either(
        door,
        token,
        [TASKS_GET, GET_TASK],
        params,
        door_client::PROBE,
    )
    .ok()
    .map(|(_, task)| task)
}

/// A task's state in 0.3's words (`canceled`), whichever generation answered (1.0 says
/// `TASK_STATE_CANCELED`).
fn state_of(task: &Value) -> Option<String> {
    let state = task.get("status")?.get("state")?.as_str()?;
    let bare = state.strip_prefix("TASK_STATE_").unwrap_or(state);
    Some(bare.to_ascii_lowercase().replace('_', "-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_generations_state_reads_the_same() {
        let v03 = json!({"status": {"state": "canceled"}});
        let v10 = json!({"status": {"state": "TASK_STATE_INPUT_REQUIRED"}});
        assert_eq!(state_of(&v03).as_deref(), Some("canceled"));
        assert_eq!(state_of(&v10).as_deref(), Some("input-required"));
        assert_eq!(state_of(&json!({})), None);
    }
}
