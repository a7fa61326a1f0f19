//! One process held by its pid and, where the kernel gives one, a pidfd: the one handle mur holds
//! a single process by, whatever it is — a recorded session ([`crate::process::Target`]), a
//! formation member, a handler where there is no subreaper — as systemd's `PidRef` is.
//!
//! With a pidfd, waiting for the exit polls it and a signal goes through `pidfd_send_signal(2)`:
//! that process and no other, never a later holder of the number. Without one (`ENOSYS`: Linux
//! before 5.3, macOS) the caller says how an exit is seen and whether a bare `kill(2)` is safe —
//! for an unreaped child of ours it is (its number cannot be handed on); for anything else the
//! caller re-verifies first. Whether a process *may* be signalled is never decided here.

use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// How often an exit is looked for where there is no pidfd to poll.
const TICK: Duration = Duration::from_millis(5);

pub struct PidRef {
    pid: libc::pid_t,
    pidfd: Option<OwnedFd>,
}

impl PidRef {
    /// Hold `pid`: with its pidfd where the kernel has them. Only `ENOSYS` means "no pidfds
    /// here" and gives a handle without one; any other failure is the `Err` (`ESRCH`: no such
    /// process, or a number outside `1..=pid_t::MAX`).
    pub fn open(pid: u32) -> io::Result<Self> {
        let Some(pid) = super::proc::as_pid_t(pid) else {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        };
        let pidfd = match super::signal::pidfd_open(pid) {
            Ok(fd) => Some(fd),
            Err(err) if err.raw_os_error() == Some(libc::ENOSYS) => None,
            Err(err) => return Err(err),
        };
        Ok(Self { pid, pidfd })
    }

    /// Hold `pid`, an unreaped child of ours (so its number names it until it is reaped): with
    /// its pidfd if one can be had, else without.
    pub fn child(pid: u32) -> Self {
        let raw = super::proc::as_pid_t(pid).unwrap_or(0);
        Self::open(pid).unwrap_or(Self {
            pid: raw,
            pidfd: None,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// The pidfd, for a caller polling it beside other descriptors: readable once the process
    /// has exited.
    pub fn pidfd(&self) -> Option<RawFd> {
        use std::os::fd::AsRawFd;
        self.pidfd.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Whether this handle has a pidfd: a signal through it reaches this process or nothing.
    pub fn pinned(&self) -> bool {
        self.pidfd.is_some()
    }

    /// Send `signal` through the pidfd. `ENOSYS` without one: the caller decides whether a bare
    /// `kill(2)` is safe ([`PidRef::signal_child`] for a child of ours).
    pub fn signal(&self, signal: libc::c_int) -> io::Result<()> {
        match &self.pidfd {
            Some(fd) => super::signal::pidfd_send_signal(fd, signal),
            None => Err(io::Error::from_raw_os_error(libc::ENOSYS)),
        }
    }

    /// Send `signal` to this unreaped child of ours: through the pidfd, else by `kill(2)`,
    /// which cannot reach another process while the child is unreaped.
    pub fn signal_child(&self, signal: libc::c_int) -> io::Result<()> {
        match self.signal(signal) {
            Err(err) if err.raw_os_error() == Some(libc::ENOSYS) => {
                super::signal::kill(self.pid, signal)
            }
            sent => sent,
        }
    }

    /// Whether the process has exited, waiting at most `timeout`: the pidfd polled, or, without
    /// one, `gone()` asked every few milliseconds.
    pub fn wait_exit(&self, timeout: Duration, gone: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match &self.pidfd {
                Some(fd) => match super::poll::poll_readable(fd, left) {
                    Ok(true) => return true,
                    Ok(false) => {}
                    // No evidence of an exit: look again, without spinning, until the deadline.
                    Err(_) => std::thread::sleep(left.min(TICK)),
                },
                None => {
                    if gone() {
                        return true;
                    }
                    std::thread::sleep(left.min(TICK));
                }
            }
            if Instant::now() >= deadline {
                return false;
            }
        }
    }

    /// [`PidRef::wait_exit`] for an unreaped child of ours, seen to exit without a pidfd by
    /// `waitid(WNOWAIT)`, which leaves it unreaped.
    pub fn wait_child_exit(&self, timeout: Duration) -> bool {
        self.wait_exit(timeout, || self.child_exited())
    }

    /// Wait for this child of ours to exit and reap it (`EINTR` retried): through its pidfd
    /// (`waitid(P_PIDFD)`, Linux 5.4), so that a number reaped elsewhere meanwhile and handed
    /// on to another child is never waited for; by pid without one. `ECHILD`: it was reaped
    /// already.
    #[cfg(target_os = "linux")]
    pub fn reap_child(&self) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        if let Some(fd) = &self.pidfd {
            loop {
                // SAFETY: a zeroed `siginfo_t` the kernel fills; the pidfd is ours and open.
                let rc = unsafe {
                    let mut info: libc::siginfo_t = std::mem::zeroed();
                    libc::waitid(
                        libc::P_PIDFD,
                        fd.as_raw_fd() as libc::id_t,
                        &mut info,
                        libc::WEXITED,
                    )
                };
                if rc == 0 {
                    return Ok(());
                }
                let err = io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EINTR) => {}
                    // A kernel with pidfds but not `P_PIDFD` (5.3): by pid, below.
                    Some(libc::EINVAL) => break,
                    _ => return Err(err),
                }
            }
        }
        super::spawn::wait(self.pid as u32).map(|_| ())
    }

    /// `waitid(WEXITED | WNOHANG | WNOWAIT)`: has this child exited, leaving it unreaped.
    fn child_exited(&self) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn a_child_is_signalled_and_seen_to_exit_before_its_reap() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let held = PidRef::child(child.id());
        assert!(!held.wait_child_exit(Duration::from_millis(50)));
        held.signal_child(libc::SIGTERM).unwrap();
        assert!(held.wait_child_exit(Duration::from_secs(10)));
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGTERM));
    }

    #[cfg(target_os = "linux")]
    #[test]
    // The children are reaped through `reap_child` and `spawn::wait`, which std cannot see.
    #[allow(clippy::zombie_processes)]
    fn a_child_is_reaped_through_its_pidfd_and_one_reaped_elsewhere_is_echild() {
        let child = std::process::Command::new("true").spawn().unwrap();
        let held = PidRef::child(child.id());
        held.reap_child().unwrap();
        assert_eq!(
            held.reap_child().unwrap_err().raw_os_error(),
            Some(libc::ECHILD)
        );
        // Reaped by its number elsewhere: its handle then waits for nothing else of ours.
        let gone = std::process::Command::new("true").spawn().unwrap();
        let held = PidRef::child(gone.id());
        crate::sys::spawn::wait(gone.id()).unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert_eq!(
            held.reap_child().unwrap_err().raw_os_error(),
            Some(libc::ECHILD)
        );
        assert!(
            other.try_wait().unwrap().is_none(),
            "another child was not waited for"
        );
        other.kill().unwrap();
        other.wait().unwrap();
    }

    #[test]
    fn no_process_and_numbers_out_of_range_are_esrch() {
        for pid in [0, u32::MAX] {
            let err = PidRef::open(pid).err().unwrap();
            assert_eq!(err.raw_os_error(), Some(libc::ESRCH));
        }
    }
}
