//! `mur run --task`: one task, its answer streamed to stdout as the handler writes it — each
//! chunk written and flushed as it arrives, so `mur run cap --task x | while read line` sees
//! progress — and the session's exit code from how it ended.

use std::io::Write;
use std::sync::Arc;
use std::sync::mpsc::Receiver;

use super::tasks::Engine;
use crate::a2a::message::{Content, Message};
use crate::a2a::stream::Event;
use crate::a2a::task::State;

/// How the task ended: its state, and the status message's text (why it failed, or the
/// question it asks).
pub type TaskEnd = (State, String);

/// Run `text` as a task on a thread of its own, printing its answer as it streams; how it ended
/// arrives on the receiver, and wakes the session.
pub fn start(engine: &Arc<Engine>, text: String) -> Result<Receiver<TaskEnd>, String> {
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

fn run(engine: &Arc<Engine>, text: String) -> TaskEnd {
    let taken = match engine.submit("operator", None, Message::user_text(&text), true) {
        Ok(taken) => taken,
        Err(refused) => return (State::Failed, refused.to_string()),
    };
    let Some(feed) = taken.feed else {
        return (State::Failed, "the task has no stream".into());
    };
    let mut out = Printer::default();
    let mut ended = None;
    while let Some(happened) = feed.next() {
        match &*happened {
            Event::Artifact { parts, .. } => {
                for part in parts {
                    if let Content::Text(text) = &part.content {
                        out.print(text);
                    }
                }
            }
            Event::Status {
                state,
                message,
                settled: true,
                ..
            } => {
                ended = Some((
                    *state,
                    message.as_ref().map(|m| m.text()).unwrap_or_default(),
                ))
            }
            _ => {}
        }
    }
    // A feed cut before the task settled (its reader — a slow stdout — fell a MiB behind) does
    // not end the task: how it ends comes from its claim, and the answer's text not yet printed
    // from the task.
    let ended = ended.unwrap_or_else(|| {
        let task = taken.settled.wait();
        let answer = match task.answer.first().map(|p| &p.content) {
            Some(Content::Text(answer)) => answer.as_str(),
            _ => "",
        };
        if let Some(rest) = answer.get(out.printed..) {
            out.print(rest);
        }
        let text = match task.state {
            State::Completed | State::InputRequired => answer.to_string(),
            _ => task.note.clone().unwrap_or_default(),
        };
        (task.state, text)
    });
    if out.open_line {
        out.print("\n");
    }
    // Whoever runs `--task` is the session's operator: a failure's stderr is theirs to read,
    // here as in `mur logs`, though never in the answer a door's caller gets.
    let (state, mut text) = ended;
    if state == State::Failed {
        for line in super::log::task_lines(taken.id.as_str(), STDERR_TAIL) {
            text.push_str("\n  ");
            text.push_str(&line);
        }
    }
    (state, text)
}

/// How much of the log's end a failed one-shot task's stderr is looked for in.
const STDERR_TAIL: u64 = 8 * 1024;

/// The answer's text on stdout, each piece flushed as it comes.
#[derive(Default)]
struct Printer {
    /// How many bytes of it are printed.
    printed: usize,
    /// Whether they end mid-line (the answer is closed with a newline if so).
    open_line: bool,
}

impl Printer {
    fn print(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.printed += text.len();
        self.open_line = !text.ends_with('\n');
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    }
}

/// Say on stderr why a task that did not complete ended so; whether it completed.
pub fn report((state, text): &TaskEnd) -> bool {
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
