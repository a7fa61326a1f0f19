//! What a stream (`message/stream`, `SendStreamingMessage`, and resubscribing) carries, and how
//! each generation spells it.
//!
//! A stream is: the task as it stands, its status as it changes, one artifact update per chunk
//! of the answer as the handler writes it (appended; the last marked `lastChunk`), then the
//! settled status — after which the stream ends. 0.3 names each event by `kind` and marks the
//! last status `final: true`; 1.0 wraps each in a `StreamResponse` member (`task`,
//! `statusUpdate`, `artifactUpdate`) and simply ends.

use serde_json::{Value, json};

use super::message::{Content, Message, Part};
use super::task::{State, Task, View, answer_json, status_json};
use super::version::Generation;

/// One event of a task's stream.
#[derive(Debug, Clone)]
pub enum Event {
    /// The task as it stands when the stream starts.
    Task(Task),
    /// The status changed; `settled` is the last event of the stream.
    Status {
        state: State,
        message: Option<Message>,
        timestamp: i64,
        settled: bool,
    },
    /// A piece of the answer artifact.
    Artifact {
        parts: Vec<Part>,
        /// Appends to what came before (every chunk but the first).
        append: bool,
        last: bool,
    },
}

impl Event {
    /// What the event costs a reader's buffer, roughly: its text, plus a constant for the rest.
    pub fn weight(&self) -> usize {
        let parts = match self {
            Event::Artifact { parts, .. } => parts.as_slice(),
            Event::Status {
                message: Some(m), ..
            } => m.parts.as_slice(),
            _ => &[],
        };
        256 + parts
            .iter()
            .map(|p| match &p.content {
                Content::Text(t) => t.len(),
                Content::Raw(r) => r.len(),
                Content::Url(u) => u.len(),
                Content::Data(d) => d.len(),
            })
            .sum::<usize>()
    }

    /// The JSON-RPC `result` this event is, for task `task_id` in context `context_id`.
    pub fn render(&self, task_id: &str, context_id: &str, generation: Generation) -> Value {
        let v1 = generation == Generation::V1_0;
        match self {
            Event::Task(task) => {
                let task = task.render(generation, View::FULL);
                if v1 { json!({"task": task}) } else { task }
            }
            Event::Status {
                state,
                message,
                timestamp,
                settled,
            } => {
                let status = status_json(*state, message.as_ref(), *timestamp, generation);
                let update = json!({"taskId": task_id, "contextId": context_id, "status": status});
                if v1 {
                    json!({"statusUpdate": update})
                } else {
                    let mut update = update;
                    update["kind"] = json!("status-update");
                    update["final"] = json!(settled);
                    update
                }
            }
            Event::Artifact {
                parts,
                append,
                last,
            } => {
                let artifact = answer_json(task_id, parts, generation);
                let update = json!({
                    "taskId": task_id,
                    "contextId": context_id,
                    "artifact": artifact,
                    "append": append,
                    "lastChunk": last,
                });
                if v1 {
                    json!({"artifactUpdate": update})
                } else {
                    let mut update = update;
                    update["kind"] = json!("artifact-update");
                    update
                }
            }
        }
    }

    /// Whether the stream ends after this event.
    pub fn ends(&self) -> bool {
        matches!(self, Event::Status { settled: true, .. })
    }
}

/// Cuts a handler's stdout into text chunks as it arrives: stdout exactly as written (newlines
/// included, so a line-by-line reader sees each line at once), except that a character split
/// between two reads waits for its other half.
#[derive(Debug, Default)]
pub struct Chunker {
    held: Vec<u8>,
}

impl Chunker {
    /// The text `bytes` adds, if any is ready.
    pub fn push(&mut self, bytes: &[u8]) -> Option<String> {
        self.held.extend_from_slice(bytes);
        // Up to a character cut short at the end (it starts in the last three bytes, and is
        // the start of a sequence, not yet all of it); a byte that can never be UTF-8 is let
        // through (lossily), as the kept answer does.
        let len = self.held.len();
        let ready = (len.saturating_sub(3)..len)
            .find(|&at| {
                std::str::from_utf8(&self.held[at..])
                    .is_err_and(|e| e.valid_up_to() == 0 && e.error_len().is_none())
            })
            .unwrap_or(len);
        if ready == 0 {
            return None;
        }
        let text = String::from_utf8_lossy(&self.held[..ready]).into_owned();
        self.held.drain(..ready);
        Some(text)
    }
}

/// One reader's view of a task's answer as it streams: the handler's stdout so far less one
/// trailing newline — the same text a read of the task shows, working or ended ([`Task::render`]).
///
/// The stored answer drops one trailing newline from stdout; a stream sending stdout exactly
/// would leave a client that assembles the chunks holding one byte more than `GetTask` returns.
/// So a chunk's own trailing newline is held back and sent at the start of the next chunk, and
/// the one still held when the artifact closes (`lastChunk`) is never sent. Invariant: the text
/// of every chunk a reader got, concatenated, equals the answer's text part as stored.
/// (`mur run --task` prints from the engine's events directly, not through this.)
#[derive(Debug, Default)]
pub struct Trail {
    /// A newline taken off the end of what this reader was sent.
    held: bool,
    /// Chunks pass as written ([`Trail::exact`]).
    exact: bool,
}

impl Trail {
    /// A trail that leaves chunks as stdout wrote them: for a formation peer's call, which
    /// relays one handler's stdout into another's as a pipe would — a line must arrive the
    /// moment it is written, not when the next one does — and strips the trailing newline
    /// itself once the answer is whole.
    pub fn exact() -> Self {
        Self {
            held: false,
            exact: true,
        }
    }

