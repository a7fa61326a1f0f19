//! Moving a running handler's pipes: no system call of its own (non-blocking reads and writes
//! under [`crate::sys::poll`]), only the session's policy of what is kept — its stdout up to the
//! answer's limit, the tail of its stderr, the stderr not yet logged.

use std::time::{Duration, Instant};

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
            crate::sys::pipe::set_nonblocking(pipe.as_raw_fd())?;
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
    /// child's processes are gone) is; without one, the wait is a short tick. Whether `exit_fd`
    /// was readable. A pipe the wait did not report ready is not read: that read would only
    /// say `EAGAIN`.
    pub fn step(&mut self, exit_fd: Option<std::os::fd::RawFd>, timeout: Duration) -> bool {
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
        match crate::sys::poll::poll_io(&fds, out_fd, tick) {
            Ok(ready) => {
                self.move_bytes([ready[1], ready[2]]);
                ready[0]
            }
            Err(_) => {
                // Nothing to wait on that works: move what is ready, without spinning.
                std::thread::sleep(tick.min(Duration::from_millis(5)));
                self.move_bytes([true; 2]);
                false
            }
        }
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
            let ready = crate::sys::poll::poll_io(&fds, -1, left).unwrap_or_else(|_| {
                std::thread::sleep(left.min(Duration::from_millis(5)));
                vec![true; 2]
            });
            self.move_bytes([ready[0], ready[1]]);
        }
    }

    /// The stderr read since the last call (none: empty).
    pub fn take_err(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.err_pending)
    }

    /// Write what stdin takes now, and read stdout and stderr where `ready` says.
    fn move_bytes(&mut self, [out_ready, err_ready]: [bool; 2]) {
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
        if out_ready
            && !read_available(self.stdout.as_mut(), |bytes| {
                let room = out_limit.saturating_sub(out.len());
                out.extend_from_slice(&bytes[..bytes.len().min(room)]);
            })
        {
            self.stdout = None;
        }
        let (tail, err_limit) = (&mut self.err_tail, self.err_limit);
        let pending = &mut self.err_pending;
        if err_ready
            && !read_available(self.stderr.as_mut(), |bytes| {
                let room = MAX_ERR_PENDING.saturating_sub(pending.len());
                pending.extend_from_slice(&bytes[..bytes.len().min(room)]);
                tail.extend_from_slice(bytes);
                if tail.len() > err_limit {
                    tail.drain(..tail.len() - err_limit);
                }
            })
        {
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
