//! The threads turns run on: each turn on a thread of its own, as ever, but a thread whose turn
//! has ended waits [`LINGER`] for the next one before it exits, and the next turn runs there.
//!
//! Why: a thread started per turn was most of what a session added to a quick handler's time.
//! Its clone, its stack and signal stack mapped and unmapped, and — in the static build, whose
//! allocator gives each allocating thread a segment of its own and purges freed pages at once —
//! a segment mapped at its first allocation and purged and unmapped at its exit: about twenty
//! `mmap`, `madvise` and `munmap` calls a turn, each unmapping one a TLB shootdown on every core
//! the session's threads run on. A lingering thread has all of that in place already.
//!
//! A thread serves one turn at a time, so there are never more threads than turns running at
//! once (plus those lingering, fewer as each leaves after [`LINGER`] without work).

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a thread whose turn has ended waits for another before it exits.
const LINGER: Duration = Duration::from_secs(10);
/// A task thread's stack: a turn's frames are a few calls deep; its buffers are on the heap.
const STACK: usize = 256 * 1024;

/// A turn to run.
type Turn = Box<dyn FnOnce() + Send>;

/// The session's task threads.
#[derive(Default)]
pub struct Threads {
    idle: Mutex<Idle>,
    /// Notified for each turn handed to a waiting thread.
    handed: Condvar,
}

#[derive(Default)]
struct Idle {
    /// Threads waiting for a turn. Invariant: at least as many as `turns` (a thread leaves only
    /// when `turns` is empty), so every turn handed over is taken.
    waiting: usize,
    turns: VecDeque<Turn>,
}

impl Threads {
    fn lock(&self) -> std::sync::MutexGuard<'_, Idle> {
        // panic = "abort": a poisoned lock cannot be observed half-updated.
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run `turn` on a waiting thread, or on a new one (named `task`) when none waits. The
    /// `Err`: no thread could be started (`RLIMIT_NPROC`, memory); `turn` was not run.
    pub fn run(self: &Arc<Self>, turn: impl FnOnce() + Send + 'static) -> io::Result<()> {
        {
            let mut idle = self.lock();
            if idle.waiting > idle.turns.len() {
                idle.turns.push_back(Box::new(turn));
                self.handed.notify_one();
                return Ok(());
            }
        }
        let threads = self.clone();
        std::thread::Builder::new()
            .name("task".into())
            .stack_size(STACK)
            .spawn(move || {
                // Not to preempt the handlers whose pipes wake it (`sys/sched.rs`).
                crate::sys::sched::batch_this_thread();
                turn();
                while let Some(next) = threads.next() {
                    next();
                }
            })
            .map(drop)
    }

    /// The next turn handed over within [`LINGER`], or `None`: this thread is to exit.
    fn next(&self) -> Option<Turn> {
        let until = Instant::now() + LINGER;
        let mut idle = self.lock();
        idle.waiting += 1;
        loop {
            if let Some(turn) = idle.turns.pop_front() {
                idle.waiting -= 1;
                return Some(turn);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                idle.waiting -= 1;
                return None;
            }
            idle = self
                .handed
                .wait_timeout(idle, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn tid() -> std::thread::ThreadId {
        std::thread::current().id()
    }

    #[test]
    fn a_turn_after_another_runs_on_the_same_thread_and_concurrent_ones_on_their_own() {
        let threads = Arc::new(Threads::default());
        let (tx, rx) = mpsc::channel();
        let sent = tx.clone();
        threads.run(move || sent.send(tid()).unwrap()).unwrap();
        let first = rx.recv().unwrap();
        // The first thread waits for a turn once its own has ended.
        while threads.lock().waiting == 0 {
            std::thread::yield_now();
        }
        let sent = tx.clone();
        threads.run(move || sent.send(tid()).unwrap()).unwrap();
        assert_eq!(rx.recv().unwrap(), first, "the lingering thread ran it");
        // Two turns at once: the second cannot wait for the first, which never ends until told.
        let (hold, held) = mpsc::channel::<()>();
        let sent = tx.clone();
        threads
            .run(move || {
                sent.send(tid()).unwrap();
                let _ = held.recv();
            })
            .unwrap();
        let blocked = rx.recv().unwrap();
        threads.run(move || tx.send(tid()).unwrap()).unwrap();
        assert_ne!(rx.recv().unwrap(), blocked, "a thread of its own");
        drop(hold);
    }
}
