//! What leaves the engine: every event to every watcher of the whole session, and what the
//! holder of the engine lock leaves to be done once it is released ([`Due`]).
//!
//! The engine lock is a leaf held only for memory. Whatever may wait on the world — a wake-up
//! (re-arming an epoll set), a log line (a file, a pipe), a thread's spawn, a rename or removal
//! of a task's directory — is collected under the lock and done after it is released, by the
//! guard itself ([`Locked`]'s drop), so no path can forget it and none can do it early.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, MutexGuard};
use std::task::Waker;
use std::time::Duration;

use super::super::feed::{Bounded, Sight};
use super::super::journal::Pending;
use super::super::log;
use super::super::push::Push;
use super::super::taskdir::TaskDir;
use super::{Engine, Refused, Tasks};
use crate::a2a::push::Config;

/// What every watcher of the session reads: a bounded queue of sightings each
/// ([`super::super::watch`]).
pub type Sightings = Bounded<Arc<Sight>>;

/// The engine's outward side, under its lock.
#[derive(Default)]
pub(super) struct Outbox {
    /// The watchers of the whole session; one cut (too far behind) or gone is forgotten at the
    /// next sighting.
    pub(super) watchers: Vec<Arc<Sightings>>,
    /// Push notifications, when on: every task event is queued for the task's webhooks.
    pub(super) push: Option<Arc<Push>>,
    pub(super) due: Due,
}

/// What to do once the engine lock is released, in this order: entries written to the task
/// journal, directories off their paths, log lines written to the log, waiters woken, turns
/// started, directories recycled (and counted so, under the lock again), the log lines said on
/// stderr, the wind-down told the engine is idle.
#[derive(Default)]
pub(super) struct Due {
    /// Tasks started and ended, for a named session's journal: written before anyone is woken.
    pub(super) journal: Vec<Pending>,
    /// Directories of ended tasks, to take off their paths and recycle or remove.
    pub(super) retired: Vec<Arc<TaskDir>>,
    pub(super) wakes: Vec<Waker>,
    /// Whether the thread releasing the lock may serve the connections it wakes itself (a
    /// task's thread at its turn's end: it holds nothing else, and its answer is what they
    /// wait for).
    pub(super) serve_here: bool,
    /// Task events for the log: the task's id and the session's words.
    pub(super) logs: Vec<(String, String)>,
    /// Tasks marked working whose thread is to be started.
    pub(super) starts: Vec<String>,
    /// The last running task ended: the wind-down's wait may end.
    pub(super) idle: bool,
}

impl Outbox {
    /// Set `config` on new or continued task `task_id`, when push notifications are on: under
    /// the engine lock, before the task's next event, so its receiver misses none. An https one
    /// is said in the task's log, once the lock is released.
    pub(super) fn set_push(
        &mut self,
        task_id: &str,
        config: Option<Config>,
    ) -> Result<(), Refused> {
        let (Some(push), Some(mut config)) = (&self.push, config) else {
            return Ok(());
        };
        config.name_for(task_id);
        let said = super::super::push::undeliverable(&config);
        push.set(task_id, config, false)
            .map_err(|refused| Refused::Memory(refused.to_string()))?;
        if let Some(line) = said {
            self.due.logs.push((task_id.to_string(), line));
        }
        Ok(())
    }

    /// Tell every watcher the sighting `made` makes (made only when someone watches); a
    /// watcher whose queue is over is forgotten.
    pub(super) fn sight(&mut self, made: impl FnOnce() -> Sight) {
        if self.watchers.is_empty() {
            return;
        }
        let sight = Arc::new(made());
        let wakes = &mut self.due.wakes;
        self.watchers.retain(|w| w.push(sight.clone(), wakes));
    }
}

/// The engine lock, held: what was left [`Due`] under it is done when it is dropped, after the
/// lock is released.
pub(super) struct Locked<'a> {
    pub(super) engine: &'a Engine,
    pub(super) guard: Option<MutexGuard<'a, Tasks>>,
}

impl Deref for Locked<'_> {
    type Target = Tasks;

    fn deref(&self) -> &Tasks {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Tasks {
        self.guard.as_mut().expect("held until dropped")
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let Some(mut guard) = self.guard.take() else {
            return;
        };
        let due = std::mem::take(&mut guard.out.due);
        drop(guard);
        self.engine.carry_out(due);
    }
}

impl Engine {
    /// Do what was left due under the lock, which is no longer held.
    fn carry_out(&self, due: Due) {
        // First: a client told a task ended finds it after a crash too.
        self.write_journal(due.journal);
        due.retired.iter().for_each(|dir| dir.retire());
        // The log before the wakes: a caller who has a task's answer finds its end in `mur
        // logs` too. Their stderr lines wait until the end of this, below.
        for (task, text) in &due.logs {
            log::event_later(task, text);
        }
        let woke = !due.wakes.is_empty();
        if due.serve_here {
            crate::net::server::wake_here(due.wakes);
        } else {
            due.wakes.into_iter().for_each(Waker::wake);
        }
        for id in due.starts {
            self.spawn(id);
        }
        // What is left here waits for nobody; a door worker just woken to send an answer — or,
        // when this thread sent it itself, the client it woke, most often on this very CPU — would
        // wait behind it (40 µs of the answer's way on two CPUs, `perf sched`; without it, the
        // answer written here measured slower than one handed to a worker): it goes first.
        if woke && !(due.retired.is_empty() && due.logs.is_empty()) {
            std::thread::yield_now();
        }
        if let Some(dirs) = &self.dirs {
            due.retired.iter().for_each(|dir| dirs.recycle(dir));
        }
        let recycled = !due.retired.is_empty() && {
            // Nothing is changed under this guard but the count, so nothing falls due.
            let mut tasks = self.state.lock().unwrap_or_else(|p| p.into_inner());
            tasks.recycling -= due.retired.len();
            tasks.running == 0 && tasks.recycling == 0
        };
        // Their stderr lines now (a turn's start's too), in one wake-up of the stderr writer
        // that no waiter and no directory waited behind.
        if !due.logs.is_empty() {
            crate::cli::flush_stderr(Duration::ZERO);
        }
        // Last: the wind-down that wakes may remove the log and the task directories.
        if due.idle || recycled {
            self.idle.notify_all();
        }
    }
}
