//! `poll(2)`, the one way anything in `mur` waits on descriptors: sockets, pipes, pidfds and the
//! wake-up pipe.
//!
//! `EINTR` reads as "nothing ready yet" (the caller's loop looks at its deadline again); any other
//! failure is the `Err`, for the caller to decide on — never silently a timeout. A timeout is
//! rounded up to the next millisecond, so a wait for less than one never returns at once and
//! spins its caller.

use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// What a descriptor is waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Readable, or hung up.
    Read,
    /// Writable, or failed (a connection under way is writable once it is made or refused).
    Write,
}

/// A set of descriptors to wait on together, kept between waits so a loop over thousands of
/// sockets allocates once.
#[derive(Default)]
pub struct Poller {
    fds: Vec<libc::pollfd>,
}

impl Poller {
    /// Forget every descriptor.
    pub fn clear(&mut self) {
        self.fds.clear();
    }

    /// Add `fd` (negative: a place-holder that is never ready), waited for as `want` says. Its
    /// index is the number of descriptors pushed before it since the last [`Self::clear`].
    pub fn push(&mut self, fd: RawFd, want: Want) {
        let events = match want {
            Want::Read => libc::POLLIN,
            Want::Write => libc::POLLOUT,
        };
        self.fds.push(libc::pollfd {
            fd,
            events,
            revents: 0,
        });
    }

    /// Wait until any descriptor is ready or `timeout` passes.
    pub fn wait(&mut self, timeout: Duration) -> std::io::Result<()> {
        let millis = timeout.as_micros().div_ceil(1000);
        let millis = libc::c_int::try_from(millis).unwrap_or(libc::c_int::MAX);
        // SAFETY: `fds` is a live array of valid `pollfd`s whose length is passed with it.
        let rc = unsafe {
            libc::poll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                millis,
            )
        };
        if rc < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(err);
            }
            self.fds.iter_mut().for_each(|p| p.revents = 0);
        }
        Ok(())
    }

    /// Whether the `i`-th descriptor was ready (for what it was waited for, or in error or hung
    /// up) when the last [`Self::wait`] returned.
    pub fn ready(&self, i: usize) -> bool {
        self.fds.get(i).is_some_and(|p| p.revents != 0)
    }
}

/// Wait for readability (or hang-up) on `read_fds` and writability on `write_fd` (negative
/// descriptors are ignored), for at most `timeout`; which of `read_fds` are ready.
pub fn poll_io(
    read_fds: &[RawFd],
    write_fd: RawFd,
    timeout: Duration,
) -> std::io::Result<Vec<bool>> {
    let mut poller = Poller::default();
    for &fd in read_fds {
        poller.push(fd, Want::Read);
    }
    poller.push(write_fd, Want::Write);
    poller.wait(timeout)?;
    Ok((0..read_fds.len()).map(|i| poller.ready(i)).collect())
}

/// Wait for readability (or hang-up) on `fds`; which are ready.
pub fn poll_fds(fds: &[RawFd], timeout: Duration) -> std::io::Result<Vec<bool>> {
    poll_io(fds, -1, timeout)
}

/// Wait for one descriptor to be readable (or hung up), for at most `timeout`.
pub fn poll_readable(fd: &impl AsRawFd, timeout: Duration) -> std::io::Result<bool> {
    Ok(poll_io(&[fd.as_raw_fd()], -1, timeout)?[0])
}
