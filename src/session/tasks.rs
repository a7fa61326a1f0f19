//! The task engine: what `message/send` and `SendMessage` start, run by the capsule's handler
//! ([`super::handler`]) under the manifest's lifecycle rules — acceptance, concurrency, queue —
//! and, once finished, kept in [`super::store`] for `tasks/get`, `GetTask` and `ListTasks`. What a task
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
use std::time::{Duration, Instant};

use super::feed::Feed;
use super::handler::{self, CallSocket, MAX_ANSWER, Outcome};
use super::store::Store;
use super::taskdir::{SessionTasks, TaskDir};
use crate::a2a::message::{Message, Part};
use crate::a2a::params;
use crate::a2a::stream::{Chunker, Event};
use crate::a2a::task::{State, Task};
use crate::id::{ContextId, TaskId};
use crate::json::contract::env;
use crate::json::manifest::{Acceptance, Lifecycle};
use crate::sys::child::signal_group;

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

/// A task with what only the engine needs: whose it is, whether it was asked to end, when it
/// came (for listing newest first), its turn and its directory.
struct Entry {
    task: Task,
    /// The credential that started it; only it (and the operator) can see it.
    owner: String,
    cancel: bool,
    seq: u64,
    /// The turn running or next to run: 1 for a new task, one more for each continuation.
    turn: u32,
    /// While input is required: when the task fails for want of it.
    input_until: Option<Instant>,
    /// `MUR_TASK_DIR`, from the first turn until the task ends.
    dir: Option<Arc<TaskDir>>,
    /// The readers streaming it.
    feeds: Vec<Arc<Feed>>,
    /// Whether this turn's answer has been streamed in chunks already.
    chunked: bool,
}

impl Entry {
    /// Move to `state` and tell its readers; a final state also removes the task's directory.
    fn finish(&mut self, state: State, note: Option<String>) {
        self.task.state = state;
        self.task.note = note;
        self.task.updated = crate::time::unix_now();
        if state.is_final()
            && let Some(dir) = self.dir.take()
        {
            dir.remove();
        }
        if state == State::Completed {
            // The chunks streamed were the answer's text: what is left are the files.
            let skip = usize::from(
                self.chunked && matches!(self.task.answer.first(), Some(p) if p.kind() == "text"),
            );
            let mut rest = self.task.answer[skip.min(self.task.answer.len())..].to_vec();
            if rest.is_empty() {
                rest.push(Part::text(""));
            }
            let append = self.chunked;
            self.publish(Event::Artifact {
                parts: rest,
                append,
                last: true,
            });
        }
        self.publish(Event::Status {
            state,
            message: self.task.said(self.turn),
            timestamp: self.task.updated,
            settled: state.is_settled(),
        });
    }

    /// Give `event` to every reader still reading.
    fn publish(&mut self, event: Event) {
        self.feeds.retain(|feed| feed.push(event.clone()));
    }

