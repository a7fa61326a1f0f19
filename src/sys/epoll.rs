//! `epoll(7)`, for the door's parked connections: one thread waits on every idle keep-alive
//! socket at once, without a `pollfd` array rebuilt per wait.
//!
//! Each socket is armed *once* (`EPOLLONESHOT`): when it becomes readable it fires a single
//! time and is disarmed, so exactly one waiter takes it, and it stays silent while a worker
//! serves it until [`Epoll::arm`] is called again. Events carry the caller's `u64` key, never a
//! pointer.
//!
//! Linux only: elsewhere [`Epoll::new`] says it is unsupported, and the door serves each
//! connection on one thread from its first request to its last instead of parking it.

#[cfg(target_os = "linux")]
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::fd::{OwnedFd, RawFd};
use std::time::Duration;

/// An epoll instance.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // never made there
pub struct Epoll(OwnedFd);

/// How a descriptor is watched.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// Readable or hung up, every time (a listener, a wake-up pipe).
    Always,
    /// Readable or hung up, once; [`Epoll::arm`] again to hear of it next time.
    Once,
}

#[cfg(target_os = "linux")]
impl Epoll {
    pub fn new() -> std::io::Result<Self> {
        // SAFETY: epoll_create1(2) takes a flag and returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned to us and is owned by nothing else.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Watch `fd` under `key`: `first` adds it, otherwise it is re-armed (it must have been
    /// added before and not removed).
    pub fn arm(&self, fd: RawFd, key: u64, watch: Watch, first: bool) -> std::io::Result<()> {
        let mut events = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
        if watch == Watch::Once {
            events |= libc::EPOLLONESHOT as u32;
        }
        let mut event = libc::epoll_event { events, u64: key };
        let op = if first {
            libc::EPOLL_CTL_ADD
        } else {
            libc::EPOLL_CTL_MOD
        };
        // SAFETY: a live epoll descriptor, a descriptor number and a live event struct.
        let done = unsafe { libc::epoll_ctl(self.0.as_raw_fd(), op, fd, &mut event) };
        if done < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Stop watching `fd` (a descriptor about to be closed, or handed elsewhere for good).
    pub fn remove(&self, fd: RawFd) {
        // SAFETY: EPOLL_CTL_DEL ignores the event pointer; a descriptor not watched is ENOENT,
        // which changes nothing.
        unsafe {
            libc::epoll_ctl(
                self.0.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                std::ptr::null_mut(),
            )
        };
    }

    /// Wait up to `timeout` (rounded up to the next millisecond) and put the keys that fired in
    /// `keys` (cleared first). `EINTR` reads as nothing fired.
    pub fn wait(&self, keys: &mut Vec<u64>, timeout: Duration) -> std::io::Result<()> {
        const MAX_EVENTS: usize = 256;
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS];
        let millis = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
        keys.clear();
        // SAFETY: the buffer holds MAX_EVENTS events, as we say.
        let n = unsafe {
            libc::epoll_wait(
                self.0.as_raw_fd(),
                events.as_mut_ptr(),
                MAX_EVENTS as i32,
                millis,
            )
        };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            return match err.kind() {
                std::io::ErrorKind::Interrupted => Ok(()),
                _ => Err(err),
            };
        }
        keys.extend(events[..n as usize].iter().map(|e| e.u64));
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
impl Epoll {
    pub fn new() -> std::io::Result<Self> {
        Err(std::io::ErrorKind::Unsupported.into())
    }

    pub fn arm(&self, _: RawFd, _: u64, _: Watch, _: bool) -> std::io::Result<()> {
        Err(std::io::ErrorKind::Unsupported.into())
    }

    pub fn remove(&self, _: RawFd) {}

    pub fn wait(&self, _: &mut Vec<u64>, _: Duration) -> std::io::Result<()> {
        Err(std::io::ErrorKind::Unsupported.into())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_once_watch_fires_once_until_armed_again() {
        let epoll = Epoll::new().unwrap();
        let (mut ours, theirs) = UnixStream::pair().unwrap();
        epoll.arm(theirs.as_raw_fd(), 7, Watch::Once, true).unwrap();
        let mut keys = Vec::new();
        epoll.wait(&mut keys, Duration::from_millis(1)).unwrap();
        assert!(keys.is_empty(), "nothing to read yet");
        ours.write_all(b"x").unwrap();
        epoll.wait(&mut keys, Duration::from_secs(5)).unwrap();
        assert_eq!(keys, [7]);
        epoll.wait(&mut keys, Duration::from_millis(1)).unwrap();
        assert!(
            keys.is_empty(),
            "disarmed after firing, though still readable"
        );
        epoll
            .arm(theirs.as_raw_fd(), 8, Watch::Once, false)
            .unwrap();
        epoll.wait(&mut keys, Duration::from_secs(5)).unwrap();
        assert_eq!(keys, [8], "re-armed, under its new key");
        epoll.remove(theirs.as_raw_fd());
    }
}
