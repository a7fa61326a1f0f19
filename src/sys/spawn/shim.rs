//! A task's processes as one thing: the handler and everything it starts, at any depth, ended
//! together and never mistaken for anything else.
//!
//! On Linux every handler runs under a subreaper of its own (`reaper.rs`): a small process cloned
//! from the session that starts the handler, is reparented everything the handler orphans
//! (`setsid`, double forks, any depth), and kills that whole tree — its own children only,
//! generation after generation, until none is left — when the handler exits, when the session
//! asks ([`Remote`]), or when the session is gone (its control socket reaches EOF: a SIGKILLed
//! session leaves nothing behind either). The session itself is no subreaper: a process it did
//! not start — a wrapper's sidecar from before `exec mur`, an orphan it adopts as a container's
//! pid 1 — is never attributed to a task, never signalled ([`crate::sys::child::reap_strangers`]
//! only reaps them).
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
//! (`CLONE_VM`). What it cannot do: outlive a SIGKILL aimed at itself (only the user can send
//! one): its handler then dies by its parent-death signal, but what the handler orphaned is
//! reparented past it, to init.
//!
//! Elsewhere (macOS) the handler is a direct child leading its own group (`group.rs`), signalled
//! as a group — what escapes its group escapes the session.

#[cfg(target_os = "linux")]
pub use linux::{Shim, start};

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
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
    use std::time::Duration;

    use super::{Ask, Remote};
    use crate::sys::raw;
    use crate::sys::spawn::Ended;
    use crate::sys::spawn::exec::Exec;
    use crate::sys::spawn::reaper::{self, Frame};
    use crate::sys::spawn::stack::Stack;

    /// Why a handler has no status, when its subreaper died inside the handler's clone (the
    /// frame and the handler's stack are then leaked: [`Frame::cloning`]).
    const KILLED_IN_CLONE: &str = "its subreaper was killed while it started the handler";

    /// A running task's subreaper, as the session holds it. Reap it with [`Shim::end`]; one
    /// dropped unreaped is told to kill its tree, and its frame and stacks are leaked — it may
    /// still be reading them.
    pub struct Shim {
        pid: libc::pid_t,
        ctl: Arc<UnixStream>,
        /// The subreaper's frame, from `Box::into_raw`: read here only once the subreaper is
        /// reaped, and given back to a `Box` by [`Shim::end`] alone, once no process can use
        /// it; `None` once taken back or leaked.
        frame: Option<*mut Frame>,
        /// The subreaper's stack and the handler's (until its exec).
        stacks: Option<[Stack; 2]>,
        /// The handler's workdir, named when it could not be entered.
        cwd: std::path::PathBuf,
    }

    // SAFETY: the frame pointer is this value's alone to free, and it reads the frame only
    // through shared references to fields that are atomic or never written after the clone —
    // from whichever thread holds it.
    unsafe impl Send for Shim {}

    /// Start the handler `exec` describes under a subreaper of its own, leading its own group
    /// and dying with the subreaper; `cwd` names its workdir in errors. Returns once the
    /// subreaper is cloned, without waiting for the handler's start: whether it ran, or why
    /// not, is read from the frame once the subreaper is reaped ([`Shim::end`]). The `Err`: no
    /// subreaper could be started.
    pub fn start(mut exec: Exec, cwd: &std::path::Path) -> io::Result<Shim> {
        let (ours, theirs) = UnixStream::pair()?;
        let stacks = [Stack::take()?, Stack::take()?];
        // The subreaper puts signals back to their defaults before it starts the handler, which
        // dies with it.
        exec.reset_signals = false;
        exec.die_with_parent = true;
        exec.own_group = true;
        let frame = Box::into_raw(Box::new(Frame {
            exec,
            ctl: theirs.as_raw_fd(),
            handler_stack: stacks[1].top(),
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
        // SAFETY: `reaper::main` makes raw calls only, with no thread pointer, on its guarded
        // stack and the frame. The `Shim` made below keeps both; it frees them only once the
        // subreaper is reaped and no handler can still be inside its clone ([`Shim::end`]), and
        // leaks them otherwise.
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
        let pid = match cloned {
            Ok(pid) => pid as libc::pid_t,
            Err(errno) => {
                // SAFETY: from `Box::into_raw` above; the clone failed, so no process has it.
                drop(unsafe { Box::from_raw(frame) });
                return Err(io::Error::from_raw_os_error(errno));
            }
        };
        Ok(Shim {
            pid,
            ctl: Arc::new(ours),
            frame: Some(frame),
            stacks: Some(stacks),
            cwd: cwd.to_path_buf(),
        })
    }

    impl Shim {
        /// The subreaper's pid (not the handler's).
        pub fn pid(&self) -> u32 {
            self.pid as u32
        }

        /// What signals this task's tree from any thread.
        pub fn remote(&self) -> Remote {
            let ctl = self.ctl.clone();
            Remote(Arc::new(move |ask| {
                let byte = match ask {
                    Ask::Terminate => reaper::TERMINATE,
                    Ask::Kill => reaper::KILL,
                };
                crate::sys::socket::send_byte(&ctl, byte);
            }))
        }

        /// A descriptor that turns readable when the whole tree is gone (the subreaper's end
        /// of the control socket closed as it exited), for a caller polling it beside others.
        pub fn exit_fd(&self) -> Option<std::os::fd::RawFd> {
            Some(self.ctl.as_raw_fd())
        }

        /// Whether the handler and everything it started are gone, waiting at most `timeout`.
        pub fn wait_exit(&self, timeout: Duration) -> bool {
            crate::sys::poll::poll_readable(&*self.ctl, timeout).unwrap_or(false)
        }

        /// Wait for the subreaper to exit (it does once the tree is empty, or it gave up on a
        /// process stuck in the kernel) and reap it: how the handler ended, or that it never
        /// ran and why. The frame and stacks are freed only once nothing can use them: after
        /// the reap, and not even then when the subreaper died inside the handler's clone
        /// (`Frame::cloning`) — the handler may still be running on them until its exec, so
        /// they are leaked.
        pub fn end(&mut self) -> io::Result<Ended> {
            // Not waited for twice: once reaped, its pid may be another child's.
            let Some(frame) = self.frame.take() else {
                return Err(io::Error::other("the task's subreaper was already reaped"));
            };
            let waited = super::super::wait(self.pid as u32);
            let stacks = self.stacks.take();
            if let Err(err) = waited {
                // Not reaped: it may still be running on its stack and the frame.
                std::mem::forget(stacks);
                return Err(err);
            }
            // SAFETY: from `Box::into_raw` in `start`, not yet freed (it was still in
            // `self.frame`); read through a shared reference to an atomic, as the subreaper and
            // a handler inside its clone do. The subreaper is gone; a handler may not be.
            if unsafe { &*frame }.cloning.load(Ordering::Acquire) {
                if let Some([own, handler]) = stacks {
                    own.give_back();
                    std::mem::forget(handler);
                }
                return Ok(Ended::NotStarted(io::Error::other(KILLED_IN_CLONE)));
            }
            stacks.into_iter().flatten().for_each(Stack::give_back);
            // SAFETY: from `Box::into_raw` in `start`, taken out of `self.frame` above so freed
            // once; the subreaper is reaped and was not inside the handler's clone, so the
            // handler has exec'd or exited (or never was) and no process uses the frame now.
            let frame = unsafe { Box::from_raw(frame) };
            if let Err(err) = frame.exec.outcome(&self.cwd) {
                return Ok(Ended::NotStarted(err));
            }
            if frame.reaped.load(Ordering::Acquire) {
                Ok(Ended::Exited(ExitStatus::from_raw(
                    frame.status.load(Ordering::Acquire),
                )))
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
            // Unreaped: the subreaper (and through it the handler) may still use the frame and
            // stacks, so both are leaked.
            if self.frame.take().is_some() {
                self.remote().kill();
                std::mem::forget(self.stacks.take());
            }
        }
    }
}
