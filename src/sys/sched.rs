//! The scheduling class of the session's task threads: `SCHED_BATCH`, so that a handler waking
//! the thread that moves its bytes (a pipe write, its exit) is not preempted by it.
//!
//! Why: a pipe wakes its reader as a *synchronous* wake-up, which places the reader on the
//! writer's CPU, and on a loaded two-vCPU machine the scheduler often does not look for the idle
//! one; the woken task thread then preempts the handler at each chunk and at each pipe's end —
//! `perf sched` saw `cat` and its task thread trade one CPU three times between its output and
//! its exit while the other stood idle, each turn 10-25 µs of the task thread. A `SCHED_BATCH`
//! thread never preempts on wake-up: it runs when the handler sleeps or ends, or at once on an
//! idle CPU. Side by side with the commit before, in three runs, each of the handler bench's four
//! capsules answered 3 to 98 µs sooner a task, most often 20-45 (docs/benchmarks.md).
//! What it costs: under CPU contention a streamed chunk waits for the handler's slice (a few
//! milliseconds) instead of preempting it.
//!
//! Invariant: handlers keep the session's own class. A subreaper cloned by a task thread would
//! inherit `SCHED_BATCH` (a clone inherits the policy, and so does an exec), so it puts back the
//! class the session ran with ([`restore_in_child`]) before it starts a handler. A session an
//! operator started under another class (`chrt`) is left as it is: only `SCHED_OTHER` threads
//! are moved.

#[cfg(target_os = "linux")]
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a task thread was moved from `SCHED_OTHER` to `SCHED_BATCH`: children cloned by one
/// must go back to `SCHED_OTHER`.
#[cfg(target_os = "linux")]
static MOVED: AtomicBool = AtomicBool::new(false);

/// The calling thread's policy (`SCHED_OTHER`, `SCHED_BATCH`, …), raw call only.
#[cfg(target_os = "linux")]
fn policy() -> Result<libc::c_int, libc::c_int> {
    // SAFETY: integers only.
    unsafe { super::raw::call(libc::SYS_sched_getscheduler, [0; 6]) }.map(|p| p as libc::c_int)
}

/// Set the calling thread's policy, priority 0 (`SCHED_OTHER` and `SCHED_BATCH` have no other),
/// raw call only: musl's `sched_setscheduler` refuses (`ENOSYS`) to set one thread's.
#[cfg(target_os = "linux")]
fn set_policy(policy: libc::c_int) -> Result<(), libc::c_int> {
    // The kernel's `struct sched_param`: its priority alone (libc's may carry more fields).
    let priority: libc::c_int = 0;
    let args = [0, policy as usize, (&raw const priority) as usize, 0, 0, 0];
    // SAFETY: a pointer to a live `int`, which the kernel only reads during the call.
    unsafe { super::raw::call(libc::SYS_sched_setscheduler, args) }.map(drop)
}

/// Make the calling thread (a task thread, as it starts) `SCHED_BATCH` when it runs
/// `SCHED_OTHER`; otherwise, or where that is refused, leave it. Never needs a privilege.
pub fn batch_this_thread() {
    #[cfg(target_os = "linux")]
    if policy() == Ok(libc::SCHED_OTHER) && set_policy(libc::SCHED_BATCH).is_ok() {
        MOVED.store(true, Ordering::Relaxed);
    }
}

/// In a child cloned to share this memory (a subreaper, at its set-up; raw calls only): back
/// to `SCHED_OTHER` when it inherited `SCHED_BATCH` from a task thread this module moved, so its
/// handlers run in the session's class. Going back to `SCHED_OTHER` needs no privilege; were it
/// refused, handlers would run `SCHED_BATCH`, which is no reason to fail a task.
#[cfg(target_os = "linux")]
pub fn restore_in_child() {
    if MOVED.load(Ordering::Relaxed) && policy() == Ok(libc::SCHED_BATCH) {
        let _ = set_policy(libc::SCHED_OTHER);
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_task_thread_is_batch_and_a_child_of_it_goes_back() {
        let before = policy().unwrap();
        let (moved, restored) = std::thread::spawn(move || {
            batch_this_thread();
            let moved = policy().unwrap();
            restore_in_child();
            (moved, policy().unwrap())
        })
        .join()
        .unwrap();
        if before == libc::SCHED_OTHER {
            assert_eq!(moved, libc::SCHED_BATCH);
            assert_eq!(restored, libc::SCHED_OTHER);
        } else {
            // Run under another class: left alone.
            assert_eq!((moved, restored), (before, before));
        }
        assert_eq!(policy().unwrap(), before, "only the calling thread moves");
    }
}
