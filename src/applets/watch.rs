//! `mur watch`: follow a running session's events as an observer (`murmur.WatchSession`), with
//! the operator token from the record, until the session ends.

use std::time::Duration;

use serde_json::{Value, json};

use super::Applet;
use crate::a2a::rpc::WATCH_SESSION;
use crate::cli::{self, Failure, Out, Outcome};
use crate::door_client;
use crate::net::client::Deadlines;

pub const APPLET: Applet = Applet {
    name: "watch",
    summary: "follow a running session's task events and output",
    usage: "\
Usage: mur watch [ADDR] [--json]
       mur watch --url HOST:PORT [--json]

Follow a running session as an observer until it ends: each task as it
starts, the text it streams, and the state it ends in, one line each:
  tsk_0199...  started
  tsk_0199...  | a line of its answer
  tsk_0199...  completed
ADDR is @N, a full ses_ id, a capsule NAME or NAME@VERSION, or a suffix of at
least 4 characters (see 'mur stop --help'); without it, the only running
session. The call (murmur.WatchSession, A2A-Version 1.0) carries the session's
operator token, read from its record. A watcher too slow for the session's
output is cut (exit 1); the session is never slowed for it.

Options:
  --url HOST:PORT  watch this door instead (no token: a public door)
  --json           print each frame as the door sent it, one JSON object a line
                   (connection-ack, task-started, text, task-ended,
                   capsule-closed)
  -h, --help       this text

Exit status: 0 once the session has ended (capsule-closed); 1 when the session
is not running, the door refused, or the stream broke off before the end; 2 on
a usage error.
",
    main,
};

/// A watch is quiet between tasks; the door writes a keep-alive every 15 s.
const WATCH: Deadlines = Deadlines {
    connect: Duration::from_secs(2),
    response: Duration::from_secs(60),
};

fn main(args: Vec<std::ffi::OsString>) -> Outcome {
    let super::DoorArgs {
        positional,
        url,
        json: as_json,
    } = super::door_args(args)?;
    let address = match (positional.as_slice(), &url) {
        ([], _) => None,
        ([a], None) => Some(a.as_str()),
        ([_], Some(_)) => return Err(Failure::Usage("--url names the door: no ADDR".into())),
        _ => return Err(Failure::Usage("at most one ADDR".into())),
    };
    let (door, token) = match url {
        Some(url) => (url, None),
        None => {
            let running = super::running("watch")?;
            let entry = super::one_session(address, &running)?;
            (entry.record.url.clone(), entry.record.door_token.clone())
        }
    };
    let mut out = Out::default();
    let mut closed = false;
    let mut on_frame = |frame: Value| {
        closed |= frame["type"] == "capsule-closed";
        if as_json {
            out.line(&frame.to_string());
        } else {
            show(&frame, &mut out);
        }
    };
    door_client::call_streaming(
        &door,
        token.as_ref(),
        WATCH_SESSION,
        json!({}),
        WATCH,
        &mut on_frame,
    )
    .map_err(|err| Failure::Failed(format!("{door}: {err}")))?;
    if !closed {
        return Err(Failure::Failed(
            "the stream ended before the session did (cut for falling behind, or the connection broke)"
                .into(),
        ));
    }
    Ok(0)
}

/// One frame for a person; no control character of the capsule's output reaches the terminal
/// but the newlines that split its text into lines.
fn show(frame: &Value, out: &mut Out) {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| if c.is_control() { '\u{fffd}' } else { c })
            .collect()
    };
    let task = clean(frame["task_id"].as_str().unwrap_or(""));
    match frame["type"].as_str() {
        Some("connection-ack") => cli::warn(
            "watch",
            &format!(
                "watching {}",
                clean(frame["session_id"].as_str().unwrap_or("the session"))
            ),
        ),
        Some("task-started") => out.line(&format!("{task}  started")),
        Some("text") => {
            for line in frame["text"].as_str().unwrap_or("").lines() {
                out.line(&format!("{task}  | {}", clean(line)));
            }
        }
        Some("task-ended") => out.line(&format!(
            "{task}  {}",
            clean(frame["state"].as_str().unwrap_or("ended"))
        )),
        Some("capsule-closed") => cli::warn("watch", "the session has ended"),
        _ => {}
    }
}
