//! The task engine: what `message/send` and `SendMessage` start, run by the capsule's handler
//! ([`super::handler`]) under the manifest's lifecycle rules — acceptance, concurrency, queue,
//! turns — and, once finished, kept in [`super::store`] for `tasks/get`, `GetTask` and
//! `ListTasks`. What a task looks like on the wire is [`crate::a2a::task`]'s business; this
//! module owns its life: taking messages and scheduling turns here, one live task in
//! `entry.rs`, running a turn in `turn.rs` on a thread of `threads.rs` (kept a while for the
//! next turn), reading tasks in `query.rs`.
//!
//! Running handlers are the [`Supervisor`]'s: started, registered and ended there, under its own
//! lock, so this engine's lock is never held across a spawn or a wait. The engine's own lock is
//! a leaf held only for memory: what may wait — a wake-up, a log line, a thread's start, a
//! directory's rename — is left due under it and done once it is released (`outbox`).

mod ending;
mod journaled;
mod live;
mod outbox;
mod query;
mod settled;
mod threads;
mod turn;

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};

use super::budget::{Budget, Charge};
use super::feed::Feed;
use super::handler::CallService;
use super::journal::format::Kind;
use super::push::Push;
use super::store::Store;
use super::supervisor::Supervisor;
use super::taskdir::SessionTasks;
use crate::a2a::message::Message;
use crate::a2a::push::Config;
use crate::a2a::task::{State, Task};
use crate::id::{ContextId, TaskId};
use crate::json::manifest::{Acceptance, Lifecycle};
pub use ending::Canceled;
use live::LiveTask;
pub use outbox::Sightings;
use outbox::{Locked, Outbox};
use query::visible;
pub use settled::Settled;

/// What runs a task.
#[derive(Debug, Clone)]
pub enum Capsule {
    /// The embedded `echo` capsule: the answer is the text.
    Echo,
    /// A handler process: resolved argv, run in `workdir`, in a Landlock domain of `sandbox`'s
    /// (none: unsandboxed, as the session said at its start).
    Handler {
        argv: Vec<String>,
        workdir: PathBuf,
        sandbox: Option<Arc<super::sandbox::Policy>>,
    },
}

/// Why a task was not started.
#[derive(Debug)]
pub enum Refused {
    /// The capsule takes no tasks (`task_acceptance: none`).
    NotAccepted(String),
    /// Every slot (and, with a queue, every queue place) is taken, or the session is stopping.
    Busy(String),
    /// Something on this side failed (no randomness for an id).
    Internal(String),
    /// The message names a task it cannot continue.
    FollowUp(FollowUp),
    /// The memory budget has no room for it, or parked tasks hold their whole share: the newest
    /// demand is the one refused, and may be retried.
    Memory(String),
}

/// Why a message naming a `taskId` was not taken as that task's next turn.
#[derive(Debug, PartialEq, Eq)]
pub enum FollowUp {
    /// No such task, or not the caller's to see.
    NotFound,
    /// The task has ended; a finished task is never restarted.
    Ended(State),
    /// The task is queued or running; it is not waiting for input.
    Live(State),
    /// The message's `contextId` is not the task's.
    OtherContext,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::NotAccepted(why)
            | Refused::Busy(why)
            | Refused::Internal(why)
            | Refused::Memory(why) => f.write_str(why),
            Refused::FollowUp(FollowUp::NotFound) => f.write_str("task not found"),
            Refused::FollowUp(FollowUp::Ended(_)) => {
                f.write_str("the task has ended: a finished task is never continued")
            }
            Refused::FollowUp(FollowUp::Live(_)) => {
                f.write_str("the task is not waiting for input")
            }
            Refused::FollowUp(FollowUp::OtherContext) => {
                f.write_str("the message's contextId is not the task's")
            }
        }
    }
}

/// A task another caller may not see is reported exactly like one that does not exist.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    NotFound,
    /// It has already ended, in this state: it cannot be canceled or streamed.
    Ended(State),
}

