//! A live task as the engine holds it ([`LiveTask`]), telling its readers each change, and what
//! one turn of it runs with ([`Turn`]).

use std::sync::Arc;
use std::time::Instant;

use super::super::budget::Charge;
use super::super::feed::{Feed, Sight};
use super::super::taskdir::TaskDir;
use crate::a2a::message::{Content, Message, Part};
use crate::a2a::stream::Event;
use crate::a2a::task::{State, Task};
use crate::id::TaskId;

use super::Settled;
use super::outbox::Outbox;

/// A task with what only the engine needs: whose it is, whether it was asked to end, when it
/// came (for listing newest first), its turn and its directory.
pub(super) struct LiveTask {
    pub(super) task: Task,
    /// The credential that started it; only it (and the operator) can see it.
    pub(super) owner: String,
    pub(super) cancel: bool,
    pub(super) seq: u64,
    /// The turn running or next to run: 1 for a new task, one more for each continuation.
    pub(super) turn: u32,
    /// While input is required: when the task fails for want of it.
    pub(super) input_until: Option<Instant>,
    /// `MUR_TASK_DIR`, from the first turn until the task ends.
    pub(super) dir: Option<Arc<TaskDir>>,
    /// The readers streaming it.
    pub(super) feeds: Vec<Arc<Feed>>,
    /// Whether this turn's answer has been streamed in chunks already.
    pub(super) chunked: bool,
    /// The task as this turn settles, handed to whoever holds a clone ([`super::Taken`]): a
    /// blocking caller's answer must not depend on the task still being in memory when it wakes
    /// — a thousand tasks ending meanwhile evict it from the store of finished ones.
    pub(super) settled: Settled,
    /// What the task holds of the session's memory budget: its messages (twice for a handler's
    /// task: memory and its directory's files), its answer and the events streaming it.
    pub(super) charge: Charge,
    /// The task as it stands, as the first event every new reader gets: one copy shared by the
    /// readers joining between two changes, never one per reader. Cleared on every change.
    pub(super) snapshot: Option<Arc<Event>>,
}

/// What holding `message` costs: its parts' text, names and metadata.
pub(super) fn message_weight(message: &Message) -> usize {
    let metadata =
        |m: &Option<serde_json::Value>| m.as_ref().map_or(0, |m| 16 * m.to_string().len());
    256 + metadata(&message.metadata) + parts_weight(&message.parts)
}

fn parts_weight(parts: &[Part]) -> usize {
    parts
        .iter()
        .map(|p| {
            let content = match &p.content {
                Content::Text(t) | Content::Raw(t) | Content::Url(t) => t.len(),
                Content::Data(d) => d.len(),
            };
            let names = p.filename.as_ref().map_or(0, String::len)
                + p.media_type.as_ref().map_or(0, String::len);
            let metadata = p.metadata.as_ref().map_or(0, |m| 16 * m.to_string().len());
            128 + content + names + metadata
        })
        .sum()
}

/// What holding `task` costs: its history (counted twice when its directory holds it too, as
/// `message.json` and `history.json`) and its answer.
pub(super) fn weight(task: &Task, on_disk: bool) -> usize {
    let history: usize = task.history.iter().map(message_weight).sum();
    history * (1 + usize::from(on_disk)) + parts_weight(&task.answer)
}

impl LiveTask {
    /// `task`, just taken for `owner` as arrival `seq`, holding `charge`: no turn run yet.
    pub(super) fn new(task: Task, owner: String, seq: u64, charge: Charge) -> Self {
        Self {
            task,
            owner,
            cancel: false,
            seq,
            turn: 1,
            input_until: None,
            dir: None,
            feeds: Vec::new(),
            chunked: false,
            settled: Settled::default(),
            charge,
            snapshot: None,
        }
    }

