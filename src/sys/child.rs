//! Handler processes this process started: waiting for them without reaping, and signalling
//! their process groups.
//!
//! A handler leads its own process group (its pgid is its pid). While the leader is unreaped —
//! exited or not — the kernel keeps its pid, and so its pgid, from being handed out again, so a
//! group signal sent before the reap can only reach the handler and what it started. That is why
//! [`ChildWatch::wait_exit`] waits *without* reaping: the caller signals the group for stragglers
//! first, and reaps (`Child::wait`) last.

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

/// A way to wait for one unreaped child of ours to exit.
pub struct ChildWatch {
    pid: libc::pid_t,
    pidfd: Option<OwnedFd>,
}

impl ChildWatch {
    /// Watch `pid`, which must be an unreaped child of this process.
    pub fn new(pid: u32) -> Self {
        let pid = super::proc::as_pid_t(pid).unwrap_or(0);
        Self {
            pid,
            pidfd: super::signal::pidfd_open(pid).ok(),
        }
    }

    /// Whether the child has exited, waiting at most `timeout`. Never reaps it.
    pub fn wait_exit(&self, timeout: Duration) -> bool {
        if let Some(fd) = &self.pidfd {
            return super::signal::poll_readable(fd, timeout);
        }
        let deadline = Instant::now() + timeout;
        loop {
            if self.exited_now() {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            std::thread::sleep(left.min(Duration::from_millis(5)));
        }
    }

    /// The pidfd, for a caller that polls it beside other descriptors: readable once the child
    /// has exited. `None` where the kernel has no pidfds.
    pub fn pidfd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        self.pidfd.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// `waitid(WEXITED | WNOHANG | WNOWAIT)`: has it exited, leaving it unreaped.
    fn exited_now(&self) -> bool {
        // SAFETY: `info` is a zeroed `siginfo_t` the kernel fills; no other pointer is passed.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let rc = libc::waitid(
                libc::P_PID,
                self.pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            rc != 0 || info.si_pid() != 0
        }
    }
}

/// Send `signal` to the process group `pgid` led by an unreaped child of ours. A pgid of 0 or
/// one that does not fit a `pid_t` is refused (`killpg(0)` would signal our own group).
pub fn signal_group(pgid: u32, signal: libc::c_int) -> std::io::Result<()> {
    let Some(pgid) = super::proc::as_pid_t(pgid) else {
        return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
    };
    // SAFETY: integers only; `pgid` is positive, so this names one group, never ours by 0.
    if unsafe { libc::killpg(pgid, signal) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn a_group_is_signalled_and_its_leader_seen_to_exit_before_the_reap() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let watch = ChildWatch::new(child.id());
        assert!(!watch.wait_exit(Duration::from_millis(50)));
        signal_group(child.id(), libc::SIGKILL).unwrap();
        assert!(watch.wait_exit(Duration::from_secs(10)));
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert!(signal_group(0, libc::SIGTERM).is_err());
    }
}