/// A task taken: its id, when a stream was asked for the reader's feed, and the claim on the
/// task as this turn settles.
pub struct Taken {
    pub id: TaskId,
    pub feed: Option<Arc<Feed>>,
    pub settled: Settled,
}

/// Where the environment extras for the next task come from (the control plane).
pub type EnvSource = Arc<dyn Fn() -> Vec<(String, OsString)> + Send + Sync>;

pub struct Engine {
    capsule: Capsule,
    lifecycle: Lifecycle,
    /// `MUR_SESSION_ID`, `MUR_CAPSULE`, and anything else every handler gets.
    base_env: Vec<(String, OsString)>,
    extra_env: EnvSource,
    calls: Option<CallService>,
    /// `~/.murmur/tasks/<session>/`, for a capsule with a handler.
    dirs: Option<SessionTasks>,
    state: Mutex<Tasks>,
    /// Notified (after the lock is released) only when the last running task ends: the
    /// wind-down's one waiter ([`Engine::wait_idle`]).
    idle: Condvar,
    /// This engine, for the task threads it starts once its lock is released.
    me: Weak<Engine>,
    /// The threads turns run on, each kept a while for the next turn.
    threads: Arc<threads::Threads>,
    supervisor: Supervisor,
    budget: Arc<Budget>,
    /// The share of the budget stream readers' copies draw on (a quarter; [`Budget::share`]).
    streams: Arc<Budget>,
    /// A named session's task store: every task's start and end written there too.
    journal: OnceLock<super::journal::Journal>,
    /// Whether a task's messages are written to its directory too (a handler's capsule): then
    /// they are counted twice, the file as well as the memory.
    on_disk: bool,
    /// Push notifications, when `network.push` turned them on ([`Engine::enable_push`]).
    push: OnceLock<Arc<Push>>,
}

/// Tasks parked waiting for input, at most; and the share of the budget they may hold, as a
/// divisor (a half). A new task is refused while either is reached, so parked tasks can never
/// starve reads, cancels and continuations of the budget.
const MAX_PARKED: usize = 256;
const PARKED_SHARE: usize = 2;
/// The most turns one task takes: a handler that keeps asking (exit 10) fails the task at this
/// turn, stating why, so a task's history is bounded (2 messages a turn, each within the
/// door's 1 MiB request or the handler's 4 MiB answer, and all of it counted in the budget).
pub const MAX_TURNS: u32 = 64;
/// What a live task costs beyond its messages: its entry, ids, bookkeeping.
const ENTRY_OVERHEAD: usize = 4 << 10;

#[derive(Default)]
struct Tasks {
    /// The tasks queued, running or waiting for input.
    by_id: BTreeMap<String, LiveTask>,
    finished: Store,
    queue: VecDeque<String>,
    running: u32,
    /// Directories of ended tasks off their paths and not yet recycled or removed: the
    /// wind-down waits for them as for running tasks, since it removes the session's directory
    /// they are renamed in — a client can have a task's answer, and stop the session, before
    /// the thread that wrote it has recycled its directory.
    recycling: usize,
    /// Every task that has ended since the session started, for [`Engine::tally`].
    ended: u64,
    stopping: bool,
    /// Whether every task's start and end is journaled ([`Engine::restore`]).
    journaling: bool,
    /// The next task's arrival number.
    next_seq: u64,
    /// The watchers, and what is due once the lock is released.
    out: Outbox,
}

/// One page of tasks, newest first.
#[derive(Debug)]
pub struct Listing {
    pub tasks: Vec<Task>,
    /// Every task the filters match, on any page.
    pub total: usize,
    /// Where the next page starts, when there is one.
    pub next: Option<u64>,
}

