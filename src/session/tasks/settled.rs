//! [`Settled`]: one turn of a task as it settles (ends, or asks for input), for whoever waits
//! for it — a blocking `message/send`, a cancel, a one-shot `--task`.
//!
//! A wait is a registration: [`Settled::poll`] stores the caller's [`Waker`] and the engine
//! fires exactly the wakers of the turn that settled, once each — no shared condition variable,
//! no wake-up of every waiter on every task's end. The engine settles under its lock and wakes
//! after releasing it ([`Settled::settle`] hands the wakers back), because a waker may re-arm
//! an epoll set: a system call the engine lock is never held across.
//!
//! Invariant: the task and the wakers are under one small lock, taken by `poll` to look and
//! register and by `settle` to set and take — so a waker registered concurrently with the
//! settling is either taken by it, or finds the task already there: no lost wake-up. That lock
//! is a leaf: nothing is taken while it is held.

use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};

use crate::a2a::task::Task;

/// One turn's claim on its task as it settles. Clones share it.
#[derive(Clone, Default)]
pub struct Settled(Arc<Mutex<Claim>>);

#[derive(Default)]
struct Claim {
    /// The task as the turn settled — handed over by the task itself, so a waiter gets it even
    /// if it has since been evicted from the finished ones.
    task: Option<Task>,
    /// One per waiter: a waiter polling again replaces its own ([`Waker::will_wake`]).
    wakers: Vec<Waker>,
}

impl Settled {
    fn lock(&self) -> MutexGuard<'_, Claim> {
        // panic = "abort": a poisoned lock cannot be observed half-updated.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The task as it settled; else `Pending`, `waker` fired once when it settles.
    pub fn poll(&self, waker: &Waker) -> Poll<Task> {
        let mut claim = self.lock();
        if let Some(task) = &claim.task {
            return Poll::Ready(task.clone());
        }
        match claim.wakers.iter_mut().find(|w| w.will_wake(waker)) {
            Some(same) => same.clone_from(waker),
            None => claim.wakers.push(waker.clone()),
        }
        Poll::Pending
    }

    /// The task, if it has settled; registers nothing.
    pub fn get(&self) -> Option<Task> {
        self.lock().task.clone()
    }

    /// Wait until the task settles, parking this thread: for threads that are not door workers
    /// (a one-shot task's reader, main). A door worker never waits: it polls.
    pub fn wait(&self) -> Task {
        super::super::parking::block_on(|waker| self.poll(waker))
    }

    /// Settle with `task`; the wakers to fire once the caller's locks are released. A second
    /// settle of the same claim changes nothing.
    pub(super) fn settle(&self, task: Task) -> Vec<Waker> {
        let mut claim = self.lock();
        if claim.task.is_some() {
            return Vec::new();
        }
        claim.task = Some(task);
        std::mem::take(&mut claim.wakers)
    }

    /// Whether anyone holds this claim besides the task itself: a copy of the task is made for
    /// the claim only then. Clones are made under the engine lock, where this is asked.
    pub(super) fn claimed(&self) -> bool {
        Arc::strong_count(&self.0) > 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use crate::a2a::message::Message;
    use crate::a2a::task::State;
    use crate::id::TaskId;

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn task() -> Task {
        Task {
            id: TaskId::mint().unwrap(),
            context_id: "c".into(),
            state: State::Completed,
            history: vec![Message::user_text("hi")],
            answer: Vec::new(),
            note: None,
            updated: 0,
        }
    }

    fn fire(wakers: Vec<Waker>) {
        wakers.into_iter().for_each(Waker::wake);
    }

    #[test]
    fn each_waiter_is_woken_once_per_settle_and_a_repoll_replaces_its_waker() {
        let settled = Settled::default();
        let counts: Vec<Arc<Count>> = (0..3).map(|_| Arc::default()).collect();
        let wakers: Vec<Waker> = counts.iter().map(|c| Waker::from(c.clone())).collect();
        for waker in &wakers {
            assert!(settled.poll(waker).is_pending());
        }
        // The first waiter polls again: still one registration.
        assert!(settled.poll(&wakers[0]).is_pending());
        // A waiter of another task only.
        let other = Settled::default();
        let stranger = Arc::<Count>::default();
        assert!(other.poll(&Waker::from(stranger.clone())).is_pending());
        fire(settled.settle(task()));
        let woken: Vec<usize> = counts.iter().map(|c| c.0.load(Ordering::SeqCst)).collect();
        assert_eq!(woken, [1, 1, 1]);
        assert!(settled.settle(task()).is_empty(), "a claim settles once");
        assert!(settled.poll(&wakers[2]).is_ready());
        assert!(settled.get().is_some());
        assert_eq!(
            stranger.0.load(Ordering::SeqCst),
            0,
            "another task's waiter is not woken"
        );
    }

    #[test]
    fn settling_while_a_waiter_registers_never_loses_the_wake_up() {
        for _ in 0..500 {
            let settled = Settled::default();
            let (tx, rx) = std::sync::mpsc::channel();
            let waiter = settled.clone();
            std::thread::spawn(move || tx.send(waiter.wait().state));
            let setter = settled.clone();
            std::thread::spawn(move || fire(setter.settle(task())));
            // A hang guard, not a timing assertion: a lost wake-up waits forever.
            let woken = rx.recv_timeout(std::time::Duration::from_secs(10));
            assert_eq!(woken, Ok(State::Completed), "the waiter was never woken");
        }
    }
}
