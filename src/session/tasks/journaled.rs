//! The engine's side of a named session's task store ([`crate::session::journal`]): the tasks a
//! session started again finds, and the entries each task's start and end leave due.

use std::sync::Arc;

use super::super::budget::Charge;
use super::super::journal::format::Kind;
use super::super::journal::{self, Journal, Pending, Restored};
use super::super::store::Summary;
use super::live::{self, LiveTask};
use super::{Engine, Tasks};
use crate::a2a::task::Task;

impl Engine {
    /// Open the task store of instance name `name`, if the session has one, and take what it
    /// holds (`Engine::restore`). Called once the name is claimed (so one session at a time
    /// writes its store) and before the door opens. The `Err`: the store is not `capsule`'s.
    pub fn restore_named(
        self: &Arc<Self>,
        name: Option<&str>,
        capsule: &str,
    ) -> Result<(), String> {
        let retry = self.lifecycle.retry_interrupted;
        if let Some(name) = name
            && let Some((journal, restored)) = journal::open(name, capsule, retry)?
        {
            self.restore(journal, restored);
        }
        Ok(())
    }

    /// Take the tasks `restored` from the store as finished ones, queue again those to retry,
    /// and journal every task from now on in `journal`. Called once, before the door opens:
    /// arrival numbers continue after the newest restored, so listing stays newest first
    /// across the restart.
    fn restore(self: &Arc<Self>, journal: Journal, restored: Restored) {
        if self.journal.set(journal).is_err() {
            return;
        }
        let count = restored.tasks.len() + restored.retried.len() + restored.waiting.len();
        let waiting = restored.waiting.len();
        let mut tasks = self.lock();
        for (id, summary, body) in restored.tasks {
            tasks.next_seq = tasks.next_seq.max(summary.seq.saturating_add(1));
            tasks.finished.keep(id, summary, body);
        }
        for (task, summary, turn) in restored.retried {
            tasks.next_seq = tasks.next_seq.max(summary.seq.saturating_add(1));
            self.retry(&mut tasks, task, summary, turn);
        }
        for (task, summary, turn) in restored.waiting {
            tasks.next_seq = tasks.next_seq.max(summary.seq.saturating_add(1));
            self.park(&mut tasks, task, summary, turn);
        }
        tasks.journaling = true;
        drop(tasks);
        if count > 0 {
            let interrupted = match restored.interrupted {
                0 => String::new(),
                n if self.lifecycle.retry_interrupted => format!(
                    ", {n} of them queued again: they were running when the last session ended"
                ),
                n => format!(", {n} of them failed: they were running when the last session ended"),
            };
            let waiting = match waiting {
                0 => String::new(),
                n => format!(", {n} of them waiting for input again"),
            };
            crate::cli::warn(
                "run",
                &format!("{count} task(s) restored from the task store{interrupted}{waiting}"),
            );
        }
    }

    /// Hold `task` again as waiting for input at turn `turn`, as it was when the last session
    /// ended: its history kept, its wait for input begun anew. Counted in the budget, never
    /// refused: it was taken before.
    fn park(&self, tasks: &mut Tasks, task: Task, summary: Summary, turn: u32) {
        let charge = Charge::new(&self.budget);
        charge.force(live::weight(&task, self.on_disk) + super::ENTRY_OVERHEAD);
        let id = task.id.to_string();
        let mut entry = LiveTask::new(task, summary.owner, summary.seq, charge);
        entry.turn = turn;
        let wait = std::time::Duration::from_secs(self.lifecycle.input_timeout_secs);
        entry.input_until = Some(std::time::Instant::now() + wait);
        tasks.by_id.insert(id, entry);
    }

    /// Queue `task` again as its turn `turn` was taken — a turn that never finished — started
    /// at once when a slot is free. Counted in the budget, and queued past the queue's depth if
    /// need be: it was taken before, and is never refused now.
    fn retry(self: &Arc<Self>, tasks: &mut Tasks, mut task: Task, summary: Summary, turn: u32) {
        let charge = Charge::new(&self.budget);
        charge.force(live::weight(&task, self.on_disk) + super::ENTRY_OVERHEAD);
        task.answer.clear();
        let id = task.id.to_string();
        let mut entry = LiveTask::new(task, summary.owner, summary.seq, charge);
        entry.turn = turn;
        tasks.by_id.insert(id.clone(), entry);
        let start_now = self.admit(tasks).unwrap_or(false);
        self.schedule(tasks, id, start_now);
    }

    /// Sync and close the journal, if there is one: the session ends in order.
    pub(super) fn close_journal(&self) {
        if let Some(journal) = self.journal.get() {
            journal.close();
        }
    }

    /// Write what is due to the journal: once the engine lock is released, before anyone
    /// waiting on these tasks is woken.
    pub(super) fn write_journal(&self, pending: Vec<Pending>) {
        if let Some(journal) = self.journal.get()
            && !pending.is_empty()
        {
            journal.append(pending);
        }
    }
}

impl Tasks {
    /// Leave `entry` as it stands due for the journal, when there is one.
    pub(super) fn journal_live(&mut self, entry: &LiveTask, kind: Kind) {
        if self.journaling {
            self.out.due.journal.push(live_entry(entry, kind));
        }
    }

    /// Leave task `id`'s end due for the journal, when there is one: its `body` as the store of
    /// finished tasks keeps it (still kept: not evicted at once for its size).
    pub(super) fn journal_end(&mut self, id: &str, body: Option<Arc<[u8]>>) {
        if !self.journaling {
            return;
        }
        if let Some(body) = body
            && let Some(summary) = self.finished.summary(id).cloned()
        {
            self.out.due.journal.push(Pending::Ended {
                id: id.to_string(),
                summary,
                body,
            });
        }
    }
}

/// `entry` as it stands, for the journal: `Kind::Started` as a turn is taken (a new task or a
/// continuation), `Kind::Waiting` as it asks for input.
pub(super) fn live_entry(entry: &LiveTask, kind: Kind) -> Pending {
    Pending::Live {
        kind,
        task: entry.task.clone(),
        owner: entry.owner.clone(),
        seq: entry.seq,
        turn: entry.turn,
    }
}
