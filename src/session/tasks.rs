//! Tasks: what `message/send` starts, run by the capsule's handler under the manifest's
//! lifecycle rules, and kept (the newest 1,000 finished) for `tasks/get`.
//!
//! The handler contract: argv from `run`, cwd the workdir, the task's text parts joined by
//! newlines on stdin, `MUR_SESSION_ID`, `MUR_TASK_ID`, `MUR_CONTEXT_ID`, `MUR_CAPSULE` and the
//! control values currently set in the environment. Its stdout (up to 4 MiB; one trailing newline
//! dropped) is the answer; exit 0 is `completed`, anything else `failed` with the tail of its
//! stderr. Each handler leads its own process group; on timeout or cancel the group gets SIGTERM,
//! then SIGKILL 2 s later, and after the leader exits any straggler in the group is killed before
//! the leader is reaped, so nothing a handler started outlives its task.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::id::{ContextId, TaskId};
use crate::json::manifest::{Acceptance, Lifecycle};
use crate::sys::child::{ChildWatch, Pump, signal_group};

/// The most of a handler's stdout kept as its answer.
pub const MAX_ANSWER: usize = 4 << 20;
/// How much of a failed handler's stderr is reported.
const STDERR_TAIL: usize = 2048;
/// Between SIGTERM and SIGKILL for a timed-out or canceled handler.
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// Finished tasks kept for `tasks/get`.
pub const KEPT_TASKS: usize = 1000;
/// How long a finished handler's pipes are read for after its group is gone: enough for what
/// is already in them; a process that escaped the group and holds them open is not waited for.
const DRAIN_GRACE: Duration = Duration::from_millis(200);
/// How often a running handler's task looks at its cancel flag and deadline.
const WATCH_TICK: Duration = Duration::from_millis(25);

/// What runs a task.
#[derive(Debug, Clone)]
pub enum Capsule {
    /// The embedded `echo` capsule: the answer is the text.
    Echo,
    /// A handler process: resolved argv, run in `workdir`.
    Handler { argv: Vec<String>, workdir: PathBuf },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Submitted,
    Working,
    Completed,
    Failed,
    Canceled,
}

impl State {
    fn wire(self) -> &'static str {
        match self {
            State::Submitted => "submitted",
            State::Working => "working",
            State::Completed => "completed",
            State::Failed => "failed",
            State::Canceled => "canceled",
        }
    }

    pub fn is_final(self) -> bool {
        matches!(self, State::Completed | State::Failed | State::Canceled)
    }
}

struct Task {
    id: TaskId,
    context_id: String,
    /// The credential that started it; only it (and the operator) can see it.
    owner: String,
    message: Value,
    text: String,
    state: State,
    /// The answer (completed) or what went wrong (failed, canceled).
    outcome: Option<String>,
    updated: i64,
    cancel: bool,
}

impl Task {
    fn render(&self) -> Value {
        let mut status = json!({"state": self.state.wire(), "timestamp": crate::time::format_rfc3339(self.updated)});
        if let Some(text) = &self.outcome {
            status["message"] = json!({
                "kind": "message", "role": "agent", "messageId": format!("msg_{}", self.id.hex()),
                "taskId": self.id, "contextId": self.context_id,
                "parts": [{"kind": "text", "text": text}],
            });
        }
        let mut task = json!({
            "kind": "task", "id": self.id, "contextId": self.context_id,
            "status": status, "history": [self.message],
        });
        if self.state == State::Completed {
            task["artifacts"] = json!([{"artifactId": format!("art_{}", self.id.hex()), "name": "answer",
                "parts": [{"kind": "text", "text": self.outcome.as_deref().unwrap_or("")}]}]);
        }
        task
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
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::NotAccepted(why) | Refused::Busy(why) | Refused::Internal(why) => {
                f.write_str(why)
            }
        }
    }
}

