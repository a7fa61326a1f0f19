//! `mur watch`: follow a running session's events as an observer (`murmur.WatchSession`), with
//! the operator token from the record, until the session ends.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::Applet;
use super::printable;
use crate::a2a::card::STREAM_EXTENSION_URI;
use crate::a2a::rpc::WATCH_SESSION;
use crate::a2a::task::State;
use crate::a2a::version::Generation;
use crate::cli::spec::{Kind, Spec};
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
  --json           print each event's result as the door sent it, one JSON
                   object a line: A2A 1.0 statusUpdate, artifactUpdate and
                   message, each murmur frame (connection-ack, text,
                   capsule-closed) under the metadata key of the original's
                   stream extension (.../streaming-protocol/#murmur-stream-v1)
  -h, --help       this text

Exit status: 0 once the session has ended (capsule-closed); 1 when the session
is not running, the door refused, or the stream broke off before the end; 2 on
a usage error.
",
    main,
    spec: &SPEC,
};

/// `watch`'s command line, the one table its parser and the shell completions read.
static SPEC: Spec = Spec::new(super::DOOR_OPTIONS, &[Kind::Address]);

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
    } = super::door_args(&SPEC, args)?;
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
    let label = address.map_or(door.clone(), str::to_string);
    let mut view = View::default();
    let mut on_result = |result: Value| {
        if as_json {
            view.out.line(&result.to_string());
            view.closed |= frame_of(&result)["frame"] == "capsule-closed";
        } else {
            view.show(&result, &label);
        }
    };
    door_client::call_streaming(
        &door,
        token.as_ref(),
        WATCH_SESSION,
        json!({}),
        WATCH,
        &mut on_result,
    )
    .map_err(|err| Failure::Failed(format!("{door}: {err}")))?;
    if !view.closed {
        return Err(Failure::Failed(
            "the stream ended before the session did (cut for falling behind, or the connection broke)"
                .into(),
        ));
    }
    Ok(0)
}

/// The murmur frame an event carries — under `metadata[STREAM_EXTENSION_URI]` of its
/// `statusUpdate` or `message` — or `Null`.
fn frame_of(result: &Value) -> &Value {
    let carrier = result
        .get("statusUpdate")
        .or_else(|| result.get("message"))
        .unwrap_or(&Value::Null);
    &carrier["metadata"][STREAM_EXTENSION_URI]
}

/// What the watch has printed: a task's streamed text is held until its line is whole, so each
/// line is printed once, prefixed with its task.
#[derive(Default)]
struct View {
    out: Out,
    /// Each task's text since its last newline.
    partial: HashMap<String, String>,
    closed: bool,
}

impl View {
    /// One event for a person; no control character of the capsule's output reaches the
    /// terminal.
    fn show(&mut self, result: &Value, label: &str) {
        let frame = frame_of(result);
        let update = &result["statusUpdate"];
        let task = printable(update["taskId"].as_str().unwrap_or(""));
        match frame["frame"].as_str() {
            Some("connection-ack") => cli::warn("watch", &format!("watching {}", printable(label))),
            Some("capsule-closed") => {
                self.closed = true;
                cli::warn("watch", "the session has ended");
            }
            Some("text") => {
                let held = self.partial.entry(task.clone()).or_default();
                held.push_str(frame["text"].as_str().unwrap_or(""));
                while let Some(at) = held.find('\n') {
                    let line: String = held.drain(..=at).collect();
                    self.out.line(&format!(
                        "{task}  | {}",
                        printable(line.trim_end_matches('\n'))
                    ));
                }
            }
            Some(_) => {}
            None => self.status(update, &task),
        }
    }

    /// A task's status without a frame: `started` for the first (working) one, and the state it
    /// ended in, after the rest of its text.
    fn status(&mut self, update: &Value, task: &str) {
        let Some(wire) = update["status"]["state"].as_str() else {
            return;
        };
        let state = [Generation::V1_0, Generation::V0_3]
            .into_iter()
            .find_map(|g| State::from_wire(wire, g));
        match state {
            Some(State::Working) => self.out.line(&format!("{task}  started")),
            Some(state) if state.is_final() => {
                if let Some(rest) = self.partial.remove(task).filter(|r| !r.is_empty()) {
                    self.out.line(&format!("{task}  | {}", printable(&rest)));
                }
                self.out
                    .line(&format!("{task}  {}", state.wire(Generation::V0_3)));
            }
            _ => {}
        }
    }
}
