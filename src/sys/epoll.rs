//! The door's readiness poller: `epoll(7)` on Linux, `kqueue(2)` on macOS, behind one small
//! API. Every door worker waits on the one set itself (leader/followers).
//!
//! A connection is armed *once* ([`Watch::Once`]: `EPOLLONESHOT`, `EV_DISPATCH`-like one-shot
//! filters on kqueue): when it becomes ready it fires a single time and is disarmed, so exactly
//! one waiter takes it, and it stays silent while that worker serves it until
//! [`Poller::rearm`] is called. Events carry the caller's `u64` key, never a pointer.

use std::os::fd::OwnedFd;
use std::time::Duration;

/// How a descriptor is watched. Hang-ups and errors are always heard.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Watch {
    /// Readable, every time, level-triggered: the stop pipe, which every waiter must see.
    Always,
    /// Once, for what is asked: readable, writable, or neither (only a hang-up, then).
    Once { read: bool, write: bool },
    /// Readable or writable, edge-triggered: reported once each time bytes arrive, room to
    /// write appears or the peer hangs up — so it needs no re-arming, and its owner must read
    /// (or write) until the socket says `EAGAIN` before it counts on the next report.
    /// [`Poller::rearm`] of an edge-watched descriptor reports it again at once if it is ready.
    Edge,
}

/// What fired for one key.
#[derive(Clone, Copy, Debug, Default)]
pub struct Event {
    pub key: u64,
    pub readable: bool,
    pub writable: bool,
    /// The peer closed (at least its sending side), or the socket failed.
    pub hangup: bool,
    /// The socket can neither send nor receive any more (reset, failed, or closed both ways):
    /// unlike [`Event::hangup`], never a mere half-close, after which the peer may still read.
    pub gone: bool,
}

/// The most events one wait hands out: a worker takes a few ready connections per system call,
/// and leaves the rest to the others.
pub const BATCH: usize = 8;

/// A readiness poller.
pub struct Poller(OwnedFd);

/// The key of entry `index` of a table whose entries are reused: its generation in the high
/// half, so a key that outlived its entry (an event already handed out, a timer) names a
/// generation the entry no longer has.
pub fn key_of(index: usize, generation: u32) -> u64 {
    (u64::from(generation) << 32) | index as u64
}

/// The entry index and generation [`key_of`] packed into `key`.
pub fn split(key: u64) -> (usize, u32) {
    ((key & 0xffff_ffff) as usize, (key >> 32) as u32)
}

impl Poller {
    /// [`Poller::wait_up_to`] [`BATCH`] events: a door worker's wait.
    pub fn wait(&self, out: &mut Vec<Event>, timeout: Option<Duration>) -> std::io::Result<()> {
        self.wait_up_to::<BATCH>(out, timeout)
    }
}

/// A timeout as whole milliseconds, rounded up (so a short wait never spins); `None` is forever.
fn millis(timeout: Option<Duration>) -> i32 {
    timeout.map_or(-1, |t| {
        t.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32
    })
}

#[cfg(target_os = "linux")]
mod imp {
    use super::{Event, Poller, Watch, millis};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
    use std::time::Duration;

