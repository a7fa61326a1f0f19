//! A task's processes as one thing: the handler and everything it starts, at any depth, ended
//! together and never mistaken for anything else.
//!
//! On Linux every handler runs under a subreaper of its own (`reaper.rs`): a small process cloned
//! from the session that starts the handler, is reparented everything the handler orphans
//! (`setsid`, double forks, any depth), and kills that whole tree — its own children only,
//! generation after generation, until none is left — when the handler exits, when the session asks
//! ([`Remote`]), or when the session is gone (its control socket reaches EOF: a SIGKILLed session
//! leaves nothing behind either). Once the tree is gone it says so and is kept for a later task
//! ([`Subreapers`]): its clone, set-up and exit were a fifth of what a task cost beyond a direct
//! spawn. It serves one task at a time, takes one only with no child left, and heeds only the
//! running task's words (`ctl.rs`: each carries the task's generation), so a task still has a tree
//! of its own and a word for it reaches nothing else. The session itself is no subreaper: a process
//! it did not start — a wrapper's sidecar from before `exec mur`, an orphan it adopts as a
//! container's pid 1 — is never attributed to a task, never signalled
//! ([`crate::sys::child::reap_strangers`] only reaps them).
//!
//! Chosen over the alternatives by what each guarantees here and what it costs:
//! - a PID namespace per task makes the kernel kill the tree when its init dies, but unprivileged
//!   it needs a user namespace too, the handler becomes pid 1 of its namespace (SIGTERM ignored
//!   unless it installs a handler, so cancel's grace would be lost) and sees `/proc` of another
//!   namespace unless it gets a mount namespace as well — a different program from the one the
//!   user wrote;
//! - a cgroup per task (`cgroup.kill`) needs a delegated cgroup v2 subtree, which a session
//!   started from cron, a shell or a container usually lacks.
//!
//! The subreaper needs neither and costs one `clone` without a copy of the session's memory
//! (`CLONE_VM`), once for many tasks. What it cannot do: outlive a SIGKILL aimed at itself (only
//! the user can send one): its handler then dies by its parent-death signal, but what the handler
//! orphaned is reparented past it, to init.
//!
//! Elsewhere (macOS) the handler is a direct child leading its own group (`group.rs`), signalled
//! as a group — what escapes its group escapes the session.

#[cfg(target_os = "linux")]
pub use linux::{Shim, Subreapers, start};

use std::sync::Arc;

/// How a task's tree is signalled from any thread: through its supervisor, which only ever
/// signals its own processes — so a remote may be used at any time, even after the task ended
/// (it then reaches nothing).
#[derive(Clone)]
pub struct Remote(pub(super) Arc<dyn Fn(Ask) + Send + Sync>);

/// What a [`Remote`] asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// SIGTERM to the handler's group and every orphan the task left.
    Terminate,
    /// SIGKILL to the whole tree, until it is empty.
    Kill,
}

impl Remote {
    pub fn terminate(&self) {
        (self.0)(Ask::Terminate);
    }

