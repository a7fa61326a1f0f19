//! The task engine: what `message/send` and `SendMessage` start, run by the capsule's handler
//! ([`super::handler`]) under the manifest's lifecycle rules — acceptance, concurrency, queue —
//! and kept (the newest 1,000 finished) for `tasks/get`, `GetTask` and `ListTasks`. What a task
//! looks like on the wire is [`crate::a2a::task`]'s business; this module owns its life.
//!
//! The engine owns the registry of running handler groups: a group is registered under the
//! engine's lock in the same step as its spawn, and forgotten only after its leader is reaped, so
//! the orphan sweep (which SIGKILLs every child of the session that is no registered leader)
//! never mistakes a handler that has just started for an orphan.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::handler::{self, CallSocket, Outcome};
use crate::a2a::message::{Content, Message, Part};
use crate::a2a::params;
use crate::a2a::task::{State, Task};
use crate::id::{ContextId, TaskId};
use crate::json::contract::env;
use crate::json::manifest::{Acceptance, Lifecycle};
use crate::sys::child::signal_group;

/// Finished tasks kept for `tasks/get`.
pub const KEPT_TASKS: usize = 1000;
/// The most generations of a handler's escaped descendants one orphan sweep ends.
const SWEEP_ROUNDS: usize = 32;

/// What runs a task.
#[derive(Debug, Clone)]
pub enum Capsule {
    /// The embedded `echo` capsule: the answer is the text.
    Echo,
    /// A handler process: resolved argv, run in `workdir`.
    Handler { argv: Vec<String>, workdir: PathBuf },
}

/// A task with what only the engine needs: whose it is, whether it was asked to end, and when
/// it came (for listing newest first).
struct Entry {
    task: Task,
    /// The credential that started it; only it (and the operator) can see it.
    owner: String,
    cancel: bool,
    seq: u64,
}

impl Entry {
    fn finish(&mut self, state: State, note: Option<String>) {
        self.task.state = state;
        self.task.note = note;
        self.task.updated = crate::time::unix_now();
    }
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
    /// The capsule cannot take a part of this kind.
    Content(String),
    /// The message names a task it cannot continue.
    FollowUp(FollowUp),
}

/// Why a message naming a `taskId` was not taken as that task's next turn.
#[derive(Debug, PartialEq, Eq)]
pub enum FollowUp {
    /// No such task, or not the caller's to see.
    NotFound,
    /// The task has ended; a finished task is never restarted.
    Ended(State),
    /// The task is still running; it is not waiting for input.
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
            | Refused::Content(why) => f.write_str(why),
            Refused::FollowUp(why) => write!(f, "{why:?}"),
        }
    }
}

/// A task another caller may not see is reported exactly like one that does not exist.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    NotFound,
    /// It has already ended, in this state.
    NotCancelable(State),
}

/// Where the environment extras for the next task come from (the control plane).
pub type EnvSource = Arc<dyn Fn() -> Vec<(String, OsString)> + Send + Sync>;

/// What serves a handler's call socket (a formation member's calls to its peers), when the
/// session has one: each handler then inherits its own end as `MURMUR_CALL_FD`.
pub type CallService = Arc<dyn Fn(std::os::unix::net::UnixStream) + Send + Sync>;

pub struct Engine {
    capsule: Capsule,
    lifecycle: Lifecycle,
    /// `MUR_SESSION_ID`, `MUR_CAPSULE`, and anything else every handler gets.
    base_env: Vec<(String, OsString)>,
    extra_env: EnvSource,
    calls: Option<CallService>,
    state: Mutex<Tasks>,
    changed: Condvar,
    /// Started with the first handler: SIGKILLs the running handlers' groups if this session
    /// is SIGKILLed.
    reaper: std::sync::OnceLock<Option<crate::sys::child::GroupReaper>>,
}