    fn events_of(watch: Watch) -> u32 {
        let base = (libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32;
        match watch {
            Watch::Always => base | libc::EPOLLIN as u32,
            Watch::Edge => base | (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLET) as u32,
            Watch::Once { read, write } => {
                let mut events = base | libc::EPOLLONESHOT as u32;
                if read {
                    events |= libc::EPOLLIN as u32;
                }
                if write {
                    events |= libc::EPOLLOUT as u32;
                }
                events
            }
        }
    }

    impl Poller {
        pub fn new() -> std::io::Result<Self> {
            // SAFETY: epoll_create1(2) takes a flag and returns a new descriptor or -1.
            let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: `fd` was just returned to us and is owned by nothing else.
            Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
        }

        fn ctl(&self, op: libc::c_int, fd: RawFd, key: u64, watch: Watch) -> std::io::Result<()> {
            let mut event = libc::epoll_event {
                events: events_of(watch),
                u64: key,
            };
            // SAFETY: a live epoll descriptor, a descriptor number and a live event struct.
            if unsafe { libc::epoll_ctl(self.0.as_raw_fd(), op, fd, &mut event) } < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        }

        /// Start watching `fd` under `key`.
        pub fn add(&self, fd: RawFd, key: u64, watch: Watch) -> std::io::Result<()> {
            self.ctl(libc::EPOLL_CTL_ADD, fd, key, watch)
        }

        /// Watch `fd` (added before, not removed since) again, as `watch` says.
        pub fn rearm(&self, fd: RawFd, key: u64, watch: Watch) -> std::io::Result<()> {
            self.ctl(libc::EPOLL_CTL_MOD, fd, key, watch)
        }

        /// Stop watching `fd` (a descriptor about to be closed).
        pub fn remove(&self, fd: RawFd) {
            // SAFETY: EPOLL_CTL_DEL ignores the event pointer; a descriptor not watched is
            // ENOENT, which changes nothing.
            unsafe {
                libc::epoll_ctl(
                    self.0.as_raw_fd(),
                    libc::EPOLL_CTL_DEL,
                    fd,
                    std::ptr::null_mut(),
                )
            };
        }

        /// Wait up to `timeout` (`None`: until something fires) and put what fired in `out`
        /// (cleared first), at most `N`. `EINTR` reads as nothing fired.
        pub fn wait_up_to<const N: usize>(
            &self,
            out: &mut Vec<Event>,
            timeout: Option<Duration>,
        ) -> std::io::Result<()> {
            let mut events = [libc::epoll_event { events: 0, u64: 0 }; N];
            out.clear();
            // SAFETY: the buffer holds N events, as we say.
            let n = unsafe {
                libc::epoll_wait(
                    self.0.as_raw_fd(),
                    events.as_mut_ptr(),
                    N as i32,
                    millis(timeout),
                )
            };
            if n < 0 {
                let err = std::io::Error::last_os_error();
                return match err.kind() {
                    std::io::ErrorKind::Interrupted => Ok(()),
                    _ => Err(err),
                };
            }
            let hung = (libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32;
            out.extend(events[..n as usize].iter().map(|e| Event {
                key: e.u64,
                readable: e.events & libc::EPOLLIN as u32 != 0,
                writable: e.events & libc::EPOLLOUT as u32 != 0,
                hangup: e.events & hung != 0,
                gone: e.events & (libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0,
            }));
            Ok(())
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    //! kqueue: a read filter and a write filter per descriptor, each `EV_DISPATCH` for
    //! [`Watch::Once`] (delivered once, then disabled until re-enabled), so one waiter takes a
    //! ready connection as with `EPOLLONESHOT`; `EV_CLEAR` for [`Watch::Edge`], as `EPOLLET`. A filter not wanted is disabled, not deleted, so
    //! re-arming never meets ENOENT. A hang-up comes as `EV_EOF` on either filter; a connection
    //! watched for neither keeps its read filter enabled for it (its bytes then read as a wake,
    //! which the server treats as one).
    use super::{Event, Poller, Watch, millis};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
    use std::time::Duration;

    fn change(fd: RawFd, filter: i16, flags: u16, key: u64) -> libc::kevent {
        libc::kevent {
            ident: fd as libc::uintptr_t,
            filter,
            flags,
            fflags: 0,
            data: 0,
            udata: key as usize as *mut libc::c_void,
        }
    }

    impl Poller {
        pub fn new() -> std::io::Result<Self> {
            // SAFETY: kqueue(2) takes nothing and returns a new descriptor or -1.
            let fd = unsafe { libc::kqueue() };
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: `fd` was just returned to us and is owned by nothing else.
            let owned = unsafe { OwnedFd::from_raw_fd(fd) };
            crate::sys::pipe::add_flag(fd, crate::sys::pipe::FD_FLAGS, libc::FD_CLOEXEC)?;
            Ok(Self(owned))
        }

        fn apply(&self, changes: &[libc::kevent]) -> std::io::Result<()> {
            // SAFETY: a live kqueue, a live array of `changes.len()` changes, no event buffer.
            let rc = unsafe {
                libc::kevent(
                    self.0.as_raw_fd(),
                    changes.as_ptr(),
                    changes.len() as i32,
                    std::ptr::null_mut(),
                    0,
                    std::ptr::null(),
                )
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        }

        fn set(&self, fd: RawFd, key: u64, watch: Watch) -> std::io::Result<()> {
            let (read, write, once, edge) = match watch {
                Watch::Always => (true, false, false, false),
                Watch::Once { read, write } => (read || !write, write, true, false),
                Watch::Edge => (true, true, false, true),
            };
            let on = |wanted: bool| {
                let mut flags = libc::EV_ADD;
                flags |= if wanted {
                    libc::EV_ENABLE
                } else {
                    libc::EV_DISABLE
                };
                if once {
                    flags |= libc::EV_DISPATCH;
                }
                if edge {
                    flags |= libc::EV_CLEAR;
                }
                flags
            };
            self.apply(&[
                change(fd, libc::EVFILT_READ, on(read), key),
                change(fd, libc::EVFILT_WRITE, on(write), key),
            ])
        }

        /// Start watching `fd` under `key`.
        pub fn add(&self, fd: RawFd, key: u64, watch: Watch) -> std::io::Result<()> {
            self.set(fd, key, watch)
        }

        /// Watch `fd` (added before, not removed since) again, as `watch` says.
        pub fn rearm(&self, fd: RawFd, key: u64, watch: Watch) -> std::io::Result<()> {
            self.set(fd, key, watch)
        }

        /// Stop watching `fd` (a descriptor about to be closed; closing removes its filters too).
        pub fn remove(&self, fd: RawFd) {
            for filter in [libc::EVFILT_READ, libc::EVFILT_WRITE] {
                let _ = self.apply(&[change(fd, filter, libc::EV_DELETE, 0)]);
            }
        }

        /// Wait up to `timeout` (`None`: until something fires) and put what fired in `out`
        /// (cleared first), at most `N`. `EINTR` reads as nothing fired.
        pub fn wait_up_to<const N: usize>(
            &self,
            out: &mut Vec<Event>,
            timeout: Option<Duration>,
        ) -> std::io::Result<()> {
            // SAFETY: `kevent` is a plain C struct for which all-zero bytes are valid.
            let mut events: [libc::kevent; N] = unsafe { std::mem::zeroed() };
            let ms = millis(timeout);
            let spec = libc::timespec {
                tv_sec: (ms.max(0) / 1000) as libc::time_t,
                tv_nsec: ((ms.max(0) % 1000) * 1_000_000) as libc::c_long,
            };
            let spec_ptr = if ms < 0 {
                std::ptr::null()
            } else {
                &raw const spec
            };
            out.clear();
            // SAFETY: a live kqueue, no changes, a buffer of N events, a live timespec or null.
            let n = unsafe {
                libc::kevent(
                    self.0.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    events.as_mut_ptr(),
                    N as i32,
                    spec_ptr,
                )
            };
            if n < 0 {
                let err = std::io::Error::last_os_error();
                return match err.kind() {
                    std::io::ErrorKind::Interrupted => Ok(()),
                    _ => Err(err),
                };
            }
            out.extend(events[..n as usize].iter().map(|e| Event {
                key: e.udata as usize as u64,
                readable: e.filter == libc::EVFILT_READ,
                writable: e.filter == libc::EVFILT_WRITE,
                hangup: e.flags & (libc::EV_EOF | libc::EV_ERROR) != 0,
                gone: e.flags & libc::EV_ERROR != 0
                    || (e.filter == libc::EVFILT_WRITE && e.flags & libc::EV_EOF != 0),
            }));
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    const ONCE_READ: Watch = Watch::Once {
        read: true,
        write: false,
    };

    fn keys(poller: &Poller, timeout: Duration) -> Vec<u64> {
        let mut events = Vec::new();
        poller.wait(&mut events, Some(timeout)).unwrap();
        events.iter().map(|e| e.key).collect()
    }

    #[test]
    fn a_once_watch_fires_once_until_armed_again() {
        let poller = Poller::new().unwrap();
        let (mut ours, theirs) = UnixStream::pair().unwrap();
        poller.add(theirs.as_raw_fd(), 7, ONCE_READ).unwrap();
        assert!(
            keys(&poller, Duration::from_millis(1)).is_empty(),
            "nothing yet"
        );
        ours.write_all(b"x").unwrap();
        assert_eq!(keys(&poller, Duration::from_secs(5)), [7]);
        assert!(
            keys(&poller, Duration::from_millis(1)).is_empty(),
            "disarmed after firing, though still readable"
        );
        poller.rearm(theirs.as_raw_fd(), 8, ONCE_READ).unwrap();
        assert_eq!(
            keys(&poller, Duration::from_secs(5)),
            [8],
            "under its new key"
        );
        poller.remove(theirs.as_raw_fd());
    }

    #[test]
    fn an_edge_watch_reports_each_arrival_once_and_a_rearm_reports_what_is_ready() {
        let poller = Poller::new().unwrap();
        let (mut ours, theirs) = UnixStream::pair().unwrap();
        poller.add(theirs.as_raw_fd(), 5, Watch::Edge).unwrap();
        // Writable from the start: one report.
        assert_eq!(keys(&poller, Duration::from_secs(5)), [5]);
        assert!(
            keys(&poller, Duration::from_millis(1)).is_empty(),
            "no new edge"
        );
        ours.write_all(b"x").unwrap();
        assert_eq!(keys(&poller, Duration::from_secs(5)), [5], "bytes arrived");
        assert!(
            keys(&poller, Duration::from_millis(1)).is_empty(),
            "unread, but reported once"
        );
        poller.rearm(theirs.as_raw_fd(), 5, Watch::Edge).unwrap();
        assert_eq!(
            keys(&poller, Duration::from_secs(5)),
            [5],
            "re-armed: ready at once"
        );
    }

    #[test]
    fn arming_for_writing_fires_at_once_on_a_socket_with_room_and_a_hangup_is_heard() {
        let poller = Poller::new().unwrap();
        let (ours, theirs) = UnixStream::pair().unwrap();
        let neither = Watch::Once {
            read: false,
            write: false,
        };
        poller.add(theirs.as_raw_fd(), 3, neither).unwrap();
        assert!(keys(&poller, Duration::from_millis(1)).is_empty());
        let write = Watch::Once {
            read: false,
            write: true,
        };
        poller.rearm(theirs.as_raw_fd(), 3, write).unwrap();
        let mut events = Vec::new();
        poller
            .wait(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        assert!(events.len() == 1 && events[0].writable, "{events:?}");
        poller.rearm(theirs.as_raw_fd(), 3, neither).unwrap();
        drop(ours);
        poller
            .wait(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        assert!(events.len() == 1 && events[0].hangup, "{events:?}");
    }
}
