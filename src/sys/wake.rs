//! One process-wide wake-up: a non-blocking self-pipe that signal handlers and threads write a
//! byte to, and that waits poll alongside whatever else they wait for.
//!
//! It replaces sleeping in a loop: a session notices a signal, `session/stop`, its lifeline
//! closing or its `--task` finishing the moment it happens, and a launcher its entry member's
//! exit, instead of at the next tick.

use std::os::fd::RawFd;
use std::sync::Once;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

static READ: AtomicI32 = AtomicI32::new(-1);
static WRITE: AtomicI32 = AtomicI32::new(-1);
static INIT: Once = Once::new();

/// Create the pipe (once). Call before installing a signal handler that calls [`notify`].
pub fn init() {
    INIT.call_once(|| {
        let mut fds = [-1 as libc::c_int; 2];
        // SAFETY: `fds` is a live two-element array; the flags make both ends non-blocking and
        // close-on-exec, so no child inherits them and a full pipe never blocks a writer.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } == 0 {
            READ.store(fds[0], Ordering::SeqCst);
            WRITE.store(fds[1], Ordering::SeqCst);
        }
    });
}

/// Wake whoever waits. Async-signal-safe: one `write(2)` of one byte, errors ignored (a full
/// pipe already holds a wake-up).
pub fn notify() {
    let fd = WRITE.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: a one-byte buffer that outlives the call; `write` is async-signal-safe.
        unsafe { libc::write(fd, [1u8].as_ptr().cast(), 1) };
    }
}

/// Wait until [`notify`] is called, `extra` (if any) is readable, or `timeout` passes; then drain
/// the pipe. Returns whether `extra` was readable.
pub fn wait(extra: Option<RawFd>, timeout: Duration) -> bool {
    init();
    let wake = READ.load(Ordering::SeqCst);
    let ready = poll_fds(&[wake, extra.unwrap_or(-1)], timeout);
    if ready[0] {
        drain(wake);
    }
    ready[1]
}

/// Read everything waiting on non-blocking `fd`.
pub fn drain(fd: RawFd) {
    let mut sink = [0u8; 64];
    // SAFETY: a live buffer of the given length; callers pass non-blocking descriptors.
    while unsafe { libc::read(fd, sink.as_mut_ptr().cast(), sink.len()) } > 0 {}
}

/// `poll(2)` for readability (or hang-up) on `fds`; a negative one is ignored. `EINTR` reads as
/// nothing ready.
pub fn poll_fds(fds: &[RawFd], timeout: Duration) -> Vec<bool> {
    poll_io(fds, -1, timeout)
}

/// `poll(2)` for readability on `read_fds` and writability on `write_fd` (negative descriptors
/// are ignored), for at most `timeout`; which of `read_fds` are ready.
pub fn poll_io(read_fds: &[RawFd], write_fd: RawFd, timeout: Duration) -> Vec<bool> {
    let mut polled: Vec<libc::pollfd> = read_fds
        .iter()
        .map(|&fd| (fd, libc::POLLIN))
        .chain(std::iter::once((write_fd, libc::POLLOUT)))
        .map(|(fd, events)| libc::pollfd {
            fd,
            events,
            revents: 0,
        })
        .collect();
    let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `polled` is a live array of valid `pollfd`s whose length is passed with it.
    unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, millis) };
    polled[..read_fds.len()]
        .iter()
        .map(|p| p.revents != 0)
        .collect()
}