    /// Move to `state` — any state, Submitted and Working as well as an end — and tell its
    /// readers; a question joins the history as the agent's message. (A final state's directory
    /// goes when the entry is stored as finished.)
    pub(super) fn move_to(&mut self, state: State, note: Option<String>, out: &mut Outbox) {
        self.task.state = state;
        self.task.note = note;
        self.task.updated = crate::time::unix_now();
        if state == State::InputRequired {
            self.task.history.extend(self.task.said(self.turn));
        }
        if state == State::Completed {
            // The chunks streamed were the answer's text: what is left are the files.
            let skip = usize::from(
                self.chunked
                    && matches!(self.task.answer.first(), Some(p) if matches!(p.content, Content::Text(_))),
            );
            let mut rest = self.task.answer[skip.min(self.task.answer.len())..].to_vec();
            if rest.is_empty() {
                rest.push(Part::text(""));
            }
            let append = self.chunked;
            self.publish(
                Event::Artifact {
                    parts: rest,
                    append,
                    last: true,
                },
                out,
            );
        } else if self.chunked {
            // Any other end of a turn whose output streamed (a question, a failure, a cancel):
            // its artifact is closed before the status says so, as a completed one is, so a
            // reader never holds an artifact still open once the task has moved on.
            self.publish(
                Event::Artifact {
                    parts: vec![Part::text("")],
                    append: true,
                    last: true,
                },
                out,
            );
        }
        // This turn's chunks are closed either way; a later call (a cancel while input is
        // required) has no open artifact to close.
        self.chunked = false;
        // A completed task's answer has just streamed as its artifact: its status does not
        // carry it a second time (up to 4 MiB).
        let message = match state {
            State::Completed => None,
            _ => self.task.said(self.turn),
        };
        let status = Event::Status {
            state,
            message,
            timestamp: self.task.updated,
            settled: state.is_settled(),
        };
        self.publish(status, out);
        // A question's task stays live, so the claim gets a copy — only when someone holds it,
        // and the entry lets go of that claim at once: the copy lives only as long as its
        // waiter, not as long as the task is parked. An ended task is handed over whole when it
        // is stored ([`super::insert_finished`]).
        if state == State::InputRequired && self.settled.claimed() {
            let wakes = self.settled.settle(self.task.clone());
            out.due.wakes.extend(wakes);
            self.settled = Settled::default();
        }
    }

    /// Give `event` to every reader still reading, every watcher and every webhook (queued:
    /// [`super::super::push`]): one shared copy for all of them, the readers woken once the
    /// engine lock is released. Any event is a change, so the shared snapshot of the task is
    /// dropped.
    pub(super) fn publish(&mut self, event: Event, out: &mut Outbox) {
        self.snapshot = None;
        let event = Arc::new(event);
        let wakes = &mut out.due.wakes;
        self.feeds.retain(|feed| feed.push(event.clone(), wakes));
        if let Some(push) = &out.push {
            push.publish(&self.task, &event, self.charge.bytes(), &mut out.due.wakes);
        }
        out.sight(|| self.sight(Some(event)));
    }

    /// Tell every watcher the task has started: each of its events follows.
    pub(super) fn announce(&self, out: &mut Outbox) {
        out.sight(|| self.sight(None));
    }

    /// What a watcher is told of this task: `event`, and with a completed status the answer.
    pub(super) fn sight(&self, event: Option<Arc<Event>>) -> Sight {
        let completed = |e: &Arc<Event>| {
            matches!(
                **e,
                Event::Status {
                    state: State::Completed,
                    ..
                }
            )
        };
        let answer = event
            .as_ref()
            .filter(|e| completed(e))
            .map(|_| super::super::watch::text_of(&self.task.answer));
        Sight {
            task_id: self.task.id.to_string(),
            context_id: self.task.context_id.clone(),
            event,
            answer,
        }
    }

    /// The task as it stands, as the first event every new reader gets: one copy shared by the
    /// readers joining between two changes.
    pub(super) fn snapshot(&mut self) -> Arc<Event> {
        let task = &self.task;
        self.snapshot
            .get_or_insert_with(|| Arc::new(Event::Task(task.clone())))
            .clone()
    }

    /// A new reader: it gets the task as it stands, then what happens next.
    pub(super) fn watch(&mut self) -> Arc<Feed> {
        let feed = Arc::new(Feed::new(
            self.task.id.to_string(),
            self.task.context_id.clone(),
        ));
        // A new feed has no reader waiting on it yet: nobody to wake.
        let unwoken = &mut Vec::new();
        feed.push(self.snapshot(), unwoken);
        if self.task.state.is_settled() {
            let status = Arc::new(Event::Status {
                state: self.task.state,
                message: self.task.said(self.turn),
                timestamp: self.task.updated,
                settled: true,
            });
            feed.push(status, unwoken);
        } else {
            self.feeds.push(feed.clone());
        }
        feed
    }
}

/// What one turn of a task runs with.
pub(super) struct Turn {
    pub(super) task_id: TaskId,
    pub(super) context_id: String,
    pub(super) number: u32,
    /// The message this turn answers.
    pub(super) message: Message,
    /// Every message before it, both roles.
    pub(super) earlier: Vec<Message>,
    pub(super) dir: Option<Arc<TaskDir>>,
}
