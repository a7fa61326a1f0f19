//! The door's worker threads: as many as the work needs, not one per connection.
//!
//! Why: a thread per connection costs its stack and its allocator's per-thread heap — about
//! 190 KiB each with the static build, measured with 1,000 keep-alive clients
//! (docs/benchmarks.md) — for as long as its client stays connected, busy or not. Here a connection
//! holds a worker only while a request of it is read, answered and written; between requests it
//! is parked ([`super::server`]) and costs a socket.
//!
//! How many workers: enough that [`EAGER`] of them can *run*. A worker that is about to wait
//! on something outside the door's control — a client's bytes, a slow reader, a task's end, a
//! stream's next event — says so by waiting inside [`blocking`]; if jobs are waiting and fewer
//! than [`EAGER`] workers are left to run them, another starts at once. So a flood of quick
//! requests runs on a few workers however many clients there are, and each long wait (a
//! blocking `message/send`, a stream) gets a worker of its own, up to `max`. As a safety net for
//! a wait nobody marked, [`Pool::nudge`] — called by the door's own thread every [`STALL`] while
//! jobs wait — adds one worker when no job has finished since the last nudge. (Growing on that
//! rule alone was tried: on a machine shared with other work a busy door's workers are often
//! descheduled for longer than any short stall, and the pool grew to its bound under the
//! 1,000-client bench; so the nudge is slow, and the marks do the work.) A worker idle for
//! `IDLE_EXIT` leaves, down to [`EAGER`].
//!
//! Invariant: `threads` counts the live workers; `idle` those not running a job (a worker just
//! started counts as idle from the moment it is started, so no second one is started for the
//! same waiting job); `blocked` those running a job that waits inside [`blocking`]. A job is run
//! by exactly one worker, in queue order.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A unit of work: serving one connection until it parks or closes.
pub type Job = Box<dyn FnOnce() + Send>;

/// Workers that may run at once before another is started for waiting jobs; kept when idle.
pub const EAGER: usize = 4;
/// How long jobs may wait with no job finishing before the safety net adds a worker.
pub const STALL: Duration = Duration::from_millis(100);
/// How long an idle worker waits for a job before it leaves (if more than [`EAGER`] are left).
const IDLE_EXIT: Duration = Duration::from_secs(10);

thread_local! {
    /// The pool this thread works for, if it is a worker.
    static CURRENT: RefCell<Option<Arc<Pool>>> = const { RefCell::new(None) };
}

/// Run `wait` — something that waits on the world rather than computes — letting the pool
/// start another worker meanwhile if jobs are waiting. Outside a worker, just runs it.
pub fn blocking<T>(wait: impl FnOnce() -> T) -> T {
    let pool = CURRENT.with(|current| current.borrow().clone());
    let Some(pool) = pool else {
        return wait();
    };
    pool.blocked.fetch_add(1, Ordering::AcqRel);
    if pool.waiting.load(Ordering::Acquire) > 0 {
        let mut state = pool.lock();
        pool.grow(&mut state);
    }
    let out = wait();
    pool.blocked.fetch_sub(1, Ordering::AcqRel);
    out
}

/// The pool.
pub struct Pool {
    max: usize,
    stack: usize,
    state: Mutex<State>,
    work: Condvar,
    /// Workers waiting inside [`blocking`].
    blocked: AtomicUsize,
    /// Jobs no idle worker is there for, as of the last change under the lock: read without
    /// it by [`blocking`], to take the lock only when growing may be needed.
    waiting: AtomicUsize,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    threads: usize,
    idle: usize,
    /// Jobs finished, ever; and the count and the time when a nudge last judged (`None` once
    /// none wait: a backlog is judged from its own start, [`STALL`] at a time).
    finished: u64,
    judged: Option<(u64, Instant)>,
}

impl State {
    fn waiting(&self) -> usize {
        self.jobs.len().saturating_sub(self.idle)
    }
}

impl Pool {
    /// A pool of at most `max` workers, each with a `stack`-byte stack.
    pub fn new(max: usize, stack: usize) -> Arc<Self> {
        Arc::new(Self {
            max,
            stack,
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            blocked: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // panic = "abort": a poisoned lock cannot be observed half-updated.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue `job`. `Err` gives it back when no worker exists and none can be started (the
    /// kernel refuses threads): nothing would ever run it.
    pub fn submit(self: &Arc<Self>, job: Job) -> Result<(), Job> {
        let mut state = self.lock();
        state.jobs.push_back(job);
        self.grow(&mut state);
        if state.threads == 0 {
            return Err(state.jobs.pop_back().expect("the job just queued"));
        }
        self.work.notify_one();
        Ok(())
    }

    /// Start a worker if jobs wait and fewer than [`EAGER`] workers could run them (those not
    /// blocked: running a job, or idle and about to take one).
    fn grow(self: &Arc<Self>, state: &mut State) {
        let able = state
            .threads
            .saturating_sub(self.blocked.load(Ordering::Acquire));
        if state.waiting() > 0 && able < EAGER && state.threads < self.max {
            self.start(state);
        }
        self.waiting.store(state.waiting(), Ordering::Release);
    }

    /// The safety net: add a worker if jobs have waited for [`STALL`] with none finishing;
    /// whether jobs wait (the caller nudges again within [`STALL`] while they do — as often as
    /// it likes: a backlog is judged only once per [`STALL`]).
    pub fn nudge(self: &Arc<Self>) -> bool {
        let mut state = self.lock();
        let waiting = state.waiting();
        let now = Instant::now();
        match state.judged {
            _ if waiting == 0 => state.judged = None,
            None => state.judged = Some((state.finished, now)),
            Some((finished, at)) if now.duration_since(at) >= STALL => {
                if finished == state.finished && state.threads < self.max {
                    self.start(&mut state);
                }
                state.judged = Some((state.finished, now));
            }
            Some(_) => {}
        }
        self.waiting.store(state.waiting(), Ordering::Release);
        waiting > 0
    }

    /// Whether jobs wait for a worker (as of the last change; read without the lock).
    pub fn backlogged(&self) -> bool {
        self.waiting.load(Ordering::Acquire) > 0
    }

    /// How many workers there are now (what the pool's tests watch; the door has no use for it).
    #[cfg(test)]
    pub fn threads(&self) -> usize {
        self.lock().threads
    }

    /// Start one worker, counted idle at once; whether the kernel gave a thread.
    fn start(self: &Arc<Self>, state: &mut State) -> bool {
        let pool = self.clone();
        let started = std::thread::Builder::new()
            .name("door-conn".into())
            .stack_size(self.stack)
            .spawn(move || {
                CURRENT.with(|current| *current.borrow_mut() = Some(pool.clone()));
                pool.work();
            });
        if started.is_ok() {
            state.threads += 1;
            state.idle += 1;
        }
        started.is_ok()
    }

    /// A worker's life: take jobs in order until idle too long. It starts counted as idle.
    fn work(&self) {
        let mut state = self.lock();
        loop {
            while state.jobs.is_empty() {
                let (next, waited) = self
                    .work
                    .wait_timeout(state, IDLE_EXIT)
                    .unwrap_or_else(|p| p.into_inner());
                state = next;
                if waited.timed_out() && state.jobs.is_empty() && state.threads > EAGER {
                    state.idle -= 1;
                    state.threads -= 1;
                    return;
                }
            }
            let Some(job) = state.jobs.pop_front() else {
                continue;
            };
            state.idle -= 1;
            self.waiting.store(state.waiting(), Ordering::Release);
            drop(state);
            job();
            state = self.lock();
            state.idle += 1;
            state.finished += 1;
            self.waiting.store(state.waiting(), Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests;