    /// `event` as this reader is to see it.
    pub fn shape(&mut self, event: Event) -> Event {
        if self.exact {
            return event;
        }
        match event {
            // A working task's answer so far is shown less its trailing newline: held.
            Event::Task(task) => {
                self.held = task.state == State::Working
                    && matches!(task.answer.first(), Some(Part { content: Content::Text(t), .. }) if t.ends_with('\n'));
                Event::Task(task)
            }
            Event::Artifact {
                mut parts,
                append,
                last,
            } => {
                let held = std::mem::take(&mut self.held);
                if let Some(Part {
                    content: Content::Text(text),
                    ..
                }) = parts.first_mut()
                    && !last
                {
                    if held {
                        text.insert(0, '\n');
                    }
                    if text.ends_with('\n') {
                        text.pop();
                        self.held = true;
                    }
                }
                Event::Artifact {
                    parts,
                    append,
                    last,
                }
            }
            status => status,
        }
    }
}

/// When an event stream last said something, and the comment that keeps it alive once it has
/// been silent for 15 s (proxies and clients close a connection quiet for long): one rule for
/// every stream the door writes.
pub struct Heartbeat(std::time::Instant);

impl Default for Heartbeat {
    fn default() -> Self {
        Self(std::time::Instant::now())
    }
}

impl Heartbeat {
    const EVERY: std::time::Duration = std::time::Duration::from_secs(15);

    /// Something was written now.
    pub fn wrote(&mut self) {
        self.0 = std::time::Instant::now();
    }

    /// The keep-alive comment, if it is due (counted as written).
    pub fn due(&mut self) -> Option<Vec<u8>> {
        (self.0.elapsed() >= Self::EVERY).then(|| {
            self.wrote();
            b": keep-alive\n\n".to_vec()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_stdout_as_written_never_splitting_a_character() {
        let mut chunker = Chunker::default();
        let pieces = [&b"hel"[..], b"lo\n", b"\xc3", b"\xa9t\n"];
        let got: Vec<Option<String>> = pieces.iter().map(|p| chunker.push(p)).collect();
        let want = [Some("hel"), Some("lo\n"), None, Some("\u{e9}t\n")];
        assert_eq!(got, want.map(|w| w.map(String::from)));
        // A byte that is never UTF-8, then half a character: the half still waits.
        assert_eq!(chunker.push(b"\xff\xc3").as_deref(), Some("\u{fffd}"));
        assert_eq!(chunker.push(b"\xa9").as_deref(), Some("\u{e9}"));
    }

    /// The text of the chunks a reader is sent, events `(text, last)` shaped in turn.
    fn assembled(trail: &mut Trail, chunks: &[(&str, bool)]) -> String {
        chunks
            .iter()
            .map(|&(text, last)| {
                let event = trail.shape(Event::Artifact {
                    parts: vec![Part::text(text)],
                    append: true,
                    last,
                });
                match event {
                    Event::Artifact { parts, .. } => match &parts[0].content {
                        Content::Text(t) => t.clone(),
                        _ => unreachable!(),
                    },
                    _ => unreachable!(),
                }
            })
            .collect()
    }

    #[test]
    fn a_trailing_newline_waits_for_more_output_and_the_last_one_is_never_sent() {
        let mut trail = Trail::default();
        let chunks = [
            ("3\n", false),
            ("2\n", false),
            ("\n", false),
            ("liftoff\n", false),
            ("", true),
        ];
        assert_eq!(assembled(&mut trail, &chunks), "3\n2\n\nliftoff");
        // Each chunk as sent: the newline travels with the next one.
        let mut trail = Trail::default();
        assert_eq!(assembled(&mut trail, &[("a\n", false)]), "a");
        assert_eq!(assembled(&mut trail, &[("b", false)]), "\nb");
        assert_eq!(assembled(&mut trail, &[("", true)]), "");
        // A reader joining mid-way was shown the answer so far less its newline: held.
        let mut trail = Trail::default();
        let mut task = crate::a2a::task::tests::task(State::Working);
        task.answer = vec![Part::text("first\n")];
        trail.shape(Event::Task(task));
        assert_eq!(
            assembled(&mut trail, &[("second\n", false), ("", true)]),
            "\nsecond"
        );
    }

    #[test]
    fn each_generation_spells_the_events_its_way() {
        let chunk = Event::Artifact {
            parts: vec![Part::text("hi")],
            append: true,
            last: false,
        };
        let old = chunk.render("tsk_1", "ctx", Generation::V0_3);
        assert_eq!(old["kind"], "artifact-update");
        assert_eq!(
            old["artifact"]["parts"][0],
            json!({"kind": "text", "text": "hi"})
        );
        let new = chunk.render("tsk_1", "ctx", Generation::V1_0);
        assert_eq!(new["artifactUpdate"]["append"], true);
        assert_eq!(
            new["artifactUpdate"]["artifact"]["parts"][0],
            json!({"text": "hi"})
        );
        let done = Event::Status {
            state: State::Completed,
            message: None,
            timestamp: 0,
            settled: true,
        };
        assert!(done.ends());
        assert_eq!(done.render("t", "c", Generation::V0_3)["final"], true);
        let new = done.render("t", "c", Generation::V1_0);
        assert_eq!(
            new["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        assert!(new["statusUpdate"].get("final").is_none());
    }
}
