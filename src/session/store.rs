//! Finished tasks, kept for `tasks/get`, `GetTask` and `ListTasks` within two bounds: the newest
//! [`KEPT_TASKS`], and [`BUDGET`] bytes. Oldest go first; a task that has gone is not found,
//! like any forgotten one.
//!
//! Each is held as its serialized bytes, never as a parsed JSON tree: a tree costs about 16 bytes
//! of memory per byte received (a 1 MiB array of zeros is half a million `Value`s), so 60 large
//! requests once grew a public door to 960 MiB. Serialized, a task costs what it weighs, and
//! what listing and visibility need ([`Summary`]) sits beside it unserialized.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::session::budget::{Budget, Charge};

use crate::a2a::task::{State, Task};

/// Finished tasks kept, at most.
pub const KEPT_TASKS: usize = 1000;
/// Bytes of finished tasks kept, at most: their serialized messages and answers.
pub const BUDGET: usize = 64 << 20;
/// What each kept task costs beyond its body: its id, summary and bookkeeping, so a thousand
/// tiny tasks are not counted as free.
const OVERHEAD: usize = 256;

/// What listing and visibility read of a task without its body (and what the task journal
/// keeps beside it, `super::journal`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// The credential that started it.
    pub owner: String,
    /// Its arrival number, for newest first.
    pub seq: u64,
    pub context_id: String,
    pub state: State,
    /// When its status last changed (seconds since the epoch).
    pub updated: i64,
}

impl Summary {
    /// The summary of `task`, started by `owner` as arrival `seq`.
    pub fn of(task: &Task, owner: String, seq: u64) -> Self {
        Self {
            owner,
            seq,
            context_id: task.context_id.clone(),
            state: task.state,
            updated: task.updated,
        }
    }
}

struct Kept {
    summary: Summary,
    /// Shared with the journal's writer, which appends these very bytes to disk.
    body: Arc<[u8]>,
}

/// The finished tasks.
pub struct Store {
    by_id: HashMap<String, Kept>,
    /// Ids, oldest first.
    order: VecDeque<String>,
    /// What the kept tasks cost, counted as [`BUDGET`] counts.
    bytes: usize,
    budget: usize,
    /// What the kept tasks hold of the session's memory budget, when they count in one: kept
    /// equal to `bytes`. They are the first to give way when a demand needs room.
    charge: Option<Charge>,
}

impl Default for Store {
    fn default() -> Self {
        Self::with_budget(BUDGET)
    }
}

impl Store {
    pub fn with_budget(budget: usize) -> Self {
        Self {
            by_id: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            budget,
            charge: None,
        }
    }

    /// A store of at most `cap` bytes that counts them in `budget`.
    pub fn charged(budget: &Arc<Budget>, cap: usize) -> Self {
        Self {
            charge: Some(Charge::new(budget)),
            ..Self::with_budget(cap)
        }
    }

    /// Forget the oldest kept task; `false` when none is left.
    fn evict_oldest(&mut self) -> bool {
        let Some(oldest) = self.order.pop_front() else {
            return false;
        };
        if let Some(gone) = self.by_id.remove(&oldest) {
            self.bytes -= gone.body.len() + OVERHEAD;
        }
        true
    }

    /// Forget the oldest tasks until the session's budget has room for `bytes` more — only if
    /// forgetting them all would make that room: a demand refused anyway forgets nothing, so an
    /// answer not yet read is never lost to a request turned away.
    ///
    /// (Demands are granted without the engine lock this runs under, so one may take the room
    /// made here first; the tasks forgotten then made room the budget needed at that moment.)
    pub fn make_room(&mut self, bytes: usize) {
        self.recount();
        let Some(budget) = self.charge.as_ref().map(Charge::budget) else {
            return;
        };
        if budget.fits(bytes) || !budget.fits_if_freed(bytes, self.bytes) {
            return;
        }
        while self.evict_oldest() {
            self.recount();
            if self.charge.as_ref().is_none_or(|c| c.budget().fits(bytes)) {
                return;
            }
        }
    }

    /// Make the charge equal what is kept.
    fn recount(&self) {
        if let Some(charge) = &self.charge {
            charge.set(self.bytes);
        }
    }