impl Engine {
    pub fn new(
        capsule: Capsule,
        lifecycle: Lifecycle,
        base_env: Vec<(String, OsString)>,
        extra_env: EnvSource,
        calls: Option<CallService>,
        dirs: Option<SessionTasks>,
    ) -> Arc<Self> {
        let limit = usize::try_from(lifecycle.memory_budget_mib)
            .unwrap_or(usize::MAX >> 20)
            .saturating_mul(1 << 20);
        let budget = Budget::new(limit);
        let finished = Store::charged(&budget, (limit / 4).min(super::store::BUDGET));
        let streams = Budget::share(&budget, limit / 4);
        let on_disk = matches!(capsule, Capsule::Handler { .. });
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            on_disk,
            budget,
            streams,
            capsule,
            lifecycle,
            base_env,
            extra_env,
            calls,
            dirs,
            state: Mutex::new(Tasks {
                finished,
                ..Tasks::default()
            }),
            idle: Condvar::new(),
            push: OnceLock::new(),
            journal: OnceLock::new(),
            threads: Arc::default(),
            supervisor: Supervisor::default(),
        })
    }

    /// The engine lock; what is left due under it is done once it is released.
    fn lock(&self) -> Locked<'_> {
        Locked {
            engine: self,
            // panic = "abort": a poisoned lock cannot be observed half-updated.
            guard: Some(self.state.lock().unwrap_or_else(|p| p.into_inner())),
        }
    }

    /// What holding `task` in memory costs, as the budget counts it.
    pub fn weight_of(task: &Task) -> usize {
        live::weight(task, false)
    }

    /// Deliver every task's updates to its webhooks from now on (`network.push`).
    pub fn enable_push(&self, push: Arc<Push>) {
        self.lock().out.push = Some(push.clone());
        let _ = self.push.set(push);
    }

    /// Push notifications, when they are on.
    pub fn push(&self) -> Option<&Arc<Push>> {
        self.push.get()
    }

    /// The session's memory budget.
    pub fn budget(&self) -> &Arc<Budget> {
        &self.budget
    }

    /// The share of the budget stream readers write from.
    pub fn stream_budget(&self) -> &Arc<Budget> {
        &self.streams
    }

    /// Reserve `bytes` of the budget for a demand (a request being read), evicting the oldest
    /// finished tasks when that makes room; `None` when even that does not.
    pub fn reserve(&self, bytes: usize) -> Option<Charge> {
        let charge = Charge::new(&self.budget);
        if charge.grow(bytes) {
            return Some(charge);
        }
        self.make_room(bytes);
        charge.grow(bytes).then_some(charge)
    }

    /// Evict the oldest finished tasks until the budget has room for `bytes` or none is left;
    /// whether it has room now. (Finished tasks are the ones no client waits on.)
    pub fn make_room(&self, bytes: usize) -> bool {
        self.lock().finished.make_room(bytes);
        self.budget.fits(bytes)
    }

    /// [`Engine::reserve`] under the lock already held.
    fn reserve_locked(&self, tasks: &mut Tasks, bytes: usize) -> Result<Charge, Refused> {
        let charge = Charge::new(&self.budget);
        if charge.grow(bytes) {
            return Ok(charge);
        }
        tasks.finished.make_room(bytes);
        if charge.grow(bytes) {
            return Ok(charge);
        }
        Err(Refused::Memory(format!(
            "busy: the session's memory budget ({} MiB, lifecycle.memory_budget_mib) has no room for this message ({} KiB); try again later",
            self.budget.limit() >> 20,
            bytes.div_ceil(1024)
        )))
    }

    /// Whether parked tasks (waiting for input) hold their whole share, by count or bytes: a new
    /// task is refused then, saying which.
    fn parked_full(&self, tasks: &Tasks) -> Option<String> {
        let parked = tasks
            .by_id
            .values()
            .filter(|e| e.task.state == State::InputRequired);
        let (count, bytes) = parked.fold((0, 0), |(n, b), e| (n + 1, b + e.charge.bytes()));
        let share = self.budget.limit() / PARKED_SHARE;
        (count >= MAX_PARKED || bytes >= share).then(|| {
            format!(
                "busy: {count} task(s) wait for input, holding {} MiB (at most {MAX_PARKED} tasks and {} MiB of lifecycle.memory_budget_mib); continue or cancel one, or try again later",
                bytes >> 20,
                share >> 20
            )
        })
    }

    /// Start (or queue) a task for `owner` from a client's validated `message`; its id. `viewer`
    /// is whose tasks the caller may see ([`Engine::get`]).
    ///
    /// A message naming a `taskId` is that task's next turn, which only a task waiting for input
    /// may take; anything else is refused with why ([`FollowUp`]) and never starts a new task.
    ///
    /// `push`: a webhook config the send carried, set on the task before its first event, so
    /// its receiver misses none (ignored when push notifications are off).
    pub fn submit(
        self: &Arc<Self>,
        owner: &str,
        viewer: Option<&str>,
        mut message: Message,
        stream: bool,
        push: Option<Config>,
    ) -> Result<Taken, Refused> {
        if self.lifecycle.task_acceptance == Acceptance::None {
            return Err(Refused::NotAccepted(
                "this capsule takes no tasks (task_acceptance: none)".into(),
            ));
        }
        if let Some(named) = message.task_id.clone() {
            return self.resume(&named, viewer, message, stream, push);
        }
        let id = TaskId::mint().map_err(Refused::Internal)?;
        let context_id = match message.context_id.clone() {
            Some(given) => given,
            None => ContextId::mint().map_err(Refused::Internal)?.to_string(),
        };
        message.task_id = Some(id.to_string());
        message.context_id = Some(context_id.clone());
        let mut tasks = self.lock();
        if let Some(why) = self.parked_full(&tasks) {
            return Err(Refused::Memory(why));
        }
        let weight = live::message_weight(&message) * (1 + usize::from(self.on_disk));
        let charge = self.reserve_locked(&mut tasks, weight + ENTRY_OVERHEAD)?;
        let seq = tasks.next_seq;
        let task = Task {
            id: id.clone(),
            context_id,
            state: State::Submitted,
            history: vec![message],
            answer: Vec::new(),
            note: None,
            updated: crate::time::unix_now(),
        };
        let mut entry = LiveTask::new(task, owner.to_string(), seq, charge);
        let settled = entry.settled.clone();
        if let Capsule::Echo = self.capsule {
            if tasks.stopping {
                return Err(Refused::Busy("the session is stopping".into()));
            }
            tasks.out.set_push(id.as_str(), push)?;
            tasks.next_seq += 1;
            let feed = stream.then(|| entry.watch());
            entry.announce(&mut tasks.out);
            entry.task.answer = entry.task.history[0].parts.clone();
            entry.move_to(State::Completed, None, &mut tasks.out);
            insert_finished(&mut tasks, entry);
            return Ok(Taken { id, feed, settled });
        }
        let start_now = self.admit(&tasks)?;
        tasks.out.set_push(id.as_str(), push)?;
        tasks.next_seq += 1;
        let feed = stream.then(|| entry.watch());
        entry.announce(&mut tasks.out);
        tasks.journal_live(&entry, Kind::Started);
        tasks.by_id.insert(id.to_string(), entry);
        self.schedule(&mut tasks, id.to_string(), start_now);
        Ok(Taken { id, feed, settled })
    }

    /// Take `message` as the next turn of task `named`, if it waits for input and `viewer` may
    /// see it.
    fn resume(
        self: &Arc<Self>,
        named: &str,
        viewer: Option<&str>,
        mut message: Message,
        stream: bool,
        push: Option<Config>,
    ) -> Result<Taken, Refused> {
        let mut tasks = self.lock();
        self.expire_inputs(&mut tasks);
        let seen =
            visible(&tasks, named, viewer).map_err(|_| Refused::FollowUp(FollowUp::NotFound))?;
        if message
            .context_id
            .as_ref()
            .is_some_and(|c| c != seen.context_id)
        {
            return Err(Refused::FollowUp(FollowUp::OtherContext));
        }
        match seen.state {
            State::InputRequired => {}
            state if state.is_final() => return Err(Refused::FollowUp(FollowUp::Ended(state))),
            state => return Err(Refused::FollowUp(FollowUp::Live(state))),
        }
        let start_now = self.admit(&tasks)?;
        let weight = live::message_weight(&message) * (1 + usize::from(self.on_disk));
        let more = self.reserve_locked(&mut tasks, weight)?;
        tasks.out.set_push(named, push)?;
        let Tasks {
            by_id,
            out,
            journaling,
            ..
        } = &mut *tasks;
        let Some(entry) = by_id.get_mut(named) else {
            return Err(Refused::FollowUp(FollowUp::NotFound));
        };
        // The continuation joins the task's own charge.
        entry.charge.force(more.bytes());
        drop(more);
        message.context_id = Some(entry.task.context_id.clone());
        entry.task.history.push(message);
        entry.turn += 1;
        entry.cancel = false;
        entry.input_until = None;
        entry.chunked = false;
        entry.task.answer.clear();
        // The last turn's claim was settled by its question: this turn gets its own.
        entry.settled = Settled::default();
        let settled = entry.settled.clone();
        entry.move_to(State::Submitted, None, out);
        if *journaling {
            out.due
                .journal
                .push(journaled::live_entry(entry, Kind::Started));
        }
        let feed = stream.then(|| entry.watch());
        let id = entry.task.id.clone();
        self.schedule(&mut tasks, named.to_string(), start_now);
        Ok(Taken { id, feed, settled })
    }

    /// Whether a task may start now (`Ok(true)`), wait in the queue (`Ok(false)`), or neither:
    /// every slot and queue place is taken, or the session is stopping.
    fn admit(&self, tasks: &Tasks) -> Result<bool, Refused> {
        if tasks.stopping {
            return Err(Refused::Busy("the session is stopping".into()));
        }
        let slots = match self.lifecycle.task_acceptance {
            Acceptance::Single => 1,
            _ => self.lifecycle.concurrency,
        };
        if tasks.running < slots {
            return Ok(true);
        }
        let depth = match self.lifecycle.task_acceptance {
            Acceptance::Queue => self.lifecycle.queue_depth as usize,
            _ => 0,
        };
        if tasks.queue.len() < depth {
            return Ok(false);
        }
        Err(Refused::Busy(if depth == 0 {
            format!(
                "busy: {} task(s) running and no queue; try again later",
                tasks.running
            )
        } else {
            format!("busy: the queue of {depth} is full; try again later")
        }))
    }

    /// Start task `id` now or queue it, as [`Engine::admit`] decided.
    fn schedule(self: &Arc<Self>, tasks: &mut Tasks, id: String, start_now: bool) {
        if start_now {
            self.start(tasks, id);
        } else {
            tasks.queue.push_back(id);
        }
    }

    /// Mark `id` working, its thread started once the lock is released ([`Engine::spawn`]).
    fn start(&self, tasks: &mut Tasks, id: String) {
        tasks.running += 1;
        let Tasks { by_id, out, .. } = tasks;
        if let Some(entry) = by_id.get_mut(&id) {
            entry.move_to(State::Working, None, out);
        }
        out.due.starts.push(id);
    }
}

/// Store an ended task, and hand it to whoever holds its claim: moved, not copied — a task
/// can hold megabytes — its waiters woken once the lock is released. Its directory leaves its
/// path and is recycled then too ([`outbox::Due`]).
fn insert_finished(tasks: &mut Tasks, mut entry: LiveTask) {
    tasks.ended += 1;
    if let Some(dir) = entry.dir.take() {
        tasks.recycling += 1;
        tasks.out.due.retired.push(dir);
    }
    let body = tasks
        .finished
        .insert(&entry.task, entry.owner.clone(), entry.seq);
    tasks.journal_end(entry.task.id.as_str(), body);
    if entry.settled.claimed() {
        let wakes = entry.settled.settle(entry.task);
        tasks.out.due.wakes.extend(wakes);
    }
}

#[cfg(test)]
mod tests;