#[derive(Default)]
struct Tasks {
    by_id: BTreeMap<String, Entry>,
    finished: VecDeque<String>,
    queue: VecDeque<String>,
    running: u32,
    stopping: bool,
    /// Process group of each running handler, by task id, present from spawn until just before
    /// the leader is reaped: while it is here, its pgid can name nothing but that handler's group.
    groups: BTreeMap<String, u32>,
    /// The next task's arrival number.
    next_seq: u64,
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
    ) -> Arc<Self> {
        Arc::new(Self {
            capsule,
            lifecycle,
            base_env,
            extra_env,
            calls,
            state: Mutex::new(Tasks::default()),
            changed: Condvar::new(),
            reaper: std::sync::OnceLock::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Tasks> {
        // panic = "abort": a poisoned lock cannot be observed half-updated.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Start (or queue) a task for `owner` from a client's validated `message`; its id. `viewer`
    /// is whose tasks the caller may see ([`Engine::get`]).
    ///
    /// A message naming a `taskId` asks to continue that task, which only a task waiting for
    /// input may be; no task waits for input yet, so every such message is refused with why
    /// ([`FollowUp`]), and never silently starts a new task.
    pub fn submit(
        self: &Arc<Self>,
        owner: &str,
        viewer: Option<&str>,
        mut message: Message,
    ) -> Result<TaskId, Refused> {
        if self.lifecycle.task_acceptance == Acceptance::None {
            return Err(Refused::NotAccepted(
                "this capsule takes no tasks (task_acceptance: none)".into(),
            ));
        }
        if let Some(named) = &message.task_id {
            let tasks = self.lock();
            let entry = visible(&tasks, named, viewer)
                .map_err(|_| Refused::FollowUp(FollowUp::NotFound))?;
            return Err(Refused::FollowUp(
                if message
                    .context_id
                    .as_ref()
                    .is_some_and(|c| *c != entry.task.context_id)
                {
                    FollowUp::OtherContext
                } else if entry.task.state.is_final() {
                    FollowUp::Ended(entry.task.state)
                } else {
                    FollowUp::Live(entry.task.state)
                },
            ));
        }
        if let (Capsule::Handler { .. }, Some(part)) = (
            &self.capsule,
            message
                .parts
                .iter()
                .position(|p| !matches!(p.content, Content::Text(_))),
        ) {
            return Err(Refused::Content(format!(
                "params.message.parts[{part}] is a {} part; this capsule's handler takes text parts only",
                message.parts[part].kind()
            )));
        }
        let id = TaskId::mint().map_err(Refused::Internal)?;
        let context_id = match message.context_id.clone() {
            Some(given) => given,
            None => ContextId::mint().map_err(Refused::Internal)?.to_string(),
        };
        message.task_id = Some(id.to_string());
        message.context_id = Some(context_id.clone());
        let mut tasks = self.lock();
        if tasks.stopping {
            return Err(Refused::Busy("the session is stopping".into()));
        }
        let seq = tasks.next_seq;
        tasks.next_seq += 1;
        let mut entry = Entry {
            task: Task {
                id: id.clone(),
                context_id,
                state: State::Submitted,
                history: vec![message],
                answer: Vec::new(),
                note: None,
                updated: crate::time::unix_now(),
            },
            owner: owner.to_string(),
            cancel: false,
            seq,
        };
        if let Capsule::Echo = self.capsule {
            entry.task.answer = entry.task.history[0].parts.clone();
            entry.finish(State::Completed, None);
            insert_finished(&mut tasks, entry);
            return Ok(id);
        }
        let slots = match self.lifecycle.task_acceptance {
            Acceptance::Single => 1,
            _ => self.lifecycle.concurrency,
        };
        let start_now = tasks.running < slots;
        if !start_now {
            let depth = match self.lifecycle.task_acceptance {
                Acceptance::Queue => self.lifecycle.queue_depth as usize,
                _ => 0,
            };
            if tasks.queue.len() >= depth {
                return Err(Refused::Busy(if depth == 0 {
                    format!(
                        "busy: {} task(s) running and no queue; try again later",
                        tasks.running
                    )
                } else {
                    format!("busy: the queue of {depth} is full; try again later")
                }));
            }
            tasks.queue.push_back(id.to_string());
        }
        tasks.by_id.insert(id.to_string(), entry);
        if start_now {
            self.start(&mut tasks, id.to_string());
        }
        Ok(id)
    }

    /// Mark `id` working and run it on a thread of its own. A thread that cannot be spawned
    /// (`RLIMIT_NPROC`, memory) fails the task with the reason, so it never stays `working`
    /// with nothing to end it, and whoever waits for it is answered.
    fn start(self: &Arc<Self>, tasks: &mut Tasks, id: String) {
        tasks.running += 1;
        if let Some(entry) = tasks.by_id.get_mut(&id) {
            entry.finish(State::Working, None);
        }
        let engine = Arc::clone(self);
        let runs = id.clone();
        let spawned = std::thread::Builder::new()
            .name("task".into())
            .stack_size(256 * 1024)
            .spawn(move || engine.execute(runs));
        if let Err(err) = spawned {
            tasks.running -= 1;
            if let Some(mut entry) = tasks.by_id.remove(&id) {
                entry.finish(
                    State::Failed,
                    Some(format!("no thread to run the task: {err}")),
                );
                insert_finished(tasks, entry);
            }
            self.changed.notify_all();
        }
    }

    /// Run one task's handler to its end and record the outcome; then start the next queued one.
    fn execute(self: Arc<Self>, id: String) {
        let (text, task_id, context_id) = {
            let tasks = self.lock();
            let Some(entry) = tasks.by_id.get(&id) else {
                return;
            };
            let text = entry.task.history.last().map(Message::text);
            (text, entry.task.id.clone(), entry.task.context_id.clone())
        };
        let text = text.unwrap_or_default();
        let outcome = match &self.capsule {
            Capsule::Echo => Outcome::Completed(text),
            Capsule::Handler { argv, workdir } => {
                let mut vars = self.base_env.clone();
                vars.push((env::TASK_ID.into(), task_id.to_string().into()));
                vars.push((env::CONTEXT_ID.into(), context_id.into()));
                vars.extend((self.extra_env)());
                self.run_handler(&id, argv, workdir, &vars, text)
            }
        };
        let mut tasks = self.lock();
        tasks.running -= 1;
        if let Some(mut entry) = tasks.by_id.remove(&id) {
            match outcome {
                Outcome::Completed(answer) => {
                    entry.task.answer = vec![Part::text(answer)];
                    entry.finish(State::Completed, None);
                }
                Outcome::Failed(why) => entry.finish(State::Failed, Some(why)),
                Outcome::Canceled => entry.finish(State::Canceled, Some("canceled".into())),
            }
            insert_finished(&mut tasks, entry);
        }
        if !tasks.stopping
            && let Some(next) = tasks.queue.pop_front()
        {
            self.start(&mut tasks, next);
        }
        self.changed.notify_all();
    }

    /// Run the handler for task `id` to its end: spawned and registered in one step, supervised,
    /// reaped (its group killed first), forgotten, and any orphan it left swept.
    fn run_handler(
        &self,
        id: &str,
        argv: &[String],
        workdir: &std::path::Path,
        vars: &[(String, OsString)],
        text: String,
    ) -> Outcome {
        let mut command = handler::command(argv, workdir, vars);
        let call_socket = match self
            .calls
            .as_ref()
            .map(|s| CallSocket::attach(&mut command, s))
        {
            Some(Err(why)) => return Outcome::Failed(why),
            attached => attached.and_then(Result::ok),
        };
        let reaper = self
            .reaper
            .get_or_init(crate::sys::child::GroupReaper::start)
            .as_ref();
        let spawned = {
            let mut tasks = self.lock();
            command.spawn().inspect(|child| {
                tasks.groups.insert(id.to_string(), child.id());
                if let Some(reaper) = reaper {
                    reaper.watch(child.id());
                }
            })
        };
        let serving = call_socket.map(CallSocket::serve);
        let mut child = match spawned {
            Ok(child) => child,
            Err(err) => {
                return Outcome::Failed(format!("the handler {} could not start: {err}", argv[0]));
            }
        };
        let timeout = Duration::from_secs(self.lifecycle.task_timeout_secs);
        let supervised = match &serving {
            // No thread to serve its calls: the handler is stopped at once, as on cancel.
            Some(Err(_)) => handler::supervise(&mut child, Vec::new(), timeout, || true),
            _ => handler::supervise(&mut child, text.into_bytes(), timeout, || {
                self.lock().by_id.get(id).is_some_and(|e| e.cancel)
            }),
        };
        let status = handler::reap(&mut child, reaper);
        self.lock().groups.remove(id);
        let outcome = match supervised {
            Ok((pump, stopped)) => handler::outcome(pump, stopped, status, timeout),
            Err(why) => Outcome::Failed(why),
        };
        let outcome = match serving {
            Some(Ok(serving)) => {
                serving.close();
                outcome
            }
            Some(Err(why)) => Outcome::Failed(why),
            None => outcome,
        };
        self.sweep_orphans();
        outcome
    }

    /// Wait until task `id` has ended (or the session stops waiting for tasks); the task.
    pub fn wait(&self, id: &TaskId) -> Option<Task> {
        let mut tasks = self.lock();
        loop {
            let entry = tasks.by_id.get(id.as_str())?;
            if entry.task.state.is_final() {
                return Some(entry.task.clone());
            }
            tasks = self.changed.wait(tasks).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The task as `viewer` may see it: `None` sees every task (the operator), `Some(owner)` only
    /// its own.
    pub fn get(&self, id: &str, viewer: Option<&str>) -> Result<Task, Lookup> {
        let tasks = self.lock();
        visible(&tasks, id, viewer).map(|entry| entry.task.clone())
    }

    /// The tasks `viewer` may see that `query` matches, newest first, one page.
    pub fn list(&self, viewer: Option<&str>, query: &params::List) -> Listing {
        let tasks = self.lock();
        let mut matching: Vec<&Entry> = tasks
            .by_id
            .values()
            .filter(|e| viewer.is_none_or(|v| v == e.owner))
            .filter(|e| {
                query
                    .context_id
                    .as_ref()
                    .is_none_or(|c| *c == e.task.context_id)
            })
            .filter(|e| query.state.is_none_or(|s| s == e.task.state))
            .filter(|e| query.updated_since.is_none_or(|t| e.task.updated >= t))
            .collect();
        let total = matching.len();
        matching.retain(|e| query.before.is_none_or(|b| e.seq < b));
        matching.sort_unstable_by_key(|e| std::cmp::Reverse(e.seq));
        let next = (matching.len() > query.page_size).then(|| matching[query.page_size - 1].seq);
        Listing {
            tasks: matching
                .into_iter()
                .take(query.page_size)
                .map(|e| e.task.clone())
                .collect(),
            total,
            next,
        }
    }

    /// The media types the capsule takes, for its card: the echo capsule any part, a handler
    /// text (its stdin).
    pub fn input_modes(&self) -> &'static [&'static str] {
        match self.capsule {
            Capsule::Echo => &["text/plain", "application/json", "*/*"],
            Capsule::Handler { .. } => &["text/plain"],
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

    /// Ask a live task to end: a queued one ends at once, a running one through its handler's
    /// process group (SIGTERM, SIGKILL 2 s later).
    pub fn cancel(&self, id: &str, viewer: Option<&str>) -> Result<Task, Lookup> {
        let mut tasks = self.lock();
        let state = visible(&tasks, id, viewer)?.task.state;
        if state.is_final() {
            return Err(Lookup::NotCancelable(state));
        }
        if let Some(pos) = tasks.queue.iter().position(|q| q == id) {
            tasks.queue.remove(pos);
            if let Some(mut entry) = tasks.by_id.remove(id) {
                entry.finish(State::Canceled, Some("canceled".into()));
                let task = entry.task.clone();
                insert_finished(&mut tasks, entry);
                self.changed.notify_all();
                return Ok(task);
            }
        }
        let entry = tasks.by_id.get_mut(id).ok_or(Lookup::NotFound)?;
        entry.cancel = true;
        Ok(entry.task.clone())
    }

    /// Stop taking tasks, end every queued one and ask every running one to end (its handler's
    /// group gets SIGTERM, then SIGKILL 2 s later).
    pub fn begin_shutdown(&self) {
        let mut tasks = self.lock();
        tasks.stopping = true;
        let queued: Vec<String> = tasks.queue.drain(..).collect();
        for id in queued {
            if let Some(mut entry) = tasks.by_id.remove(&id) {
                entry.finish(
                    State::Canceled,
                    Some("canceled: the session stopped".into()),
                );
                insert_finished(&mut tasks, entry);
            }
        }
        for entry in tasks.by_id.values_mut() {
            entry.cancel = true;
        }
        self.changed.notify_all();
    }

    /// Whether no task is running, waiting at most `timeout` for the last to end.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let tasks = self.lock();
        let (tasks, _) = self
            .changed
            .wait_timeout_while(tasks, timeout, |t| t.running > 0)
            .unwrap_or_else(|p| p.into_inner());
        tasks.running == 0
    }

    /// SIGKILL and reap every child of ours that is no running handler: processes that escaped a
    /// finished handler's group and were reparented to this session (a subreaper), so that
    /// nothing a handler started outlives its task.
    ///
    /// An orphan's own children are reparented here only once it dies, so the sweep repeats —
    /// at most `SWEEP_ROUNDS` times — until a round finds no orphan: a double fork or a
    /// `setsid` at any depth is ended, one generation a round.
    pub fn sweep_orphans(&self) {
        let tasks = self.lock();
        let reaper = self.reaper.get().and_then(Option::as_ref).map(|r| r.pid());
        for _ in 0..SWEEP_ROUNDS {
            let orphans: Vec<u32> = crate::sys::child::children()
                .into_iter()
                .filter(|&pid| {
                    Some(pid) != reaper && !tasks.groups.values().any(|&leader| leader == pid)
                })
                .collect();
            if orphans.is_empty() {
                return;
            }
            orphans
                .into_iter()
                .for_each(crate::sys::child::kill_and_reap_orphan);
        }
    }

    /// The session ends in order and no handler runs: the group reaper, if one was started, is
    /// told so and reaped, so nothing this session started outlives it.
    pub fn finish_reaper(&self) {
        if let Some(reaper) = self.reaper.get().and_then(Option::as_ref) {
            reaper.finish();
        }
    }

    /// SIGKILL every running handler's process group now: the session is ending at once.
    pub fn kill_all(&self) {
        let tasks = self.lock();
        for &pgid in tasks.groups.values() {
            let _ = signal_group(pgid, libc::SIGKILL);
        }
    }
}

fn insert_finished(tasks: &mut Tasks, entry: Entry) {
    let id = entry.task.id.to_string();
    tasks.by_id.insert(id.clone(), entry);
    tasks.finished.push_back(id);
    while tasks.finished.len() > KEPT_TASKS {
        if let Some(old) = tasks.finished.pop_front() {
            tasks.by_id.remove(&old);
        }
    }
}

fn visible<'a>(tasks: &'a Tasks, id: &str, viewer: Option<&str>) -> Result<&'a Entry, Lookup> {
    tasks
        .by_id
        .get(id)
        .filter(|entry| viewer.is_none_or(|v| v == entry.owner))
        .ok_or(Lookup::NotFound)
}