/// A task another caller may not see is reported exactly like one that does not exist.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    NotFound,
    NotCancelable(String),
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
    by_id: BTreeMap<String, Task>,
    finished: VecDeque<String>,
    queue: VecDeque<String>,
    running: u32,
    stopping: bool,
    /// Process group of each running handler, by task id, present from spawn until just before
    /// the leader is reaped: while it is here, its pgid can name nothing but that handler's group.
    groups: BTreeMap<String, u32>,
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

    /// Start (or queue) a task for `owner`; its id.
    pub fn submit(
        self: &Arc<Self>,
        owner: &str,
        message: Value,
        text: String,
        context: Option<String>,
    ) -> Result<TaskId, Refused> {
        if self.lifecycle.task_acceptance == Acceptance::None {
            return Err(Refused::NotAccepted(
                "this capsule takes no tasks (task_acceptance: none)".into(),
            ));
        }
        let id = TaskId::mint().map_err(Refused::Internal)?;
        let context_id = match context {
            Some(given) => given,
            None => ContextId::mint().map_err(Refused::Internal)?.to_string(),
        };
        let mut task = Task {
            id: id.clone(),
            context_id,
            owner: owner.to_string(),
            message,
            text,
            state: State::Submitted,
            outcome: None,
            updated: crate::time::unix_now(),
            cancel: false,
        };
        let mut tasks = self.lock();
        if tasks.stopping {
            return Err(Refused::Busy("the session is stopping".into()));
        }
        if let Capsule::Echo = self.capsule {
            task.state = State::Completed;
            task.outcome = Some(task.text.clone());
            insert_finished(&mut tasks, task);
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
        tasks.by_id.insert(id.to_string(), task);
        if start_now {
            self.start(&mut tasks, id.to_string());
        }
        Ok(id)
    }

    /// Mark `id` working and run it on a thread of its own.
    fn start(self: &Arc<Self>, tasks: &mut Tasks, id: String) {
        tasks.running += 1;
        if let Some(task) = tasks.by_id.get_mut(&id) {
            task.state = State::Working;
            task.updated = crate::time::unix_now();
        }
        let engine = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("task".into())
            .stack_size(256 * 1024)
            .spawn(move || engine.execute(id));
        if spawned.is_err() {
            tasks.running -= 1;
        }
    }

    /// Run one task's handler to its end and record the outcome; then start the next queued one.
    fn execute(self: Arc<Self>, id: String) {
        let (text, task_id, context_id) = {
            let tasks = self.lock();
            let Some(task) = tasks.by_id.get(&id) else {
                return;
            };
            (task.text.clone(), task.id.clone(), task.context_id.clone())
        };
        let (state, outcome) = match &self.capsule {
            Capsule::Echo => (State::Completed, text),
            Capsule::Handler { argv, workdir } => {
                let mut env = self.base_env.clone();
                env.push(("MUR_TASK_ID".into(), task_id.to_string().into()));
                env.push(("MUR_CONTEXT_ID".into(), context_id.into()));
                env.extend((self.extra_env)());
                self.run_handler(&id, argv, workdir, &env, text)
            }
        };
        let mut tasks = self.lock();
        tasks.running -= 1;
        if let Some(mut task) = tasks.by_id.remove(&id) {
            task.state = state;
            task.outcome = Some(outcome);
            task.updated = crate::time::unix_now();
            insert_finished(&mut tasks, task);
        }
        if !tasks.stopping
            && let Some(next) = tasks.queue.pop_front()
        {
            self.start(&mut tasks, next);
        }
        self.changed.notify_all();
    }

    fn run_handler(
        &self,
        id: &str,
        argv: &[String],
        workdir: &PathBuf,
        env: &[(String, OsString)],
        text: String,
    ) -> (State, String) {
        let mut command = Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .env_remove("MURMUR_FORMATION_LIFELINE")
            .env_remove("MURMUR_FORMATION_CHANNEL")
            .env_remove(super::member::CALL_FD_ENV)
            .env_remove("NOTIFY_SOCKET")
            .current_dir(workdir)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        // A SIGKILLed session runs no teardown: the kernel ends its handler instead. This task
        // thread spawns the handler and waits for it, so it lives exactly as long as needed.
        crate::sys::child::die_with_parent(&mut command);
        // A call socket of its own, inherited by this handler alone (both ends close-on-exec;
        // the flag is cleared on the handler's end in the handler only).
        let call_socket = match &self.calls {
            Some(service) => match std::os::unix::net::UnixStream::pair() {
                Ok((ours, theirs)) => {
                    use std::os::fd::AsRawFd;
                    command.env(super::member::CALL_FD_ENV, theirs.as_raw_fd().to_string());
                    crate::sys::pipe::keep_open_in_child(&mut command, vec![theirs.as_raw_fd()]);
                    Some((service.clone(), ours, theirs))
                }
                Err(err) => {
                    return (
                        State::Failed,
                        format!("no call socket for the handler: {err}"),
                    );
                }
            },
            None => None,
        };
        // Spawned and registered under the engine's lock, so an orphan sweep never mistakes a
        // handler that has just started for an orphan.
        let reaper = self
            .reaper
            .get_or_init(crate::sys::child::GroupReaper::start);
        let spawned = {
            let mut tasks = self.lock();
            command.spawn().inspect(|child| {
                tasks.groups.insert(id.to_string(), child.id());
                if let Some(reaper) = reaper {
                    reaper.watch(child.id());
                }
            })
        };
        let call_socket = call_socket.map(|(service, ours, theirs)| {
            drop(theirs);
            let closer = ours.try_clone().ok();
            (std::thread::spawn(move || service(ours)), closer)
        });
        let mut child = match spawned {
            Ok(child) => child,
            Err(err) => {
                return (
                    State::Failed,
                    format!("the handler {} could not start: {err}", argv[0]),
                );
            }
        };
        let pgid = child.id();
        let watch = ChildWatch::new(pgid);
        let mut pump = Pump::new(&mut child, text.into_bytes(), MAX_ANSWER, STDERR_TAIL);
        let deadline = Instant::now() + Duration::from_secs(self.lifecycle.task_timeout_secs);
        let mut term_sent: Option<Instant> = None;
        let mut why_ended: Option<State> = None;
        while !pump.step(&watch, WATCH_TICK) {
            let canceled = self.lock().by_id.get(id).is_some_and(|t| t.cancel);
            if term_sent.is_none() && (canceled || Instant::now() >= deadline) {
                why_ended = Some(if canceled {
                    State::Canceled
                } else {
                    State::Failed
                });
                let _ = signal_group(pgid, libc::SIGTERM);
                term_sent = Some(Instant::now());
            }
            if term_sent.is_some_and(|at| at.elapsed() >= KILL_GRACE) {
                let _ = signal_group(pgid, libc::SIGKILL);
            }
        }
        // The leader has exited and is not reaped: its pgid still names only its group.
        let _ = signal_group(pgid, libc::SIGKILL);
        if let Some(reaper) = reaper {
            reaper.unwatch(pgid);
        }
        let status = child.wait();
        self.lock().groups.remove(id);
        pump.drain(DRAIN_GRACE);
        if let Some((call_thread, closer)) = call_socket {
            // A process that escaped the group may hold the handler's end open: close ours.
            if let Some(closer) = closer {
                let _ = closer.shutdown(std::net::Shutdown::Both);
            }
            let _ = call_thread.join();
        }
        self.sweep_orphans();
        let (answer, stderr_tail) = (pump.out, pump.err_tail);
        match why_ended {
            Some(State::Canceled) => (State::Canceled, "canceled".into()),
            Some(_) => (
                State::Failed,
                format!("timed out after {}s", self.lifecycle.task_timeout_secs),
            ),
            None => match status {
                Ok(status) if status.success() => {
                    let mut answer = String::from_utf8_lossy(&answer).into_owned();
                    if answer.ends_with('\n') {
                        answer.pop();
                    }
                    (State::Completed, answer)
                }
                Ok(status) => {
                    let how = match (status.code(), status.signal()) {
                        (Some(code), _) => format!("the handler exited with code {code}"),
                        (_, Some(signal)) => format!("the handler was killed by signal {signal}"),
                        _ => "the handler failed".into(),
                    };
                    let tail = String::from_utf8_lossy(&stderr_tail);
                    let tail = tail.trim_end();
                    (
                        State::Failed,
                        if tail.is_empty() {
                            how
                        } else {
                            format!("{how}: {tail}")
                        },
                    )
                }
                Err(err) => (
                    State::Failed,
                    format!("the handler could not be waited on: {err}"),
                ),
            },
        }
    }

    /// Wait until task `id` has ended (or the session stops waiting for tasks); its rendering.
    pub fn wait(&self, id: &TaskId) -> Option<Value> {
        let mut tasks = self.lock();
        loop {
            let task = tasks.by_id.get(id.as_str())?;
            if task.state.is_final() {
                return Some(task.render());
            }
            tasks = self.changed.wait(tasks).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The task as `viewer` may see it: `None` sees every task (the operator), `Some(owner)` only
    /// its own.
    pub fn get(&self, id: &str, viewer: Option<&str>) -> Result<Value, Lookup> {
        let tasks = self.lock();
        visible(&tasks, id, viewer).map(Task::render)
    }

    /// Ask a live task to end: a queued one ends at once, a running one through its handler's
    /// process group (SIGTERM, SIGKILL 2 s later).
    pub fn cancel(&self, id: &str, viewer: Option<&str>) -> Result<Value, Lookup> {
        let mut tasks = self.lock();
        let state = visible(&tasks, id, viewer)?.state;
        if state.is_final() {
            return Err(Lookup::NotCancelable(format!(
                "task {id} has already ended ({})",
                state.wire()
            )));
        }
        if let Some(pos) = tasks.queue.iter().position(|q| q == id) {
            tasks.queue.remove(pos);
            if let Some(mut task) = tasks.by_id.remove(id) {
                task.state = State::Canceled;
                task.outcome = Some("canceled".into());
                task.updated = crate::time::unix_now();
                let rendered = task.render();
                insert_finished(&mut tasks, task);
                self.changed.notify_all();
                return Ok(rendered);
            }
        }
        let task = tasks.by_id.get_mut(id).ok_or(Lookup::NotFound)?;
        task.cancel = true;
        Ok(task.render())
    }

    /// Stop taking tasks, end every queued one and ask every running one to end (its handler's
    /// group gets SIGTERM, then SIGKILL 2 s later).
    pub fn begin_shutdown(&self) {
        let mut tasks = self.lock();
        tasks.stopping = true;
        let queued: Vec<String> = tasks.queue.drain(..).collect();
        for id in queued {
            if let Some(mut task) = tasks.by_id.remove(&id) {
                task.state = State::Canceled;
                task.outcome = Some("canceled: the session stopped".into());
                task.updated = crate::time::unix_now();
                insert_finished(&mut tasks, task);
            }
        }
        for task in tasks.by_id.values_mut() {
            task.cancel = true;
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
    pub fn sweep_orphans(&self) {
        let tasks = self.lock();
        let reaper = self.reaper.get().and_then(Option::as_ref).map(|r| r.pid());
        for pid in crate::sys::child::children() {
            if Some(pid) != reaper && !tasks.groups.values().any(|&leader| leader == pid) {
                crate::sys::child::kill_and_reap_orphan(pid);
            }
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

fn insert_finished(tasks: &mut Tasks, task: Task) {
    let id = task.id.to_string();
    tasks.by_id.insert(id.clone(), task);
    tasks.finished.push_back(id);
    while tasks.finished.len() > KEPT_TASKS {
        if let Some(old) = tasks.finished.pop_front() {
            tasks.by_id.remove(&old);
        }
    }
}

fn visible<'a>(tasks: &'a Tasks, id: &str, viewer: Option<&str>) -> Result<&'a Task, Lookup> {
    tasks
        .by_id
        .get(id)
        .filter(|task| viewer.is_none_or(|v| v == task.owner))
        .ok_or(Lookup::NotFound)
}
