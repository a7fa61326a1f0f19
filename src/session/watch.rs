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
//! nothing: a watch sees each task live when it begins (with the text it had streamed by then),
//! and every task that starts after it — however briefly it lives.
//!
//! The engine tells every watcher each task's start, its events and its end
//! ([`Engine::observe`]): a watch is a reader of that feed, never a poller of the engine. A
//! watcher that falls behind — more than the feed's buffer not yet read — is cut: it loses the
//! stream, never the door or a task. A frame is made only when the reader can take it
//! ([`Watch::poll_frame`]), so what waits is bounded by that buffer.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Poll, Waker};

use serde_json::{Value, json};

use super::feed::Sight;
use super::tasks::{Engine, Sightings};
use crate::a2a::card::STREAM_EXTENSION_URI;
use crate::a2a::message::{Content, Part};
use crate::a2a::stream::{Event, Heartbeat};
use crate::a2a::task::{State, status_json};
use crate::a2a::version::Generation;
use crate::net::server::BodyStream;

/// One observer's stream.
pub struct Watch {
    feed: Arc<Sightings>,
    stopping: Arc<AtomicBool>,
    session_id: String,
    /// The JSON-RPC request's id, answered by every frame.
    id: Value,
    acked: bool,
    closed: bool,
    /// Frames made and not yet written: a task event's SSE id and its `result`. At most the
    /// frames of one sighting.
    pending: VecDeque<(Option<u64>, Value)>,
    /// The last SSE id given; carriers (ack, capsule-closed) take none.
    last_id: u64,
    /// Carrier messages written, for their message ids.
    carriers: u64,
    heartbeat: Heartbeat,
}

impl Watch {
    pub fn new(
        engine: Arc<Engine>,
        stopping: Arc<AtomicBool>,
        session_id: String,
        id: Value,
    ) -> Self {
        Self {
            feed: engine.observe(),
            stopping,
            session_id,
            id,
            acked: false,
            closed: false,
            pending: VecDeque::new(),
            last_id: 0,
            carriers: 0,
            heartbeat: Heartbeat::default(),
        }
    }

    /// Queue one task event's `result`, numbered.
    fn push(&mut self, result: Value) {
        self.last_id += 1;
        self.pending.push_back((Some(self.last_id), result));
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
        self.pending.push_back((None, result));
    }

    fn session_hex(&self) -> &str {
        self.session_id
            .strip_prefix("ses_")
            .unwrap_or(&self.session_id)
    }

    /// The frames one sighting makes: a task's start, its text as it streams, and at its end
    /// the answer and the final state.
    fn sighted(&mut self, sight: &Sight) {
        let task = Followed {
            id: &sight.task_id,
            context: &sight.context_id,
        };
        let Some(event) = &sight.event else {
            let now = crate::time::unix_now();
            self.push(task.status(State::Working, None, now, None));
            return;
        };
        let streamed = |parts: &[Part]| Some(text_of(parts)).filter(|t| !t.is_empty());
        match &**event {
            Event::Artifact { parts, .. } => {
                if let Some(text) = streamed(parts) {
                    self.push(task.text(&text));
                }
            }
            // The task as it stood when the watch began: what it streamed before then, so a
            // watch that found it late misses none of its text.
            Event::Task(found) if found.state == State::Working => {
                if let Some(text) = streamed(&found.answer) {
                    self.push(task.text(&text));
                }
            }
            Event::Status {
                state,
                message,
                timestamp,
                ..
            } if state.is_final() => {
                if let (State::Completed, Some(answer)) = (state, &sight.answer) {
                    self.push(task.response(answer));
                }
                self.push(task.status(*state, message.as_ref(), *timestamp, None));
            }
            _ => {}
        }
    }

    /// The next SSE bytes of the stream: a frame, or a `: keep-alive` comment when
    /// the stream has been silent for long ([`Heartbeat`]); `Ready(None)` when the stream is over
    /// (the session closed, or this watcher fell behind and was cut); `Pending` with `waker`
    /// stored in the engine's feed of this watcher, fired when a sighting arrives or the feed
    /// ends. Never sleeps; a heartbeat is seen by the poll its stream gets at least every
    /// [`crate::net::server::STREAM_TICK`].
    pub fn poll_frame(&mut self, waker: &Waker) -> Poll<Option<Vec<u8>>> {
        loop {
            if let Some((event_id, result)) = self.pending.pop_front() {
                self.heartbeat.wrote();
                let answer = json!({"jsonrpc": "2.0", "id": self.id, "result": result});
                let id_line = event_id.map(|n| format!("id: {n}\n")).unwrap_or_default();
                return Poll::Ready(Some(format!("{id_line}data: {answer}\n\n").into_bytes()));
            }
            if self.closed {
                return Poll::Ready(None);
            }
            if !self.acked {
                self.acked = true;
                self.carry(json!({"frame": "connection-ack", "role": "observer",
                                  "conversationMode": "stateless"}));
                continue;
            }
            match self.feed.poll_next(waker) {
                Poll::Ready(Some(sight)) => self.sighted(&sight),
                // Cut: this watcher fell too far behind. It loses the stream, nothing else.
                Poll::Ready(None) if self.feed.lost() => return Poll::Ready(None),
                Poll::Ready(None) => self.close(),
                Poll::Pending if self.stopping.load(Ordering::Acquire) => self.close(),
                Poll::Pending => {
                    return match self.heartbeat.due() {
                        Some(beat) => Poll::Ready(Some(beat)),
                        None => Poll::Pending,
                    };
                }
            }
        }
    }

    /// The session is going: `capsule-closed`, then the end.
    fn close(&mut self) {
        self.closed = true;
        self.carry(json!({"frame": "capsule-closed"}));
    }
}

/// A task a watch follows: what its events name.
struct Followed<'a> {
    id: &'a str,
    context: &'a str,
}

impl Followed<'_> {
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

    /// A `text` frame of `text`.
    fn text(&self, text: &str) -> Value {
        let frame = json!({"frame": "text", "text": text, "final": false});
        let now = crate::time::unix_now();
        self.status(State::Working, None, now, Some(frame))
    }

    /// The `response` artifact the original's `mur watch` prints under a completed task.
    fn response(&self, answer: &str) -> Value {
        json!({"artifactUpdate": {
            "taskId": self.id,
            "contextId": self.context,
            "lastChunk": true,
            "artifact": {
                "artifactId": "response",
                "name": "response",
                "parts": [{"text": answer, "mediaType": "text/plain"}],
            },
        }})
    }
}

/// The text parts of `parts`, joined.
pub(super) fn text_of(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| match &p.content {
            Content::Text(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The door's server polls the watch itself: again when its waker fires, and every
/// `STREAM_TICK` (when a heartbeat may be due).
impl BodyStream for Watch {
    fn poll_next(&mut self, waker: &Waker) -> Poll<Option<Vec<u8>>> {
        self.poll_frame(waker)
    }
}

impl Drop for Watch {
    /// The observer has gone: the engine stops feeding it at once.
    fn drop(&mut self) {
        self.feed.close();
    }
}
