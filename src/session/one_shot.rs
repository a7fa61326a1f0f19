//! `mur run --task`: one task, its answer streamed to stdout as the handler writes it — each
//! chunk written and flushed as it arrives, so `mur run cap --task x | while read line` sees
//! progress — and the session's exit code from how it ended. The answer's files go to `--out
//! DIR` or are named on stderr (`one_shot/files.rs`). With `--json`, nothing is streamed: stdout is one
//! JSON object once the task has ended, and nothing else.

mod files;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::Receiver;

use serde_json::json;

use super::tasks::Engine;
use crate::a2a::message::{Content, Message};
use crate::a2a::stream::Event;
use crate::a2a::task::State;

/// How the task ended: its state, and the status message's text (why it failed, or the
/// question it asks).
pub type TaskEnd = (State, String);

/// What `--task` writes where.
#[derive(Debug, Clone, Default)]
pub struct Output {
    /// `--json`: one object on stdout at the end, instead of the text as it streams.
    pub json: bool,
    /// `--out DIR`: where the answer's files are written.
    pub out: Option<PathBuf>,
}

/// Run `text` as a task on a thread of its own, printing its answer as it streams; how it ended
/// arrives on the receiver, and wakes the session.
pub fn start(
    engine: &Arc<Engine>,
    text: String,
    output: Output,
) -> Result<Receiver<TaskEnd>, String> {
    let engine = engine.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("one-shot".into())
        .spawn(move || {
            let _ = tx.send(run(&engine, text, &output));
            crate::sys::wake::notify();
        })
        .map_err(|err| format!("cannot run the task: {err}"))?;
    Ok(rx)
}

fn run(engine: &Arc<Engine>, text: String, output: &Output) -> TaskEnd {
    let taken = match engine.submit("operator", None, Message::user_text(&text), true, None) {
        Ok(taken) => taken,
        Err(refused) => return (State::Failed, refused.to_string()),
    };
    let Some(feed) = taken.feed else {
        return (State::Failed, "the task has no stream".into());
    };
    let mut out = Printer {
        quiet: output.json,
        ..Printer::default()
    };
    while let Some(happened) = feed.next() {
        if let Event::Artifact { parts, .. } = &*happened {
            for part in parts {
                if let Content::Text(text) = &part.content {
                    out.print(text);
                }
            }
        }
    }
    // How it ended comes from its claim, and with it the answer's text not yet printed: the
    // whole of it with --json, or what a feed cut before the task settled (its reader — a slow
    // stdout — fell a MiB behind) did not carry.
    let task = taken.settled.wait();
    let answer = match task.answer.first().map(|p| &p.content) {
        Some(Content::Text(answer)) => answer.as_str(),
        _ => "",
    };
    if let Some(rest) = answer.get(out.printed..) {
        out.print(rest);
    }
    if out.open_line {
        out.print("\n");
    }
    let mut text = match task.state {
        State::Completed | State::InputRequired => answer.to_string(),
        _ => task.note.clone().unwrap_or_default(),
    };
    // Whoever runs `--task` is the session's operator: a failure's stderr is theirs to read,
    // here as in `mur logs`, though never in the answer a door's caller gets.
    if task.state == State::Failed {
        for line in super::log::task_lines(taken.id.as_str(), STDERR_TAIL) {
            text.push_str("\n  ");
            text.push_str(&line);
        }
    }
    let files = files::deliver(&task.answer, output.out.as_deref());
    if output.json {
        let said = json!({
            "task_id": taken.id.as_str(),
            "state": task.state.wire(crate::a2a::version::Generation::V0_3),
            "answer": answer,
            "reason": (task.state != State::Completed).then_some(&text),
            "files": files.iter().map(files::File::json).collect::<Vec<_>>(),
        });
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{said}").and_then(|()| stdout.flush());
    }
    (task.state, text)
}

/// How much of the log's end a failed one-shot task's stderr is looked for in.
const STDERR_TAIL: u64 = 8 * 1024;

/// The answer's text on stdout, each piece flushed as it comes (none of it when `quiet`).
#[derive(Default)]
struct Printer {
    quiet: bool,
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
        if self.quiet {
            return;
        }
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
