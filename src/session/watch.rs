//! `murmur.WatchSession`: the session's events for an observer, as the original runtime's
//! observers read them — a `connection-ack` with role `observer` first, then each task's start,
//! its streamed text and its end, and `capsule-closed` when the session goes.
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
use crate::a2a::message::{Content, Part};
use crate::a2a::stream::Event;
use crate::a2a::task::State;
use crate::a2a::version::Generation;
use crate::net::server::BodyStream;

/// How often a watch looks for new tasks and new events.
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
    feeds: Vec<(String, Arc<Feed>)>,
    pending: VecDeque<Value>,
    pending_bytes: usize,
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
            written: Instant::now(),
        }
    }

    fn push(&mut self, frame: Value) {
        self.pending_bytes += frame.to_string().len();
        self.pending.push_back(frame);
    }

    /// Follow the tasks that went live since the last look.
    fn discover(&mut self) {
        for id in self.engine.live() {
            if !self.seen.insert(id.clone()) {
                continue;
            }
            self.push(json!({"type": "task-started", "task_id": id}));
            if let Ok(feed) = self.engine.subscribe(&id, None) {
                self.feeds.push((id, feed));
            }
        }
    }

    /// Turn what the followed tasks' feeds hold now into frames; a feed that ended is dropped.
    fn drain(&mut self) {
        let mut frames = vec![];
        let (ended, cut) = (&mut self.ended, &mut self.cut);
        self.feeds.retain(|(id, feed)| {
            loop {
                match feed.next(Duration::ZERO) {
                    Next::Event(event) => {
                        let made = frame(id, &event);
                        if made.as_ref().is_some_and(|f| f["type"] == "task-ended") {
                            ended.insert(id.clone());
                        }
                        frames.extend(made);
                    }
                    Next::Idle => return true,
                    Next::End => {
                        *cut |= !ended.contains(id);
                        return false;
                    }
                }
            }
        });
        for frame in frames {
            self.push(frame);
        }
    }
}

/// The frame one task event makes, if any: its text as it streams, and its end.
fn frame(task_id: &str, event: &Event) -> Option<Value> {
    let text = |parts: &[Part]| {
        let text: String = parts
            .iter()
            .filter_map(|p| match &p.content {
                Content::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        (!text.is_empty()).then(|| json!({"type": "text", "task_id": task_id, "text": text}))
    };
    match event {
        Event::Artifact { parts, .. } => text(parts),
        // The task as it stood when the watch found it: what it streamed before then, so a
        // watch that found it late misses none of its text.
        Event::Task(task) if task.state == State::Working => text(&task.answer),
        Event::Status { state, .. } if state.is_final() => Some(json!({
            "type": "task-ended", "task_id": task_id, "state": state.wire(Generation::V0_3)
        })),
        _ => None,
    }
}

impl BodyStream for Watch {
    fn next(&mut self) -> Option<Vec<u8>> {
        loop {
            if self.cut || self.pending_bytes > MAX_PENDING {
                return None;
            }
            if let Some(frame) = self.pending.pop_front() {
                self.pending_bytes = self.pending_bytes.saturating_sub(frame.to_string().len());
                self.written = Instant::now();
                let answer = json!({"jsonrpc": "2.0", "id": self.id, "result": frame});
                return Some(format!("data: {answer}\n\n").into_bytes());
            }
            if self.closed {
                return None;
            }
            if !self.acked {
                self.acked = true;
                let ack = json!({"type": "connection-ack", "role": "observer",
                                 "session_id": self.session_id});
                self.push(ack);
                continue;
            }
            let stopping = self.stopping.load(Ordering::Acquire);
            self.discover();
            self.drain();
            if stopping {
                self.closed = true;
                let closed = json!({"type": "capsule-closed", "session_id": self.session_id});
                self.push(closed);
                continue;
            }
            if self.pending.is_empty() {
                if self.written.elapsed() >= HEARTBEAT {
                    self.written = Instant::now();
                    return Some(b": keep-alive\n\n".to_vec());
                }
                std::thread::sleep(TICK);
            }
        }
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
