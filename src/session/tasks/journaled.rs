//! The engine's side of a named session's task store ([`crate::session::journal`]): the tasks a
//! session started again finds, and the entries each task's start and end leave due.

use std::sync::Arc;

use super::super::budget::Charge;
use super::super::journal::{self, Journal, Pending, Restored};
use super::super::store::Summary;
use super::live::{self, LiveTask};
use super::{Engine, Tasks};
use crate::a2a::task::Task;

impl Engine {
    /// Open the task store of instance name `name`, if the session has one, and take what it
    /// holds (`Engine::restore`). Called once the name is claimed (so one session at a time
    /// writes its store) and before the door opens.
    pub fn restore_named(self: &Arc<Self>, name: Option<&str>) {
        let retry = self.lifecycle.retry_interrupted;
        if let Some((journal, restored)) = name.and_then(|name| journal::open(name, retry)) {
            self.restore(journal, restored);
        }
    }

    /// Take the tasks `restored` from the store as finished ones, queue again those to retry,
    /// and journal every task from now on in `journal`. Called once, before the door opens:
    /// arrival numbers continue after the newest restored, so listing stays newest first
    /// across the restart.
    fn restore(self: &Arc<Self>, journal: Journal, restored: Restored) {
        if self.journal.set(journal).is_err() {
            return;
        }
        let count = restored.tasks.len() + restored.retried.len();
        let mut tasks = self.lock();
        for (id, summary, body) in restored.tasks {
            tasks.next_seq = tasks.next_seq.max(summary.seq.saturating_add(1));
            tasks.finished.keep(id, summary, body);
        }
        for (task, summary) in restored.retried {
            tasks.next_seq = tasks.next_seq.max(summary.seq.saturating_add(1));
            self.retry(&mut tasks, task, summary);
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
            crate::cli::warn(
                "run",
                &format!("{count} task(s) restored from the task store{interrupted}"),
            );
        }
    }

    /// Queue `task` again as it was taken — a turn that never finished — started at once when
    /// a slot is free. Counted in the budget, and queued past the queue's depth if need be: it
    /// was taken before, and is never refused now.
    fn retry(self: &Arc<Self>, tasks: &mut Tasks, mut task: Task, summary: Summary) {
        let charge = Charge::new(&self.budget);
        charge.force(live::weight(&task, self.on_disk) + super::ENTRY_OVERHEAD);
        task.history.truncate(1);
        task.answer.clear();
        let id = task.id.to_string();
        let entry = LiveTask::new(task, summary.owner, summary.seq, charge);
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
    /// Leave `entry`'s start due for the journal, when there is one.
    pub(super) fn journal_start(&mut self, entry: &LiveTask) {
        if self.journaling {
            self.out.due.journal.push(Pending::Started {
                task: entry.task.clone(),
                owner: entry.owner.clone(),
                seq: entry.seq,
            });
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
