//! Where there is no subreaper (macOS): the handler is a direct child leading its own process
//! group, and the group is what is signalled. What leaves the group escapes the task.

use std::io;
use std::process::{Command, ExitStatus};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Ask, Ended, Remote};
use crate::sys::child::signal_group;
use crate::sys::pidref::PidRef;

/// A running handler, as the session holds it.
pub struct Shim {
    pid: u32,
    /// Set, under its lock, just before the leader is reaped: from then on its pid — the group's
    /// id — may name another group, and no remote signals it.
    reaped: Arc<Mutex<bool>>,
}

/// Start `command` (its stdio set) leading its own process group.
pub fn start(mut command: Command) -> io::Result<Shim> {
    use std::os::unix::process::CommandExt;
    // The child is reaped by pid: dropping std's handle neither waits nor kills.
    let pid = command.process_group(0).spawn()?.id();
    Ok(Shim {
        pid,
        reaped: Arc::default(),
    })
}

impl Shim {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn remote(&self) -> Remote {
        let (pid, reaped) = (self.pid, self.reaped.clone());
        Remote(Arc::new(move |ask| {
            let reaped = reaped.lock().unwrap_or_else(|p| p.into_inner());
            if !*reaped {
                let signal = match ask {
                    Ask::Terminate => libc::SIGTERM,
                    Ask::Kill => libc::SIGKILL,
                };
                let _ = signal_group(pid, signal);
            }
        }))
    }

    /// No descriptor turns readable at its exit here: callers tick.
    pub fn exit_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }

    pub fn wait_exit(&self, timeout: Duration) -> bool {
        PidRef::child(self.pid).wait_child_exit(timeout)
    }

    /// [`Shim::reap`]: a handler here either ran or failed its spawn, never in between.
    pub fn end(&mut self) -> io::Result<Ended> {
        self.reap().map(Ended::Exited)
    }

    /// SIGKILL what is left of the group while the leader still holds its id, then reap it.
    pub fn reap(&mut self) -> io::Result<ExitStatus> {
        {
            let mut reaped = self.reaped.lock().unwrap_or_else(|p| p.into_inner());
            let _ = signal_group(self.pid, libc::SIGKILL);
            *reaped = true;
        }
        crate::sys::spawn::wait(self.pid)
    }
}
