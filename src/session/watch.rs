//! `murmur.WatchSession`: the session's events for an observer, in the original runtime's shapes
//! (A2A 1.0 `StreamResponse`s, so its `mur watch` reads mur's door and mur's reads its):
//!
//! - a `connection-ack` frame (role `observer`, `conversationMode` `stateless`) first, carried by
//!   an agent `message`, the frame under `metadata[STREAM_EXTENSION_URI]`;
//! - for each task: a `statusUpdate` TASK_STATE_WORKING when it is found, its streamed text as
//!   `text` frames (`final: false`) on `statusUpdate`s TASK_STATE_WORKING, and at its end the
//!   `response` `artifactUpdate` (a completed task's answer) and the terminal `statusUpdate`;
//! - `capsule-closed`, carried as the ack is, when the session goes.
//!
//! Task events carry SSE `id:`s, ascending within the connection (ack and `capsule-closed` none,
//! as in the original). mur keeps no session-wide event buffer, so `Last-Event-ID` replays
//! nothing: a watch sees a task's text from the moment it finds the task (the text the task had
//! streamed before then included).
//!
//! A watch reads the engine from outside: it looks for live tasks every `TICK` and follows each
//! through a feed of its own (the same feed `tasks/resubscribe` reads), so the engine knows
//! nothing of observers. A watcher that falls behind — more than `MAX_PENDING` bytes of frames
//! not yet written, or a task feed the engine cut — is cut itself: it loses the stream, never
//! the door or a task.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::feed::{Feed, Next};
use super::tasks::Engine;
use crate::a2a::card::STREAM_EXTENSION_URI;
use crate::a2a::message::{Content, Part};
use crate::a2a::stream::Event;
use crate::a2a::task::{State, status_json};
use crate::a2a::version::Generation;
use crate::net::server::BodyStream;

/// How often a watch looks for new tasks and new events.
#[allow(dead_code)] // TEMPORARY: until the engine's poll_frame
const TICK: Duration = Duration::from_millis(25);
/// How long a watch may be silent before a comment line keeps it alive.
const HEARTBEAT: Duration = Duration::from_secs(15);
/// The most frame bytes a watch holds for a reader that has not taken them.
const MAX_PENDING: usize = 1 << 20;

/// One observer's stream.
pub struct Watch {
    engine: Arc<Engine>,
    stopping: Arc<AtomicBool>,
    session_id: String,
    /// The JSON-RPC request's id, answered by every frame.
    id: Value,
    acked: bool,
    closed: bool,
    /// A task feed was cut before its task ended: this watcher fell behind.
    cut: bool,
    seen: HashSet<String>,
    ended: HashSet<String>,
    feeds: Vec<(Followed, Arc<Feed>)>,
    /// Frames not yet written: a task event's SSE id and its `result`.
    pending: VecDeque<(Option<u64>, Value)>,
    pending_bytes: usize,
    /// The last SSE id given; carriers (ack, capsule-closed) take none.
    last_id: u64,
    /// Carrier messages written, for their message ids.
    carriers: u64,
    written: Instant,
}

impl Watch {
    pub fn new(
        engine: Arc<Engine>,
        stopping: Arc<AtomicBool>,
        session_id: String,
        id: Value,
    ) -> Self {
        Self {
            engine,
            stopping,
            session_id,
            id,
            acked: false,
            closed: false,
            cut: false,
            seen: HashSet::new(),
            ended: HashSet::new(),
            feeds: Vec::new(),
            pending: VecDeque::new(),
            pending_bytes: 0,
            last_id: 0,
            carriers: 0,
            written: Instant::now(),
        }
    }

    /// Queue one task event's `result`, numbered.
    fn push(&mut self, result: Value) {
        self.last_id += 1;
        self.queue(Some(self.last_id), result);
    }

    fn queue(&mut self, id: Option<u64>, result: Value) {
        self.pending_bytes += result.to_string().len();
        self.pending.push_back((id, result));
    }

    /// Queue a frame that belongs to no task, as the original carries it: an agent message whose
    /// one text part names the frame.
    fn carry(&mut self, frame: Value) {
        self.carriers += 1;
        let message_id = format!("msg_{}_w{}", self.session_hex(), self.carriers);
        let name = frame["frame"].clone();
        let result = json!({"message": {
            "messageId": message_id,
            "role": "ROLE_AGENT",
            "parts": [{"text": name, "mediaType": "text/plain"}],
            "metadata": {STREAM_EXTENSION_URI: frame},
        }});
        self.queue(None, result);
    }

    fn session_hex(&self) -> &str {
        self.session_id
            .strip_prefix("ses_")
            .unwrap_or(&self.session_id)
    }

    /// Follow the tasks that went live since the last look.
    fn discover(&mut self) {
        for id in self.engine.live() {
            if !self.seen.insert(id.clone()) {
                continue;
            }
            let context = self
                .engine
                .get(&id, None)
                .map(|task| task.context_id)
                .unwrap_or_default();
            let task = Followed { id, context };
            self.push(task.status(State::Working, None, crate::time::unix_now(), None));
            if let Ok(feed) = self.engine.subscribe(&task.id, None) {
                self.feeds.push((task, feed));
            }
        }
    }

