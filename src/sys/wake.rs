//! One process-wide wake-up: a non-blocking self-pipe that signal handlers and threads write a
//! byte to, and that waits poll alongside whatever else they wait for.
//!
//! It replaces sleeping in a loop: a session notices a signal, `session/stop`, its lifeline
//! closing or its `--task` finishing the moment it happens, and a launcher its entry member's
//! exit, instead of at the next tick.

use std::os::fd::{IntoRawFd, RawFd};
use std::sync::Once;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

static READ: AtomicI32 = AtomicI32::new(-1);
static WRITE: AtomicI32 = AtomicI32::new(-1);
static INIT: Once = Once::new();

/// Create the pipe (once). Call before installing a signal handler that calls [`notify`]. The
/// `Err` (no descriptor left) means every wake-up would wait out its caller's longest sleep:
/// the caller decides whether that is acceptable.
pub fn init() -> std::io::Result<()> {
    INIT.call_once(|| {
        // Both ends stay open for the rest of the process: every wait polls the read end, and a
        // signal handler may write to the other at any moment.
        if let Ok((read, write)) = super::pipe::nonblocking_pipe() {
            READ.store(read.into_raw_fd(), Ordering::SeqCst);
            WRITE.store(write.into_raw_fd(), Ordering::SeqCst);
        }
    });
    if READ.load(Ordering::SeqCst) < 0 {
        return Err(std::io::Error::other(
            "no wake-up pipe (out of descriptors?)",
        ));
    }
    Ok(())
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
/// the pipe. Returns whether `extra` was readable. Without a wake-up pipe ([`init`] failed) or
/// when `poll` fails, this is a plain sleep of `timeout`: callers wait in loops that look again.
pub fn wait(extra: Option<RawFd>, timeout: Duration) -> bool {
    let wake = READ.load(Ordering::SeqCst);
    match super::poll::poll_fds(&[wake, extra.unwrap_or(-1)], timeout) {
        Ok(ready) => {
            if ready[0] {
                drain(wake);
            }
            ready[1]
        }
        Err(_) => {
            std::thread::sleep(timeout);
            false
        }
    }
}

/// Read everything waiting on non-blocking `fd`.
pub fn drain(fd: RawFd) {
    let mut sink = [0u8; 64];
    // SAFETY: a live buffer of the given length; callers pass non-blocking descriptors.
    while unsafe { libc::read(fd, sink.as_mut_ptr().cast(), sink.len()) } > 0 {}
}