    /// A new reader: it gets the task as it stands, then what happens next.
    fn watch(&mut self) -> Arc<Feed> {
        let feed = Arc::new(Feed::new(
            self.task.id.to_string(),
            self.task.context_id.clone(),
        ));
        feed.push(Event::Task(self.task.clone()));
        if self.task.state.is_settled() {
            feed.push(Event::Status {
                state: self.task.state,
                message: self.task.said(self.turn),
                timestamp: self.task.updated,
                settled: true,
            });
        } else {
            self.feeds.push(feed.clone());
        }
        feed
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
    /// The task is queued or running; it is not waiting for input.
    Live(State),
    /// The message's `contextId` is not the task's.
    OtherContext,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::NotAccepted(why) | Refused::Busy(why) | Refused::Internal(why) => {
                f.write_str(why)
            }
            Refused::FollowUp(why) => write!(f, "{why:?}"),
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

/// A task taken: its id, and when a stream was asked for, the reader's feed.
pub struct Taken {
    pub id: TaskId,
    pub feed: Option<Arc<Feed>>,
}

/// What one turn of a task runs with.
struct Turn {
    task_id: TaskId,
    context_id: String,
    number: u32,
    /// The message this turn answers.
    message: Message,
    /// Every message before it, both roles.
    earlier: Vec<Message>,
    dir: Option<Arc<TaskDir>>,
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
    /// `~/.murmur/tasks/<session>/`, for a capsule with a handler.
    dirs: Option<SessionTasks>,
    state: Mutex<Tasks>,
    changed: Condvar,
    /// Started with the first handler: SIGKILLs the running handlers' groups if this session
    /// is SIGKILLed.
    reaper: std::sync::OnceLock<Option<crate::sys::child::GroupReaper>>,
}

#[derive(Default)]
struct Tasks {
    /// The tasks queued, running or waiting for input.
    by_id: BTreeMap<String, Entry>,
    finished: Store,
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
        dirs: Option<SessionTasks>,
    ) -> Arc<Self> {
        Arc::new(Self {
            capsule,
            lifecycle,
            base_env,
            extra_env,
            calls,
            dirs,
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
    /// A message naming a `taskId` is that task's next turn, which only a task waiting for input
    /// may take; anything else is refused with why ([`FollowUp`]) and never starts a new task.
    pub fn submit(
        self: &Arc<Self>,
        owner: &str,
        viewer: Option<&str>,
        mut message: Message,
        stream: bool,
    ) -> Result<Taken, Refused> {
        if self.lifecycle.task_acceptance == Acceptance::None {
            return Err(Refused::NotAccepted(
                "this capsule takes no tasks (task_acceptance: none)".into(),
            ));
        }
        if let Some(named) = message.task_id.clone() {
            return self.resume(&named, viewer, message, stream);
        }
        let id = TaskId::mint().map_err(Refused::Internal)?;
        let context_id = match message.context_id.clone() {
            Some(given) => given,
            None => ContextId::mint().map_err(Refused::Internal)?.to_string(),
        };
        message.task_id = Some(id.to_string());
        message.context_id = Some(context_id.clone());
        let mut tasks = self.lock();
        let seq = tasks.next_seq;
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
            turn: 1,
            input_until: None,
            dir: None,
            feeds: Vec::new(),
            chunked: false,
        };
        if let Capsule::Echo = self.capsule {
            if tasks.stopping {
                return Err(Refused::Busy("the session is stopping".into()));
            }
            tasks.next_seq += 1;
            let feed = stream.then(|| entry.watch());
            entry.task.answer = entry.task.history[0].parts.clone();
            entry.finish(State::Completed, None);
            insert_finished(&mut tasks, entry);
            return Ok(Taken { id, feed });
        }
        let start_now = self.admit(&tasks)?;
        tasks.next_seq += 1;
        let feed = stream.then(|| entry.watch());
        tasks.by_id.insert(id.to_string(), entry);
        self.schedule(&mut tasks, id.to_string(), start_now);
        Ok(Taken { id, feed })
    }

    /// Take `message` as the next turn of task `named`, if it waits for input and `viewer` may
    /// see it.
    fn resume(
        self: &Arc<Self>,
        named: &str,
        viewer: Option<&str>,
        mut message: Message,
        stream: bool,
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
        let Some(entry) = tasks.by_id.get_mut(named) else {
            return Err(Refused::FollowUp(FollowUp::NotFound));
        };
        message.context_id = Some(entry.task.context_id.clone());
        entry.task.history.push(message);
        entry.turn += 1;
        entry.input_until = None;
        entry.chunked = false;
        entry.finish(State::Submitted, None);
        let feed = stream.then(|| entry.watch());
        let id = entry.task.id.clone();
        self.schedule(&mut tasks, named.to_string(), start_now);
        Ok(Taken { id, feed })
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

    /// Run one turn of task `id` to its end and record the outcome; then start the next queued
    /// task.
    fn execute(self: Arc<Self>, id: String) {
        let Some(turn) = self.turn_of(&id) else {
            return;
        };
        let (outcome, files) = match &self.capsule {
            Capsule::Echo => (Outcome::Completed(turn.message.text()), Vec::new()),
            Capsule::Handler { argv, workdir } => self.run_turn(&id, argv, workdir, &turn),
        };
        let mut tasks = self.lock();
        tasks.running -= 1;
        if let Some(mut entry) = tasks.by_id.remove(&id) {
            self.record(&mut entry, outcome, files);
            if entry.task.state.is_final() {
                insert_finished(&mut tasks, entry);
            } else {
                tasks.by_id.insert(id, entry);
            }
        }
        if !tasks.stopping
            && let Some(next) = tasks.queue.pop_front()
        {
            self.start(&mut tasks, next);
        }
        self.changed.notify_all();
    }

    /// What one turn of task `id` needs, read under the lock.
    fn turn_of(&self, id: &str) -> Option<Turn> {
        let tasks = self.lock();
        let entry = tasks.by_id.get(id)?;
        let (message, earlier) = entry.task.history.split_last()?;
        Some(Turn {
            task_id: entry.task.id.clone(),
            context_id: entry.task.context_id.clone(),
            number: entry.turn,
            message: message.clone(),
            earlier: earlier.to_vec(),
            dir: entry.dir.clone(),
        })
    }

    /// Run the handler for one turn: its directory written, its environment set, its answer
    /// and the files it left in `out/` (for a completed turn).
    fn run_turn(
        &self,
        id: &str,
        argv: &[String],
        workdir: &std::path::Path,
        turn: &Turn,
    ) -> (Outcome, Vec<Part>) {
        let dir = match self.task_dir(id, turn) {
            Ok(dir) => dir,
            Err(why) => return (Outcome::Failed(why), Vec::new()),
        };
        let mut vars = self.base_env.clone();
        vars.push((env::TASK_ID.into(), turn.task_id.to_string().into()));
        vars.push((env::CONTEXT_ID.into(), turn.context_id.clone().into()));
        vars.push((env::TURN.into(), turn.number.to_string().into()));
        if let Some(dir) = &dir {
            if let Err(why) = dir.write_turn(&turn.message, &turn.earlier) {
                return (Outcome::Failed(why), Vec::new());
            }
            vars.push((env::TASK_DIR.into(), dir.path().into()));
        }
        vars.extend((self.extra_env)());
        // The answer streams to readers as it arrives; what came after the last read (drained
        // once the handler was gone) follows when it ends.
        let mut chunker = Chunker::default();
        let mut sent = 0;
        let mut on_output = |bytes: &[u8]| {
            if let Some(text) = chunker.push(bytes) {
                sent += text.len();
                self.publish_chunk(id, text);
            }
        };
        let outcome = self.run_handler(
            id,
            argv,
            workdir,
            &vars,
            turn.message.text(),
            &mut on_output,
        );
        if let Outcome::Completed(answer) | Outcome::InputRequired(answer) = &outcome
            && let Some(rest) = answer.get(sent..).filter(|rest| !rest.is_empty())
        {
            self.publish_chunk(id, rest.to_string());
        }
        let files = match (&outcome, &dir) {
            (Outcome::Completed(answer), Some(dir)) => {
                let (parts, notes) = dir.collect_out(MAX_ANSWER.saturating_sub(answer.len()));
                for note in notes {
                    crate::cli::warn("run", &format!("task {id}: {note}"));
                }
                parts
            }
            _ => Vec::new(),
        };
        (outcome, files)
    }

    /// Task `id`'s directory: the one its first turn made, or a new one; `None` for a session
    /// that has none (its home could not hold them).
    fn task_dir(&self, id: &str, turn: &Turn) -> Result<Option<Arc<TaskDir>>, String> {
        if let Some(dir) = &turn.dir {
            return Ok(Some(dir.clone()));
        }
        let Some(dirs) = &self.dirs else {
            return Ok(None);
        };
        let dir = Arc::new(dirs.task(id)?);
        if let Some(entry) = self.lock().by_id.get_mut(id) {
            entry.dir = Some(dir.clone());
        }
        Ok(Some(dir))
    }

    /// Record how a turn ended. A question keeps the task (its directory too) for the next
    /// turn, holding no slot, until the input timeout.
    fn record(&self, entry: &mut Entry, outcome: Outcome, files: Vec<Part>) {
        match outcome {
            Outcome::Completed(answer) => {
                let mut parts = Vec::new();
                if !answer.is_empty() || files.is_empty() {
                    parts.push(Part::text(answer));
                }
                parts.extend(files);
                entry.task.answer = parts;
                entry.finish(State::Completed, None);
            }
            Outcome::InputRequired(question) => {
                entry.task.answer = vec![Part::text(question)];
                entry.finish(State::InputRequired, None);
                entry.task.history.extend(entry.task.said(entry.turn));
                let wait = Duration::from_secs(self.lifecycle.input_timeout_secs);
                entry.input_until = Some(Instant::now() + wait);
            }
            Outcome::Failed(why) => entry.finish(State::Failed, Some(why)),
            Outcome::Canceled => entry.finish(State::Canceled, Some("canceled".into())),
        }
    }

    /// Stream a piece of task `id`'s answer to its readers.
    fn publish_chunk(&self, id: &str, text: String) {
        let mut tasks = self.lock();
        if let Some(entry) = tasks.by_id.get_mut(id) {
            let append = entry.chunked;
            entry.chunked = true;
            entry.publish(Event::Artifact {
                parts: vec![Part::text(text)],
                append,
                last: false,
            });
        }
    }

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

    /// Fail every task whose input timeout has passed.
    fn expire_inputs(&self, tasks: &mut Tasks) {
        let now = Instant::now();
        let expired: Vec<String> = tasks
            .by_id
            .iter()
            .filter(|(_, e)| e.input_until.is_some_and(|until| until <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            if let Some(mut entry) = tasks.by_id.remove(&id) {
                entry.input_until = None;
                let why = format!(
                    "no input within {}s (lifecycle.input_timeout_secs)",
                    self.lifecycle.input_timeout_secs
                );
                entry.finish(State::Failed, Some(why));
                insert_finished(tasks, entry);
                self.changed.notify_all();
            }
        }
    }

    /// Fail the tasks whose input timeout has passed (the session's watch loop calls this).
    pub fn expire(&self) {
        let mut tasks = self.lock();
        self.expire_inputs(&mut tasks);
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
        on_output: &mut dyn FnMut(&[u8]),
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
            Some(Err(_)) => handler::supervise(&mut child, Vec::new(), timeout, || true, on_output),
            _ => handler::supervise(
                &mut child,
                text.into_bytes(),
                timeout,
                || self.lock().by_id.get(id).is_some_and(|e| e.cancel),
                on_output,
            ),
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

    /// Wait until task `id` has ended or asks for input; the task.
    pub fn wait(&self, id: &TaskId) -> Option<Task> {
        let mut tasks = self.lock();
        loop {
            match tasks.by_id.get(id.as_str()) {
                Some(entry) if entry.task.state.is_settled() => return Some(entry.task.clone()),
                Some(_) => {}
                None => return tasks.finished.get(id.as_str()),
            }
            tasks = self.changed.wait(tasks).unwrap_or_else(|p| p.into_inner());
        }
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
            .filter(|r| query.state.is_none_or(|s| s == r.state))
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

    /// Ask a live task to end: a queued one or one waiting for input ends at once, a running
    /// one through its handler's process group (SIGTERM, SIGKILL 2 s later).
    pub fn cancel(&self, id: &str, viewer: Option<&str>) -> Result<Task, Lookup> {
        let mut tasks = self.lock();
        self.expire_inputs(&mut tasks);
        let state = visible(&tasks, id, viewer)?.state;
        if state.is_final() {
            return Err(Lookup::Ended(state));
        }
        let queued = tasks.queue.iter().position(|q| q == id);
        if let Some(pos) = queued {
            tasks.queue.remove(pos);
        }
        if (queued.is_some() || state == State::InputRequired)
            && let Some(mut entry) = tasks.by_id.remove(id)
        {
            entry.finish(State::Canceled, Some("canceled".into()));
            let task = entry.task.clone();
            insert_finished(&mut tasks, entry);
            self.changed.notify_all();
            return Ok(task);
        }
        let entry = tasks.by_id.get_mut(id).ok_or(Lookup::NotFound)?;
        entry.cancel = true;
        Ok(entry.task.clone())
    }

    /// Stop taking tasks, end every queued one and every one waiting for input, and ask every
    /// running one to end (its handler's group gets SIGTERM, then SIGKILL 2 s later).
    pub fn begin_shutdown(&self) {
        let mut tasks = self.lock();
        tasks.stopping = true;
        let mut idle: Vec<String> = tasks.queue.drain(..).collect();
        idle.extend(
            tasks
                .by_id
                .iter()
                .filter(|(_, e)| e.task.state == State::InputRequired)
                .map(|(id, _)| id.clone()),
        );
        for id in idle {
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
    /// told so and reaped, so nothing this session started outlives it; and the session's task
    /// directories go.
    pub fn finish_reaper(&self) {
        if let Some(reaper) = self.reaper.get().and_then(Option::as_ref) {
            reaper.finish();
        }
        if let Some(dirs) = &self.dirs {
            dirs.remove();
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
    tasks.finished.insert(&entry.task, entry.owner, entry.seq);
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
struct Seen<'a> {
    state: State,
    context_id: &'a str,
}

/// Task `id`, live or finished, if `viewer` may see it (`None` sees every task).
fn visible<'a>(tasks: &'a Tasks, id: &str, viewer: Option<&str>) -> Result<Seen<'a>, Lookup> {
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