    /// Turn what the followed tasks' feeds hold now into events; a feed that ended is dropped.
    fn drain(&mut self) {
        let mut results = vec![];
        let (engine, ended, cut) = (&self.engine, &mut self.ended, &mut self.cut);
        self.feeds.retain(|(task, feed)| {
            loop {
                match feed.next(Duration::ZERO) {
                    Next::Event(event) => {
                        if matches!(&*event, Event::Status { state, .. } if state.is_final()) {
                            ended.insert(task.id.clone());
                        }
                        results.extend(task.events(&event, engine));
                    }
                    Next::Idle => return true,
                    Next::End => {
                        *cut |= !ended.contains(&task.id);
                        return false;
                    }
                }
            }
        });
        for result in results {
            self.push(result);
        }
    }
}

/// A task a watch follows: what its events name.
struct Followed {
    id: String,
    context: String,
}

impl Followed {
    /// The events one task event makes: its text as it streams, and at its end the answer and
    /// the final state.
    fn events(&self, event: &Event, engine: &Engine) -> Vec<Value> {
        match event {
            Event::Artifact { parts, .. } => self.text(parts).into_iter().collect(),
            // The task as it stood when the watch found it: what it streamed before then, so a
            // watch that found it late misses none of its text.
            Event::Task(task) if task.state == State::Working => {
                self.text(&task.answer).into_iter().collect()
            }
            Event::Status {
                state,
                message,
                timestamp,
                ..
            } if state.is_final() => {
                let mut events = vec![];
                let answer = engine.get(&self.id, None).map(|t| t.answer);
                if let (State::Completed, Ok(answer)) = (state, answer) {
                    events.push(self.response(&answer));
                }
                events.push(self.status(*state, message.as_ref(), *timestamp, None));
                events
            }
            _ => vec![],
        }
    }

    /// A `statusUpdate` of this task, carrying `frame` in its metadata when given.
    fn status(
        &self,
        state: State,
        message: Option<&crate::a2a::message::Message>,
        timestamp: i64,
        frame: Option<Value>,
    ) -> Value {
        let mut update = json!({
            "taskId": self.id,
            "contextId": self.context,
            "status": status_json(state, message, timestamp, Generation::V1_0),
        });
        if let Some(frame) = frame {
            update["metadata"] = json!({ STREAM_EXTENSION_URI: frame });
        }
        json!({ "statusUpdate": update })
    }

    /// A `text` frame of what `parts` say, if they say anything.
    fn text(&self, parts: &[Part]) -> Option<Value> {
        let text = text_of(parts);
        let frame = json!({"frame": "text", "text": text, "final": false});
        let now = crate::time::unix_now();
        (!text.is_empty()).then(|| self.status(State::Working, None, now, Some(frame)))
    }

    /// The `response` artifact the original's `mur watch` prints under a completed task.
    fn response(&self, answer: &[Part]) -> Value {
        json!({"artifactUpdate": {
            "taskId": self.id,
            "contextId": self.context,
            "lastChunk": true,
            "artifact": {
                "artifactId": "response",
                "name": "response",
                "parts": [{"text": text_of(answer), "mediaType": "text/plain"}],
            },
        }})
    }
}

/// The text parts of `parts`, joined.
fn text_of(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| match &p.content {
            Content::Text(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

impl BodyStream for Watch {
    fn poll_next(&mut self, _waker: &std::task::Waker) -> std::task::Poll<Option<Vec<u8>>> {
        std::task::Poll::Ready(loop {
            if self.cut || self.pending_bytes > MAX_PENDING {
                break None;
            }
            if let Some((event_id, result)) = self.pending.pop_front() {
                self.pending_bytes = self.pending_bytes.saturating_sub(result.to_string().len());
                self.written = Instant::now();
                let answer = json!({"jsonrpc": "2.0", "id": self.id, "result": result});
                let id_line = event_id.map(|n| format!("id: {n}\n")).unwrap_or_default();
                break Some(format!("{id_line}data: {answer}\n\n").into_bytes());
            }
            if self.closed {
                break None;
            }
            if !self.acked {
                self.acked = true;
                self.carry(json!({"frame": "connection-ack", "role": "observer",
                                  "conversationMode": "stateless"}));
                continue;
            }
            let stopping = self.stopping.load(Ordering::Acquire);
            self.discover();
            self.drain();
            if stopping {
                self.closed = true;
                self.carry(json!({"frame": "capsule-closed"}));
                continue;
            }
            if self.pending.is_empty() {
                if self.written.elapsed() >= HEARTBEAT {
                    self.written = Instant::now();
                    break Some(b": keep-alive\n\n".to_vec());
                }
                // TEMPORARY until the engine's `Watch::poll_frame`: the server polls again
                // within its STREAM_TICK.
                return std::task::Poll::Pending;
            }
        })
    }
}

impl Drop for Watch {
    /// The observer has gone: the engine stops feeding its task feeds at once.
    fn drop(&mut self) {
        for (_, feed) in &self.feeds {
            feed.close();
        }
    }
}