    pub fn kill(&self) {
        (self.0)(Ask::Kill);
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io;
    use std::os::fd::{AsRawFd, OwnedFd, RawFd};
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;
    use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::{Ask, Remote};
    use crate::sys::pidref::PidRef;
    use crate::sys::raw;
    use crate::sys::spawn::Ended;
    use crate::sys::spawn::ctl::{self, Heard};
    use crate::sys::spawn::exec::Exec;
    use crate::sys::spawn::reaper::{self, Frame};
    use crate::sys::spawn::stack::Stack;

    /// Why a handler has no status, when its subreaper died inside the handler's clone (the
    /// frame, the plan and the stacks are then leaked: [`Frame::cloning`]).
    const KILLED_IN_CLONE: &str = "its subreaper was killed while it started the handler";

    /// The most subreapers kept waiting for a task: as many as tasks ran at once, up to this.
    const MAX_IDLE: usize = 16;

    /// The subreapers of one session (its supervisor's) waiting for their next task, each with
    /// no child and nothing of a task's; ended and reaped with the last clone of this value, or
    /// by [`Subreapers::retire_idle`].
    #[derive(Clone, Default)]
    pub struct Subreapers(Arc<Idle>);

    #[derive(Default)]
    struct Idle(Mutex<Vec<Subreaper>>);

    impl Idle {
        fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Subreaper>> {
            // panic = "abort": a poisoned lock cannot be observed half-updated.
            self.0.lock().unwrap_or_else(|p| p.into_inner())
        }
    }

    impl Subreapers {
        /// End every subreaper waiting for a task, and reap them: the session is ending.
        pub fn retire_idle(&self) {
            // Taken out first: none is ended (a wait) under the lock.
            let idle = std::mem::take(&mut *self.0.lock());
            end_all(idle);
        }
    }

    impl Drop for Idle {
        fn drop(&mut self) {
            end_all(std::mem::take(
                self.0.get_mut().unwrap_or_else(|p| p.into_inner()),
            ));
        }
    }

    /// End and reap each of `idle`, subreapers with no task.
    fn end_all(idle: Vec<Subreaper>) {
        for subreaper in idle {
            let _ = subreaper.end();
        }
    }

    /// The last task generation given out: each task's is new, for this process's life.
    static GENERATION: AtomicU64 = AtomicU64::new(0);

    /// A subreaper as the session holds it: its pid, its control socket, the frame it reads
    /// and the stacks it and its handlers run on — all kept until it is reaped, or leaked.
    struct Subreaper {
        /// Held by its pidfd where the kernel gives one: reaped through it, so however long it
        /// waits for tasks, its number is never mistaken for a later child's.
        held: PidRef,
        ctl: Arc<OwnedFd>,
        /// From `Box::into_raw`: given back to a `Box` only once this subreaper is reaped and
        /// was not inside a handler's clone.
        frame: *mut Frame,
        /// Its own stack and its handlers' (each until the handler's exec).
        stacks: [Stack; 2],
    }

    // SAFETY: the frame pointer is this value's alone to free, and it is read only through
    // shared references to atomics and fields never written after the clone.
    unsafe impl Send for Subreaper {}

    impl Subreaper {
        /// A new subreaper, waiting for its first task.
        fn clone_new() -> io::Result<Self> {
            let (ours, theirs) = ctl::pair()?;
            let stacks = [Stack::take()?, Stack::take()?];
            let frame = Box::into_raw(Box::new(Frame {
                ctl: theirs.as_raw_fd(),
                handler_stack: stacks[1].top(),
                reset: crate::sys::signal::reset_on_exec(),
                broken: AtomicI32::new(0),
                plan: AtomicPtr::new(std::ptr::null_mut()),
                cloning: AtomicBool::new(false),
                status: AtomicI32::new(0),
                reaped: AtomicBool::new(false),
            }));
            // No handler of the session's may run in the subreaper: it starts with every signal
            // blocked (libc's internal ones too) and keeps them so.
            let old = match raw::set_signal_mask(raw::ALL_SIGNALS) {
                Ok(old) => old,
                Err(errno) => {
                    // SAFETY: from `Box::into_raw` just above, and no process was given it.
                    drop(unsafe { Box::from_raw(frame) });
                    return Err(io::Error::from_raw_os_error(errno));
                }
            };
            // SAFETY: `reaper::main` makes raw calls only, with no thread pointer, on its
            // guarded stack and the frame. The `Subreaper` made below keeps both; they are
            // freed only once it is reaped and no handler can still be inside its clone, and
            // leaked otherwise.
            let cloned = unsafe {
                raw::clone(
                    libc::CLONE_VM | libc::SIGCHLD,
                    stacks[0].top(),
                    reaper::main,
                    frame.cast(),
                )
            };
            let _ = raw::set_signal_mask(old);
            drop(theirs);
            match cloned {
                // Its pidfd taken while it is surely unreaped: a child of this thread, which is
                // alive, so not even `reap_strangers` can have reaped it yet.
                Ok(pid) => Ok(Self {
                    held: PidRef::child(pid as u32),
                    ctl: Arc::new(ours),
                    frame,
                    stacks,
                }),
                Err(errno) => {
                    // SAFETY: from `Box::into_raw` above; the clone failed, so no process has it.
                    drop(unsafe { Box::from_raw(frame) });
                    Err(io::Error::from_raw_os_error(errno))
                }
            }
        }

        fn frame(&self) -> &Frame {
            // SAFETY: from `Box::into_raw`, freed only by consuming this value; shared, as the
            // subreaper shares it (every field written after the clone is an atomic).
            unsafe { &*self.frame }
        }

        /// Keep it in `idle` for the next task (it said its last one is done), or end it when
        /// enough are.
        fn keep(self, idle: &Idle) {
            let mut idle = idle.lock();
            if idle.len() < MAX_IDLE {
                idle.push(self);
                return;
            }
            drop(idle);
            let _ = self.end();
        }

        /// Let it go without freeing what it, or a handler inside its clone, may still use: the
        /// frame and stacks are leaked, the control socket closed.
        fn abandon(self) {
            let Self { ctl, stacks, .. } = self;
            drop(ctl);
            std::mem::forget(stacks);
        }

        /// End it — its socket shut, so it kills any tree it has and exits — and reap it; then
        /// free its frame and stacks, unless it died inside a handler's clone or could not be
        /// reaped: then they are leaked, as a handler or the subreaper may still use them.
        /// Whether it died inside a handler's clone (the plan it was lent must then be leaked
        /// too).
        fn end(self) -> io::Result<bool> {
            // SAFETY: shutdown(2) on a socket this value owns; integers only.
            unsafe { libc::shutdown(self.ctl.as_raw_fd(), libc::SHUT_RDWR) };
            let reaped = self.held.reap_child();
            // Reaped already by `reap_strangers` (listed as the main thread's once the thread
            // that cloned it ended): it has exited all the same.
            if let Err(err) = reaped
                && err.raw_os_error() != Some(libc::ECHILD)
            {
                self.abandon();
                return Err(err);
            }
            if self.frame().cloning.load(Ordering::Acquire) {
                self.abandon();
                return Ok(true);
            }
            // SAFETY: from `Box::into_raw` in `clone_new`, freed once (this value is consumed);
            // the subreaper is reaped and no handler is inside its clone.
            drop(unsafe { Box::from_raw(self.frame) });
            self.stacks.into_iter().for_each(Stack::give_back);
            Ok(false)
        }
    }

    /// A running task's subreaper, as the session holds it while the task runs. End the task
    /// with [`Shim::end`]; one dropped before is told to kill its tree, and its subreaper,
    /// frame, plan and stacks are given up — they may still be in use.
    pub struct Shim {
        subreaper: Option<Subreaper>,
        /// Where the subreaper goes back to once the task is done.
        pool: Subreapers,
        generation: u64,
        /// The plan lent to the subreaper (`Box::into_raw`), taken back by [`Shim::end`].
        plan: *mut Exec,
        /// The handler's workdir, named when it could not be entered.
        cwd: std::path::PathBuf,
    }

    // SAFETY: the plan pointer is this value's alone to free; it is read only through shared
    // references to fields that are atomic or never written while it is lent.
    unsafe impl Send for Shim {}

    /// Start the handler `exec` describes under a subreaper — one of `pool`'s waiting for a task,
    /// or a new one — leading its own group and dying with the subreaper; `cwd` names its workdir
    /// in errors. Returns once the subreaper has the task, without waiting for the handler's start:
    /// whether it ran, or why not, is read from the plan once the task is done ([`Shim::end`]). The
    /// `Err`: no subreaper could take it.
    pub fn start(mut exec: Exec, cwd: &std::path::Path, pool: &Subreapers) -> io::Result<Shim> {
        // The subreaper put signals back to their defaults; the handler dies with it.
        exec.reset_signals = false;
        exec.die_with_parent = true;
        exec.own_group = true;
        let (fds, count) = exec.passed();
        let plan = Box::into_raw(Box::new(exec));
        loop {
            let waiting = pool.0.lock().pop();
            let fresh = waiting.is_none();
            let subreaper = match waiting.map_or_else(Subreaper::clone_new, Ok) {
                Ok(subreaper) => subreaper,
                Err(err) => {
                    // SAFETY: from `Box::into_raw` above, lent to no subreaper.
                    drop(unsafe { Box::from_raw(plan) });
                    return Err(err);
                }
            };
            let frame = subreaper.frame();
            frame.status.store(0, Ordering::Relaxed);
            frame.reaped.store(false, Ordering::Relaxed);
            frame.plan.store(plan, Ordering::Release);
            let generation = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
            let ctl = subreaper.ctl.as_raw_fd();
            let Err(errno) = ctl::send(ctl, ctl::GO, generation, &fds[..count]) else {
                return Ok(Shim {
                    subreaper: Some(subreaper),
                    pool: pool.clone(),
                    generation,
                    plan,
                    cwd: cwd.to_path_buf(),
                });
            };
            // It never had the task (a message arrives whole or not at all): gone while it
            // waited, or a new one whose set-up failed.
            frame.plan.store(std::ptr::null_mut(), Ordering::Release);
            let broken = frame.broken.load(Ordering::Acquire);
            let _ = subreaper.end();
            if fresh {
                // SAFETY: from `Box::into_raw` above; no subreaper had it.
                drop(unsafe { Box::from_raw(plan) });
                let errno = if broken != 0 { broken } else { errno };
                return Err(io::Error::from_raw_os_error(errno));
            }
        }
    }

    impl Shim {
        /// The subreaper's pid (not the handler's).
        pub fn pid(&self) -> u32 {
            self.subreaper.as_ref().map_or(0, |s| s.held.pid())
        }

        /// What signals this task's tree from any thread — and nothing else once the task is
        /// done: its words carry the task's generation, and the subreaper heeds no other's.
        pub fn remote(&self) -> Remote {
            let ctl = self.subreaper.as_ref().map(|s| s.ctl.clone());
            let generation = self.generation;
            Remote(Arc::new(move |ask| {
                let tag = match ask {
                    Ask::Terminate => ctl::TERMINATE,
                    Ask::Kill => ctl::KILL,
                };
                if let Some(ctl) = &ctl {
                    let _ = ctl::send(ctl.as_raw_fd(), tag, generation, &[]);
                }
            }))
        }

        /// A descriptor that turns readable when the whole tree is gone (the subreaper says so,
        /// or its end of the control socket closed as it exited), for a caller polling it
        /// beside others.
        pub fn exit_fd(&self) -> Option<RawFd> {
            self.subreaper.as_ref().map(|s| s.ctl.as_raw_fd())
        }

        /// Whether the handler and everything it started are gone, waiting at most `timeout`.
        pub fn wait_exit(&self, timeout: Duration) -> bool {
            self.subreaper.as_ref().is_some_and(|s| {
                crate::sys::poll::poll_readable(&s.ctl.as_raw_fd(), timeout).unwrap_or(false)
            })
        }

        /// Wait until the task's tree is gone — the subreaper says so and is kept for the next
        /// task, or it exited (gave up on a tree, or was killed) and is reaped — and say how the
        /// handler ended, or that it never ran and why. The plan is taken back only once nothing
        /// can use it; not even then when the subreaper died inside the handler's clone
        /// (`Frame::cloning`): the handler may still be running on it until its exec, so the
        /// plan, the frame and the stacks are leaked.
        pub fn end(&mut self) -> io::Result<Ended> {
            let Some(subreaper) = self.subreaper.take() else {
                return Err(io::Error::other("the task's subreaper was already reaped"));
            };
            let mut fds = [-1; ctl::MAX_FDS];
            let done = loop {
                match ctl::receive(subreaper.ctl.as_raw_fd(), &mut fds) {
                    Heard::Message {
                        tag: ctl::DONE,
                        generation,
                        ..
                    } if generation == self.generation => break true,
                    Heard::Message { .. } => {}
                    Heard::End => break false,
                }
            };
            let frame = subreaper.frame();
            let (status, reaped) = (
                frame.status.load(Ordering::Acquire),
                frame.reaped.load(Ordering::Acquire),
            );
            let broken = frame.broken.load(Ordering::Acquire);
            if done {
                frame.plan.store(std::ptr::null_mut(), Ordering::Release);
                subreaper.keep(&self.pool.0);
            } else if subreaper.end()? {
                // The plan is leaked with the frame: the handler may still read it.
                return Ok(Ended::NotStarted(io::Error::other(KILLED_IN_CLONE)));
            }
            // SAFETY: from `Box::into_raw` in `start`, taken back once (the subreaper is taken
            // out of this value above): the subreaper is done with it — it said so, once its
            // handler's clone had returned — or it is reaped and was not inside that clone.
            let plan = unsafe { Box::from_raw(self.plan) };
            if broken != 0 {
                return Ok(Ended::NotStarted(io::Error::from_raw_os_error(broken)));
            }
            if let Err(err) = plan.outcome(&self.cwd) {
                return Ok(Ended::NotStarted(err));
            }
            if reaped {
                Ok(Ended::Exited(ExitStatus::from_raw(status)))
            } else {
                Err(io::Error::other(
                    "the handler's end could not be seen: it did not exit within 10 s of \
                     SIGKILL (stuck in the kernel), or its subreaper was killed",
                ))
            }
        }

        /// [`Shim::end`], a handler that never ran an `Err` saying why.
        pub fn reap(&mut self) -> io::Result<ExitStatus> {
            match self.end()? {
                Ended::Exited(status) => Ok(status),
                Ended::NotStarted(err) => Err(err),
            }
        }
    }

    impl Drop for Shim {
        fn drop(&mut self) {
            // Not ended: its tree is killed and its subreaper let go of — it may still use the
            // plan, the frame and the stacks, so all are leaked — and never given a task again.
            if self.subreaper.is_some() {
                self.remote().kill();
            }
            if let Some(subreaper) = self.subreaper.take() {
                // SAFETY: shutdown(2) on a socket the subreaper's value owns; integers only.
                unsafe { libc::shutdown(subreaper.ctl.as_raw_fd(), libc::SHUT_RDWR) };
                subreaper.abandon();
            }
        }
    }
}
