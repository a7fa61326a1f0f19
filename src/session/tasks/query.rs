//! Reading tasks, live or finished: one by id, a filtered page, the live ones, a stream of one,
//! and every task's events for a watcher — each only as the caller may see them.

use std::sync::Arc;

use super::super::feed::Feed;
use super::{Engine, Listing, Lookup, Sightings, Tasks};
use crate::a2a::params;
use crate::a2a::task::{State, Task};

impl Engine {
    /// A new reader of live task `id`, if `viewer` may see it: the task as it stands, then what
    /// happens to it. A task that has ended cannot be streamed.
    pub fn subscribe(&self, id: &str, viewer: Option<&str>) -> Result<Arc<Feed>, Lookup> {
        let mut tasks = self.lock();
        self.expire_inputs(&mut tasks);
        let state = visible(&tasks, id, viewer)?.state;
        match tasks.by_id.get_mut(id) {
            Some(entry) if !state.is_final() => Ok(entry.watch()),
            _ => Err(Lookup::Ended(state)),
        }
    }

    /// A new watcher of the whole session (the operator's: it sees every task): told of each
    /// live task now — its start and the task as it stands — then of every task's start, events
    /// and end as they happen, however briefly a task lives. A watcher that falls too far behind
    /// loses its feed; the engine never waits for one.
    pub fn observe(&self) -> Arc<Sightings> {
        let watcher = Arc::new(Sightings::default());
        let mut tasks = self.lock();
        let unwoken = &mut Vec::new();
        for entry in tasks.by_id.values_mut() {
            let found = entry.snapshot();
            watcher.push(Arc::new(entry.sight(None)), unwoken);
            watcher.push(Arc::new(entry.sight(Some(found))), unwoken);
        }
        if tasks.stopping {
            // The session is ending: what it has now, then the end.
            watcher.finish(unwoken);
        } else {
            tasks.out.watchers.push(watcher.clone());
        }
        watcher
    }

    /// The state of task `id`, if `viewer` may see it: a look that copies nothing.
    pub fn sees(&self, id: &str, viewer: Option<&str>) -> Result<State, Lookup> {
        let mut tasks = self.lock();
        self.expire_inputs(&mut tasks);
        visible(&tasks, id, viewer).map(|seen| seen.state)
    }

    /// The task as `viewer` may see it: `None` sees every task (the operator), `Some(owner)` only
    /// its own.
    pub fn get(&self, id: &str, viewer: Option<&str>) -> Result<Task, Lookup> {
        let mut tasks = self.lock();
        self.expire_inputs(&mut tasks);
        visible(&tasks, id, viewer)?;
        read(&tasks, id).ok_or(Lookup::NotFound)
    }

    /// The tasks `viewer` may see that `query` matches, newest first, one page.
    pub fn list(&self, viewer: Option<&str>, query: &params::List) -> Listing {
        let mut tasks = self.lock();
        self.expire_inputs(&mut tasks);
        let live = tasks.by_id.iter().map(|(id, e)| Row {
            id,
            owner: &e.owner,
            context_id: &e.task.context_id,
            state: e.task.state,
            updated: e.task.updated,
            seq: e.seq,
        });
        let finished = tasks.finished.summaries().map(|(id, s)| Row {
            id,
            owner: &s.owner,
            context_id: &s.context_id,
            state: s.state,
            updated: s.updated,
            seq: s.seq,
        });
        let mut matching: Vec<Row> = live
            .chain(finished)
            .filter(|r| viewer.is_none_or(|v| v == r.owner))
            .filter(|r| {
                query
                    .context_id
                    .as_deref()
                    .is_none_or(|c| c == r.context_id)
            })
            .filter(|r| query.state.admits(r.state))
            .filter(|r| query.updated_since.is_none_or(|t| r.updated >= t))
            .collect();
        let total = matching.len();
        matching.retain(|r| query.before.is_none_or(|b| r.seq < b));
        matching.sort_unstable_by_key(|r| std::cmp::Reverse(r.seq));
        let next = (matching.len() > query.page_size).then(|| matching[query.page_size - 1].seq);
        Listing {
            tasks: matching
                .iter()
                .take(query.page_size)
                .filter_map(|r| read(&tasks, r.id))
                .collect(),
            total,
            next,
        }
    }

    /// How many tasks run, wait and have ended: one look under the lock.
    pub fn tally(&self) -> Tally {
        let tasks = self.lock();
        let (running, queued) = (tasks.running, tasks.queue.len());
        Tally {
            running,
            queued,
            waiting: tasks.by_id.len().saturating_sub(queued + running as usize),
            ended: tasks.ended,
        }
    }

    /// The tasks still queued or running: what stopping the session cancels.
    pub fn live(&self) -> Vec<String> {
        let tasks = self.lock();
        tasks
            .by_id
            .iter()
            .filter(|(_, e)| !e.task.state.is_final())
            .map(|(id, _)| id.clone())
            .collect()
    }
}

/// What the session's tasks are doing, at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub running: u32,
    /// Queued behind the concurrency limit.
    pub queued: usize,
    /// Waiting for the caller's next message (input required).
    pub waiting: usize,
    /// Ended since the session started.
    pub ended: u64,
}

impl std::fmt::Display for Tally {
    /// The service manager's status line: `2 tasks running, 1 queued, 0 waiting for input, 17
    /// ended`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = if self.running == 1 { "" } else { "s" };
        write!(
            f,
            "{} task{plural} running, {} queued, {} waiting for input, {} ended",
            self.running, self.queued, self.waiting, self.ended
        )
    }
}

/// What listing reads of a task, live or finished.
struct Row<'a> {
    id: &'a str,
    owner: &'a str,
    context_id: &'a str,
    state: State,
    updated: i64,
    seq: u64,
}

/// What deciding about a task the caller may see needs: its state and context.
pub(super) struct Seen<'a> {
    pub(super) state: State,
    pub(super) context_id: &'a str,
}

/// Task `id`, live or finished, if `viewer` may see it (`None` sees every task).
pub(super) fn visible<'a>(
    tasks: &'a Tasks,
    id: &str,
    viewer: Option<&str>,
) -> Result<Seen<'a>, Lookup> {
    let may = |owner: &str| viewer.is_none_or(|v| v == owner);
    if let Some(e) = tasks.by_id.get(id).filter(|e| may(&e.owner)) {
        return Ok(Seen {
            state: e.task.state,
            context_id: &e.task.context_id,
        });
    }
    match tasks.finished.summary(id).filter(|s| may(&s.owner)) {
        Some(s) => Ok(Seen {
            state: s.state,
            context_id: &s.context_id,
        }),
        None => Err(Lookup::NotFound),
    }
}

/// The whole of task `id`, live or finished.
fn read(tasks: &Tasks, id: &str) -> Option<Task> {
    match tasks.by_id.get(id) {
        Some(entry) => Some(entry.task.clone()),
        None => tasks.finished.get(id),
    }
}
