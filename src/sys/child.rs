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
            // A failed poll is read as "not yet": callers wait in loops with deadlines.
            return super::poll::poll_readable(fd, timeout).unwrap_or(false);
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
}

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
        };
        if pump.input.is_empty() {
            pump.stdin = None;
        }
        Ok(pump)
    }

    /// Move whatever is ready within `timeout`, also waking when `watch`'s child exits. Whether
    /// the child has exited.
    pub fn step(&mut self, watch: &ChildWatch, timeout: Duration) -> bool {
        use std::os::fd::AsRawFd;
        let fds = [
            watch.pidfd().unwrap_or(-1),
            self.stdout.as_ref().map_or(-1, AsRawFd::as_raw_fd),
            self.stderr.as_ref().map_or(-1, AsRawFd::as_raw_fd),
        ];
        let out_fd = self.stdin.as_ref().map_or(-1, AsRawFd::as_raw_fd);
        let tick = if watch.pidfd().is_some() {
            timeout
        } else {
            timeout.min(Duration::from_millis(5))
        };
        if super::poll::poll_io(&fds, out_fd, tick).is_err() {
            // Nothing to wait on that works: move what is ready, without spinning.
            std::thread::sleep(tick.min(Duration::from_millis(5)));
        }
        self.move_bytes();
        watch.wait_exit(Duration::ZERO)
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
        if !read_available(self.stderr.as_mut(), |bytes| {
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

/// Make this process the reaper of its orphaned descendants (`PR_SET_CHILD_SUBREAPER`), so a
/// handler's child that escaped its process group (`setsid`) is reparented here when the handler
/// exits, where [`children`] finds it and the session can end it. `false` where unsupported.
pub fn become_subreaper() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// The pids of the children the kernel hands this process: orphans reparented to it as a
/// subreaper, and children whose spawning thread has exited. Both go to the first live thread of
/// the process, which is the main thread for as long as the process runs (it never exits before
/// the process does), so its one `children` file lists them all — four system calls, however many
/// threads the door runs. Children a live thread spawned itself (running handlers) are listed
/// under that thread, not here. Empty without procfs (macOS), where no orphan is reparented to us
/// anyway: there is no subreaper there, and what escapes a handler's group goes to launchd.
pub fn children() -> Vec<u32> {
    // SAFETY: `getpid` takes no argument and cannot fail.
    let pid = unsafe { libc::getpid() };
    let Ok(list) = std::fs::read_to_string(format!("/proc/self/task/{pid}/children")) else {
        return Vec::new();
    };
    list.split_ascii_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// How long [`kill_and_reap_orphan`] waits for a SIGKILLed orphan to exit before leaving it to
/// the next sweep (a process in uninterruptible sleep can take a while to die).
const ORPHAN_REAP_WAIT: Duration = Duration::from_millis(100);

/// SIGKILL and reap `pid`, a child of ours that no `Child` handle owns (an orphan reparented to
/// this subreaper). Reaped by pid only, so no other child's status is taken; never blocks longer
/// than `ORPHAN_REAP_WAIT` — one that has not exited by then stays our zombie-to-be, and the
/// next sweep reaps it.
pub fn kill_and_reap_orphan(pid: u32) {
    let Some(raw) = super::proc::as_pid_t(pid) else {
        return;
    };
    // SAFETY: integers only; `pid` is our own unreaped child, so the number cannot have been
    // handed to another process.
    unsafe { libc::kill(raw, libc::SIGKILL) };
    if ChildWatch::new(pid).wait_exit(ORPHAN_REAP_WAIT) {
        // SAFETY: as above, and a null status pointer; it has exited, so this does not block.
        unsafe { libc::waitpid(raw, std::ptr::null_mut(), libc::WNOHANG) };
    }
}

/// A process forked from a session that outlives it just long enough to SIGKILL the handler
/// groups still registered with it: what ends a handler's children when the session itself is
/// SIGKILLed (the handler leader dies by its parent-death signal, [`super::spawn`]; what it
/// started would not).
///
/// The session writes `+pgid` when a handler starts and `-pgid` before the leader is reaped (so
/// a registered pgid can only name that handler's group) over a pipe whose write end only the
/// session holds. EOF — the session gone, however — makes the reaper SIGKILL every group still
/// registered and exit. It holds no other descriptor. An orderly end closes the pipe and reaps
/// it ([`GroupReaper::finish`]), so nothing the session started is left once it returns.
pub struct GroupReaper {
    /// `None` once [`GroupReaper::finish`] has closed it.
    write: std::sync::Mutex<Option<OwnedFd>>,
    pid: u32,
}

/// How long [`GroupReaper::finish`] gives the reaper to exit on EOF before SIGKILLing it.
const REAPER_EXIT_WAIT: Duration = Duration::from_secs(1);

/// The most handler groups a [`GroupReaper`] tracks at once (the manifest allows 1024 at once).
const REAPER_SLOTS: usize = 1024;

impl GroupReaper {
    /// Fork the reaper; `None` if it could not be started.
    pub fn start() -> Option<Self> {
        use std::os::fd::AsRawFd;
        let (read, write) = super::pipe::pipe().ok()?;
        let keep = read.as_raw_fd();
        // SAFETY: the child calls only async-signal-safe functions (close, read, kill, _exit;
        // close_range through syscall), allocates nothing and takes no lock, as a child forked
        // from a multithreaded process must.
        match unsafe { libc::fork() } {
            -1 => None,
            // SAFETY: this is the forked child, which is what `reaper_main` requires.
            0 => unsafe { reaper_main(keep) },
            pid => Some(Self {
                write: std::sync::Mutex::new(Some(write)),
                pid: pid as u32,
            }),
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Register handler group `pgid`.
    pub fn watch(&self, pgid: u32) {
        self.send(pgid as i32);
    }

    /// Forget handler group `pgid`; before its leader is reaped.
    pub fn unwatch(&self, pgid: u32) {
        self.send(-(pgid as i32));
    }

    /// The session is ending in order and no handler runs: close the pipe (the reaper exits on
    /// EOF, having no group left to kill), wait for it — SIGKILL after `REAPER_EXIT_WAIT` —
    /// and reap it. Later calls do nothing.
    pub fn finish(&self) {
        let closed = self.write.lock().unwrap_or_else(|p| p.into_inner()).take();
        if closed.is_none() {
            return;
        }
        drop(closed);
        let Some(raw) = super::proc::as_pid_t(self.pid) else {
            return;
        };
        if !ChildWatch::new(self.pid).wait_exit(REAPER_EXIT_WAIT) {
            // SAFETY: integers only; the reaper is our unreaped child, so its pid names it alone.
            unsafe { libc::kill(raw, libc::SIGKILL) };
        }
        // SAFETY: a null status pointer is allowed; `raw` is our own child, so this reaps only it.
        unsafe { libc::waitpid(raw, std::ptr::null_mut(), 0) };
    }

    fn send(&self, value: i32) {
        use std::os::fd::AsRawFd;
        let bytes = value.to_ne_bytes();
        let write = self.write.lock().unwrap_or_else(|p| p.into_inner());
        let Some(fd) = write.as_ref() else {
            return;
        };
        // SAFETY: a write of 4 bytes from a live buffer to our own pipe (atomic: under PIPE_BUF).
        unsafe {
            libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len());
        }
    }
}

/// The reaper's whole life, in the forked child.
///
/// # Safety
///
/// Call only in a child just forked from a (possibly multithreaded) process, with `keep` the
/// read end of the reaper's pipe: it closes every other descriptor, calls only async-signal-safe
/// functions and never returns.
unsafe fn reaper_main(keep: libc::c_int) -> ! {
    // SAFETY: plain system calls on integers and a stack buffer, each async-signal-safe, as the
    // caller's contract (a freshly forked child) requires.
    unsafe {
        // A group of its own, so no signal meant for the session's group (a terminal's ^C, the
        // launcher's SIGKILL to a peer's group) ends it before the session.
        libc::setpgid(0, 0);
        // Every descriptor but the pipe goes: the door, the handlers' pipes, stdio.
        close_all_but(keep);
        let mut groups = [0 as libc::pid_t; REAPER_SLOTS];
        let mut buf = [0u8; 4];
        let mut have = 0usize;
        loop {
            let n = libc::read(keep, buf.as_mut_ptr().add(have).cast(), 4 - have);
            // Reading errno builds no heap value: async-signal-safe.
            let interrupted = std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR);
            if n == 0 || (n < 0 && !interrupted) {
                break;
            }
            if n < 0 {
                continue;
            }
            have += n as usize;
            if have < 4 {
                continue;
            }
            have = 0;
            let value = i32::from_ne_bytes(buf);
            if value > 0 {
                if let Some(slot) = groups.iter_mut().find(|g| **g == 0) {
                    *slot = value;
                }
            } else if let Some(slot) = groups.iter_mut().find(|g| **g == -value) {
                *slot = 0;
            }
        }
        for &pgid in &groups {
            if pgid > 0 {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
        libc::_exit(0)
    }
}

/// Close every descriptor but `keep`, in a freshly forked child: `close_range(2)` where the
/// kernel has it (Linux ≥ 5.9), else one `close` per number below 65536 (a reaper forked under a
/// higher descriptor limit may keep one of those open: harmless, it only holds it).
///
/// # Safety
///
/// Only in a child about to live on `keep` alone: every other descriptor is gone afterwards.
unsafe fn close_all_but(keep: libc::c_int) {
    let keep = keep.max(0) as u32;
    let below = keep.checked_sub(1).map(|high| (0, high));
    for (low, high) in below.into_iter().chain([(keep + 1, u32::MAX)]) {
        #[cfg(target_os = "linux")]
        // SAFETY: three integers; the caller's contract: nothing in the range is needed any more.
        if unsafe { libc::syscall(libc::SYS_close_range, low, high, 0u32) } == 0 {
            continue;
        }
        for fd in low..=high.min(65535) {
            // SAFETY: as above; closing a number that is not open fails harmlessly.
            unsafe { libc::close(fd as libc::c_int) };
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
        let watch = ChildWatch::new(child.id());
        assert!(!watch.wait_exit(Duration::from_millis(50)));
        signal_group(child.id(), libc::SIGKILL).unwrap();
        assert!(watch.wait_exit(Duration::from_secs(10)));
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert!(signal_group(0, libc::SIGTERM).is_err());
    }
}