    /// Keep `task`, evicting the oldest until both bounds hold again; its serialized bytes, as
    /// kept.
    pub fn insert(&mut self, task: &Task, owner: String, seq: u64) -> Option<Arc<[u8]>> {
        // Serializing our own types into a Vec cannot fail; if it ever did, the task would be
        // forgotten, as if evicted.
        let body: Arc<[u8]> = serde_json::to_vec(task).ok()?.into();
        let summary = Summary::of(task, owner, seq);
        self.keep(task.id.to_string(), summary, body.clone());
        Some(body)
    }

    /// Keep the task `id`, already serialized as `body` (as [`Store::insert`] would), evicting
    /// the oldest until both bounds hold again.
    pub fn keep(&mut self, id: String, summary: Summary, body: Arc<[u8]>) {
        self.bytes += body.len() + OVERHEAD;
        if let Some(old) = self.by_id.insert(id.clone(), Kept { summary, body }) {
            self.bytes -= old.body.len() + OVERHEAD;
            self.order.retain(|o| *o != id);
        }
        self.order.push_back(id);
        while (self.order.len() > KEPT_TASKS || self.bytes > self.budget) && self.evict_oldest() {}
        self.recount();
    }

    pub fn summary(&self, id: &str) -> Option<&Summary> {
        self.by_id.get(id).map(|kept| &kept.summary)
    }

    /// The whole task `id`, read back from its bytes.
    pub fn get(&self, id: &str) -> Option<Task> {
        serde_json::from_slice(&self.by_id.get(id)?.body).ok()
    }

    /// Every kept task's id and summary, in no particular order.
    pub fn summaries(&self) -> impl Iterator<Item = (&String, &Summary)> {
        self.by_id.iter().map(|(id, kept)| (id, &kept.summary))
    }

    /// What the kept tasks cost, as the budget counts it.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::message::{Message, Part};
    use crate::id::TaskId;

    fn task(text: &str) -> Task {
        let message = Message::user_text(text);
        Task {
            id: TaskId::mint().unwrap(),
            context_id: "ctx".into(),
            state: State::Completed,
            history: vec![message],
            answer: vec![Part::text(text)],
            note: None,
            updated: 7,
        }
    }

    #[test]
    fn a_task_reads_back_as_it_was_kept() {
        let mut store = Store::default();
        let kept = task("hello");
        store.insert(&kept, "public".into(), 1);
        let read = store.get(kept.id.as_str()).unwrap();
        assert_eq!(read.answer, kept.answer);
        assert_eq!(read.history, kept.history);
        assert_eq!(store.summary(kept.id.as_str()).unwrap().seq, 1);
    }

    #[test]
    fn the_budget_evicts_the_oldest_first() {
        let mut store = Store::with_budget(10_000);
        let big = "x".repeat(3_000);
        let ids: Vec<String> = (0..5)
            .map(|i| {
                let t = task(&big);
                store.insert(&t, "public".into(), i);
                t.id.to_string()
            })
            .collect();
        assert!(store.bytes() <= 10_000, "{}", store.bytes());
        assert!(store.get(&ids[0]).is_none(), "the oldest went first");
        assert!(store.get(&ids[4]).is_some(), "the newest stays");
        let kept = ids.iter().filter(|id| store.summary(id).is_some()).count();
        assert!((1..5).contains(&kept), "{kept}");
    }

    #[test]
    fn at_most_kept_tasks_are_kept() {
        let mut store = Store::default();
        let first = task("a");
        store.insert(&first, "public".into(), 0);
        for i in 1..=KEPT_TASKS as u64 {
            store.insert(&task("a"), "public".into(), i);
        }
        assert_eq!(store.summaries().count(), KEPT_TASKS);
        assert!(store.get(first.id.as_str()).is_none());
    }

    #[test]
    fn a_demand_that_would_not_fit_anyway_evicts_nothing() {
        let budget = Budget::new(100_000);
        let mut store = Store::charged(&budget, 50_000);
        let kept = task(&"x".repeat(10_000));
        store.insert(&kept, "public".into(), 1);
        let held = Charge::new(&budget);
        assert!(held.grow(70_000));
        store.make_room(40_000);
        assert!(
            store.get(kept.id.as_str()).is_some(),
            "refused anyway: kept"
        );
        store.make_room(15_000);
        assert!(
            store.get(kept.id.as_str()).is_none(),
            "forgotten to make room"
        );
        assert!(budget.fits(15_000));
    }
}
