//! Ending tasks before their handler does: input timeouts, a client's cancel, and the
//! session's wind-down (cancel everything, then wait for the last turn to settle).

use std::time::{Duration, Instant};

use super::query::visible;
use super::{Engine, Lookup, Settled, Tasks, insert_finished};
use crate::a2a::task::{State, Task};

/// A cancel taken.
pub enum Canceled {
    /// The task ended at once (it was queued, or waiting for input).
    Done(Task),
    /// Its running turn was asked to end (its handler's group gets SIGTERM, SIGKILL 2 s later):
    /// the task as it settles — `canceled`, its processes gone — is the claim's. Nothing
    /// waits here: the caller polls the claim, or waits on it off the door's workers.
    Cancelling(Settled),
}

impl Engine {
    /// Fail every task whose input timeout has passed.
    pub(super) fn expire_inputs(&self, tasks: &mut Tasks) {
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
                tasks.out.due.logs.push((id, format!("failed: {why}")));
                entry.move_to(State::Failed, Some(why), &mut tasks.out);
                insert_finished(tasks, entry);
            }
        }
    }

    /// Fail the tasks whose input timeout has passed (the session's watch loop calls this).
    pub fn expire(&self) {
        self.expire_inputs(&mut self.lock());
    }

    /// Ask a live task to end: a queued one or one waiting for input ends at once, a running
    /// one through its handler's process group (SIGTERM, SIGKILL 2 s later) — never waited for
    /// here ([`Canceled::Cancelling`]).
    pub fn cancel(&self, id: &str, viewer: Option<&str>) -> Result<Canceled, Lookup> {
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
            entry.move_to(State::Canceled, Some("canceled".into()), &mut tasks.out);
            let task = entry.task.clone();
            insert_finished(&mut tasks, entry);
            return Ok(Canceled::Done(task));
        }
        let entry = tasks.by_id.get_mut(id).ok_or(Lookup::NotFound)?;
        entry.cancel = true;
        // Answered once the turn has ended — its processes gone — and the task with it: a
        // cancel taken while the turn runs always ends it `canceled` ([`Engine::record`]).
        Ok(Canceled::Cancelling(entry.settled.clone()))
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
                let why = Some("canceled: the session stopped".into());
                entry.move_to(State::Canceled, why, &mut tasks.out);
                insert_finished(&mut tasks, entry);
            }
        }
        for entry in tasks.by_id.values_mut() {
            entry.cancel = true;
        }
        // The watchers read what happened up to now, then their stream ends (`capsule-closed`).
        let out = &mut tasks.out;
        for watcher in out.watchers.drain(..) {
            watcher.finish(&mut out.due.wakes);
        }
    }

    /// Whether no task is running and no ended task's directory is still being recycled,
    /// waiting at most `timeout` for the last to end: woken only when the engine goes idle,
    /// never by each task's end.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        // Nothing is changed under this guard, so nothing falls due ([`super::outbox`]).
        let tasks = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (tasks, _) = self
            .idle
            .wait_timeout_while(tasks, timeout, |t| t.running > 0 || t.recycling > 0)
            .unwrap_or_else(|p| p.into_inner());
        tasks.running == 0 && tasks.recycling == 0
    }
}
