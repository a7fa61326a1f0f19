//! `mur run --task`: one task, its answer streamed to stdout as the handler writes it — each
//! chunk written and flushed as it arrives, so `mur run cap --task x | while read line` sees
//! progress — and the session's exit code from how it ended.

use std::io::Write;
use std::sync::Arc;
use std::sync::mpsc::Receiver;

use super::feed::Next;
use super::tasks::Engine;
use crate::a2a::message::{Content, Message, Part, Role};
use crate::a2a::stream::Event;
use crate::a2a::task::State;

/// How long the reader waits for an event before looking again (nothing else to do meanwhile).
const WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// How the task ended: its state, and the status message's text (why it failed, or the
/// question it asks).
pub type Ended = (State, String);

/// Run `text` as a task on a thread of its own, printing its answer as it streams; how it ended
/// arrives on the receiver, and wakes the session.
pub fn start(engine: &Arc<Engine>, text: String) -> Result<Receiver<Ended>, String> {
    let engine = engine.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("one-shot".into())
        .spawn(move || {
            let _ = tx.send(run(&engine, text));
            crate::sys::wake::notify();
        })
        .map_err(|err| format!("cannot run the task: {err}"))?;
    Ok(rx)
}

fn run(engine: &Arc<Engine>, text: String) -> Ended {
    let message = Message {
        message_id: "task".into(),
        role: Role::User,
        parts: vec![Part::text(text)],
        context_id: None,
        task_id: None,
        metadata: None,
    };
    let feed = match engine.submit("operator", None, message, true) {
        Ok(taken) => taken.feed,
        Err(refused) => return (State::Failed, refused.to_string()),
    };
    let Some(feed) = feed else {
        return (State::Failed, "the task has no stream".into());
    };
    let mut out = std::io::stdout().lock();
    // Whether the last thing printed ended a line: the answer is closed with a newline if not.
    let mut open_line = false;
    let mut ended = (State::Failed, "the task was lost".to_string());
    loop {
        match feed.next(WAIT) {
            Next::Event(Event::Artifact { parts, .. }) => {
                for part in parts {
                    if let Content::Text(text) = part.content
                        && !text.is_empty()
                    {
                        open_line = !text.ends_with('\n');
                        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
                    }
                }
            }
            Next::Event(Event::Status {
                state,
                message,
                settled: true,
                ..
            }) => {
                ended = (state, message.map(|m| m.text()).unwrap_or_default());
            }
            Next::Event(_) | Next::Idle => {}
            Next::End => break,
        }
    }
    if open_line {
        let _ = writeln!(out).and_then(|()| out.flush());
    }
    ended
}

/// Say on stderr why a task that did not complete ended so; whether it completed.
pub fn report((state, text): &Ended) -> bool {
    match state {
        State::Completed => return true,
        State::InputRequired => crate::cli::warn(
            "run",
            &format!("the task asks for input, which --task cannot give: {text}"),
        ),
        _ => crate::cli::warn("run", &format!("the task failed: {text}")),
    }
    false
}
