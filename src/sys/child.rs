//! Child processes: signalling one's process group, moving a handler's pipes, and reaping the
//! children no one waits for.
//!
//! A child leading its own process group has its pid as its pgid. While the leader is unreaped —
//! exited or not — the kernel keeps its pid, and so its pgid, from being handed out again, so a
//! group signal sent before the reap can only reach the child and what it started: callers wait
//! for the exit *without* reaping ([`super::pidref::PidRef::wait_child_exit`]), signal the group
//! for stragglers, and reap last.

use std::time::{Duration, Instant};

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

/// A handler's three pipes, moved in one thread with `poll(2)`: the task's text written to its
/// stdin, its stdout kept up to a limit (the rest read and dropped), the tail of its stderr kept.
///
/// One thread and non-blocking pipes rather than a thread per pipe, so that nothing here can
/// block forever: after the handler's group is gone, [`Pump::drain`] reads what is left for a
/// bounded time and gives up on a pipe some escaped process still holds open.
pub struct Pump {
    stdin: Option<std::fs::File>,
    input: Vec<u8>,
    written: usize,
    stdout: Option<std::fs::File>,
    stderr: Option<std::fs::File>,
    pub out: Vec<u8>,
    out_limit: usize,
    pub err_tail: Vec<u8>,
    err_limit: usize,
    /// Stderr read since the last [`Pump::take_err`], for the session's log: at most
    /// [`MAX_ERR_PENDING`], the rest of a burst dropped (the log is bounded anyway).
    err_pending: Vec<u8>,
}

/// The most stderr held between two [`Pump::take_err`] calls (a handler writing faster than
/// its log is written loses the excess, never memory).
pub const MAX_ERR_PENDING: usize = 256 * 1024;

impl Pump {
    /// Take a child's pipes (our ends of its stdin, stdout and stderr) and set them
    /// non-blocking. The `Err` is a pipe that could not be made non-blocking (a blocking one
    /// could hang the pump).
    pub fn new(
        [stdin, stdout, stderr]: [std::fs::File; 3],
        input: Vec<u8>,
        out_limit: usize,
        err_limit: usize,
    ) -> std::io::Result<Self> {
        use std::os::fd::AsRawFd;
        for pipe in [&stdin, &stdout, &stderr] {
            super::pipe::set_nonblocking(pipe.as_raw_fd())?;
        }
        let (stdin, stdout, stderr) = (Some(stdin), Some(stdout), Some(stderr));
        let mut pump = Self {
            stdin,
            input,
            written: 0,
            stdout,
            stderr,
            out: Vec::new(),
            out_limit,
            err_tail: Vec::new(),
            err_limit,
            err_pending: Vec::new(),
        };
        if pump.input.is_empty() {
            pump.stdin = None;
        }
        Ok(pump)
    }

    /// Move whatever is ready within `timeout`, also waking when `exit_fd` (readable once the
    /// child's processes are gone) is; without one, the wait is a short tick.
    pub fn step(&mut self, exit_fd: Option<std::os::fd::RawFd>, timeout: Duration) {
        use std::os::fd::AsRawFd;
        let fds = [
            exit_fd.unwrap_or(-1),
            self.stdout.as_ref().map_or(-1, AsRawFd::as_raw_fd),
            self.stderr.as_ref().map_or(-1, AsRawFd::as_raw_fd),
        ];
        let out_fd = self.stdin.as_ref().map_or(-1, AsRawFd::as_raw_fd);
        let tick = if exit_fd.is_some() {
            timeout
        } else {
            timeout.min(Duration::from_millis(5))
        };
        if super::poll::poll_io(&fds, out_fd, tick).is_err() {
            // Nothing to wait on that works: move what is ready, without spinning.
            std::thread::sleep(tick.min(Duration::from_millis(5)));
        }
        self.move_bytes();
    }

