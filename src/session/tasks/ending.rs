//! Ending tasks before their handler does: input timeouts, a client's cancel, and the
//! session's wind-down (cancel everything, then wait for the last turn to settle).

use std::time::{Duration, Instant};

use super::super::log;
use super::query::visible;
use super::{Engine, Lookup, Tasks, insert_finished};
use crate::a2a::task::{State, Task};

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
                log::event(&id, &format!("failed: {why}"));
                entry.move_to(State::Failed, Some(why));
                insert_finished(tasks, entry);
                self.changed.notify_all();
            }
        }
    }

    /// Fail the tasks whose input timeout has passed (the session's watch loop calls this).
    pub fn expire(&self) {
        let mut tasks = self.lock();
        self.expire_inputs(&mut tasks);
        drop(tasks);
        self.remove_retired();
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
            entry.move_to(State::Canceled, Some("canceled".into()));
            let task = entry.task.clone();
            insert_finished(&mut tasks, entry);
            self.changed.notify_all();
            drop(tasks);
            self.remove_retired();
            return Ok(task);
        }
        let entry = tasks.by_id.get_mut(id).ok_or(Lookup::NotFound)?;
        entry.cancel = true;
        // Answered once the turn has ended — its processes gone — and the task with it: a
        // cancel taken while the turn runs always ends it `canceled` ([`Engine::record`]).
        let settled = entry.settled.clone();
        drop(tasks);
        Ok(self.wait(&settled))
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
                entry.move_to(
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
        drop(tasks);
        self.remove_retired();
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
}
