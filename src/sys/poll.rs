//! `poll(2)`, the one way anything in `mur` waits on descriptors: sockets, pipes, pidfds and the
//! wake-up pipe.
//!
//! `EINTR` reads as "nothing ready yet" (the caller's loop looks at its deadline again); any other
//! failure is the `Err`, for the caller to decide on — never silently a timeout.

use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// Wait for readability (or hang-up) on `read_fds` and writability on `write_fd` (negative
/// descriptors are ignored), for at most `timeout`; which of `read_fds` are ready.
pub fn poll_io(
    read_fds: &[RawFd],
    write_fd: RawFd,
    timeout: Duration,
) -> std::io::Result<Vec<bool>> {
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
    let rc = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, millis) };
    if rc < 0 {
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
        polled.iter_mut().for_each(|p| p.revents = 0);
    }
    Ok(polled[..read_fds.len()]
        .iter()
        .map(|p| p.revents != 0)
        .collect())
}

/// Wait for readability (or hang-up) on `fds`; which are ready.
pub fn poll_fds(fds: &[RawFd], timeout: Duration) -> std::io::Result<Vec<bool>> {
    poll_io(fds, -1, timeout)
}

/// Wait for one descriptor to be readable (or hung up), for at most `timeout`.
pub fn poll_readable(fd: &impl AsRawFd, timeout: Duration) -> std::io::Result<bool> {
    Ok(poll_io(&[fd.as_raw_fd()], -1, timeout)?[0])
}