    /// After the child's group is gone: read what is left, until both pipes reach EOF or `grace`
    /// passes (a process that escaped the group may hold them open; it is not waited for).
    pub fn drain(&mut self, grace: Duration) {
        use std::os::fd::AsRawFd;
        self.stdin = None;
        let deadline = Instant::now() + grace;
        while self.stdout.is_some() || self.stderr.is_some() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let fds = [
                self.stdout.as_ref().map_or(-1, AsRawFd::as_raw_fd),
                self.stderr.as_ref().map_or(-1, AsRawFd::as_raw_fd),
            ];
            if super::poll::poll_io(&fds, -1, left).is_err() {
                std::thread::sleep(left.min(Duration::from_millis(5)));
            }
            self.move_bytes();
        }
    }

    /// The stderr read since the last call (none: empty).
    pub fn take_err(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.err_pending)
    }

    fn move_bytes(&mut self) {
        use std::io::Write;
        if let Some(stdin) = &mut self.stdin {
            loop {
                match stdin.write(&self.input[self.written..]) {
                    Ok(n) if n > 0 => self.written += n,
                    Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                    // Written in full, or the handler closed its stdin (EPIPE): either way done.
                    _ => {
                        self.written = self.input.len();
                        break;
                    }
                }
                if self.written == self.input.len() {
                    break;
                }
            }
            if self.written == self.input.len() {
                self.stdin = None;
            }
        }
        let (out, out_limit) = (&mut self.out, self.out_limit);
        if !read_available(self.stdout.as_mut(), |bytes| {
            let room = out_limit.saturating_sub(out.len());
            out.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }) {
            self.stdout = None;
        }
        let (tail, err_limit) = (&mut self.err_tail, self.err_limit);
        let pending = &mut self.err_pending;
        if !read_available(self.stderr.as_mut(), |bytes| {
            let room = MAX_ERR_PENDING.saturating_sub(pending.len());
            pending.extend_from_slice(&bytes[..bytes.len().min(room)]);
            tail.extend_from_slice(bytes);
            if tail.len() > err_limit {
                tail.drain(..tail.len() - err_limit);
            }
        }) {
            self.stderr = None;
        }
    }
}

/// Read everything `pipe` (non-blocking) holds now into `keep`; `false` once it is at EOF or
/// broken (and so should be closed), `true` while it may still deliver. `None` stays closed.
fn read_available(pipe: Option<&mut impl std::io::Read>, mut keep: impl FnMut(&[u8])) -> bool {
    let Some(pipe) = pipe else {
        return false;
    };
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match pipe.read(&mut chunk) {
            Ok(0) => return false,
            Ok(n) => keep(&chunk[..n]),
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
}

/// Reap every child of this process that has exited and that no thread of it waits for: a
/// wrapper's sidecar this process inherited from before `exec mur`, an orphan reparented to it
/// as a namespace's pid 1. Never signals one: a process the session did not start is only ever
/// reaped, once it has exited on its own.
///
/// They are the children the kernel lists under the main thread (where it reparents orphans and
/// where a child of an exited thread goes; the main thread lives as long as the process and
/// starts no child itself in a session); a running handler's subreaper is listed under the task
/// thread that started it and waits for it. Reaped by pid, so no other child's status is taken.
/// Nothing without procfs (macOS), where no orphan is reparented to a session.
pub fn reap_strangers() {
    // SAFETY: `getpid` takes no argument and cannot fail.
    let pid = unsafe { libc::getpid() };
    let Ok(list) = std::fs::read_to_string(format!("/proc/self/task/{pid}/children")) else {
        return;
    };
    for child in list.split_ascii_whitespace().filter_map(|p| p.parse().ok()) {
        // SAFETY: a zeroed `siginfo_t` the kernel fills; `child` is our own child, and WNOHANG
        // reaps it only if it has already exited.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(libc::P_PID, child, &mut info, libc::WEXITED | libc::WNOHANG);
        }
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
        let held = crate::sys::pidref::PidRef::child(child.id());
        assert!(!held.wait_child_exit(Duration::from_millis(50)));
        signal_group(child.id(), libc::SIGKILL).unwrap();
        assert!(held.wait_child_exit(Duration::from_secs(10)));
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert!(signal_group(0, libc::SIGTERM).is_err());
    }
}
