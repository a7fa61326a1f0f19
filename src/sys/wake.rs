//! One process-wide wake-up: a non-blocking self-pipe that signal handlers and threads write a
//! byte to, and that waits poll alongside whatever else they wait for.
//!
//! It replaces sleeping in a loop: a session notices a signal, `session/stop`, its lifeline
//! closing or its `--task` finishing the moment it happens, and a launcher its entry member's
//! exit, instead of at the next tick.

use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
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

/// A wake-up of one waiter's own: a non-blocking self-pipe, with a flag so that however many
/// times it is notified before the waiter looks, one byte is written. Used as a
/// [`Waker`](std::task::Waker)
/// (`std::task::Wake`), so whoever notifies under a lock that must not call the kernel can leave
/// the write for after it is released.
pub struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    /// A byte is written or about to be, and the waiter has not yet [`Pipe::take`]n it.
    armed: AtomicBool,
}

impl Pipe {
    /// A new pipe; `Err` when no descriptor is left.
    pub fn new() -> std::io::Result<Self> {
        let (read, write) = super::pipe::nonblocking_pipe()?;
        Ok(Self {
            read,
            write,
            armed: AtomicBool::new(false),
        })
    }

    /// Whether a notification is to be written now: true for the first since the waiter last
    /// took one, whose caller then writes it ([`Pipe::notify`], or its waker later).
    pub fn arm(&self) -> bool {
        !self.armed.swap(true, Ordering::SeqCst)
    }

    /// Write the byte. Errors are ignored: a full pipe already holds a wake-up.
    pub fn notify(&self) {
        // SAFETY: a one-byte buffer that outlives the call, on a descriptor this pipe owns.
        unsafe { libc::write(self.write.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
    }

    /// The end to poll for readability.
    pub fn fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// Drain the pipe and disarm it: the waiter looks at what it waits for right after, so a
    /// notification that arms it again from now on is not lost.
    pub fn take(&self) {
        drain(self.read.as_raw_fd());
        self.armed.store(false, Ordering::SeqCst);
    }
}

impl std::task::Wake for Pipe {
    fn wake(self: std::sync::Arc<Self>) {
        self.notify();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.notify();
    }
}
