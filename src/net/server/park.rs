//! Parked connections: idle keep-alive sockets, waited on together by the door's own thread
//! (`epoll`), each handed to a worker when its next request begins to arrive, and closed after
//! [`REQUEST_DEADLINE`] without a byte.
//!
//! Why: between requests a connection needs no thread. Parked, it costs its socket and a map
//! entry; a thousand idle keep-alive clients cost a thousand sockets, not a thousand threads.
//!
//! Invariant: a parked connection is in `parked` *before* its socket is armed, and armed once
//! ([`Watch::Once`]), so the one event it fires finds it and hands it to exactly one worker;
//! keys are never reused, so an event for a connection already swept finds nothing.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::super::conns::Doing;
use super::{Conn, REQUEST_DEADLINE};
use crate::sys::epoll::{Epoll, Watch};

/// The keys of the two descriptors watched always; parked connections take the ones above.
pub(super) const LISTENER: u64 = 0;
pub(super) const STOPPED: u64 = 1;

/// The parked connections and the epoll instance that watches them.
pub(super) struct Parked {
    epoll: Epoll,
    state: Mutex<State>,
}

struct State {
    conns: HashMap<u64, (Conn, Instant)>,
    next: u64,
}

impl Parked {
    /// Watch `listener` and `stopped` (always); `Err` where epoll is not to be had.
    pub(super) fn new(listener: RawFd, stopped: RawFd) -> std::io::Result<Self> {
        let epoll = Epoll::new()?;
        epoll.arm(listener, LISTENER, Watch::Always, true)?;
        epoll.arm(stopped, STOPPED, Watch::Always, true)?;
        Ok(Self {
            epoll,
            state: Mutex::new(State {
                conns: HashMap::new(),
                next: STOPPED + 1,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // panic = "abort": a poisoned lock cannot be observed half-updated.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Park `conn` until its next request begins to arrive (or it closes). Its read buffer is
    /// given back first: an idle connection holds no memory of its own. A socket that cannot be
    /// watched is closed.
    pub(super) fn park(&self, mut conn: Conn) {
        conn.place.doing(Doing::Idle);
        conn.buf = Vec::new();
        let fd = conn.stream.as_raw_fd();
        let first = !std::mem::replace(&mut conn.watched, true);
        let key = {
            let mut state = self.lock();
            let key = state.next;
            state.next += 1;
            state.conns.insert(key, (conn, Instant::now()));
            key
        };
        if self.epoll.arm(fd, key, Watch::Once, first).is_err() {
            self.take(key);
        }
    }

    /// The parked connection `key` names, taken out (its request is arriving).
    pub(super) fn take(&self, key: u64) -> Option<Conn> {
        self.lock().conns.remove(&key).map(|(conn, _)| conn)
    }

    /// Wait up to `timeout` for the keys of what fired.
    pub(super) fn wait(&self, keys: &mut Vec<u64>, timeout: Duration) -> std::io::Result<()> {
        self.epoll.wait(keys, timeout)
    }

    /// Close every connection idle for [`REQUEST_DEADLINE`].
    pub(super) fn sweep(&self) {
        let now = Instant::now();
        let idle: Vec<Conn> = {
            let mut state = self.lock();
            let late: Vec<u64> = state
                .conns
                .iter()
                .filter(|(_, (_, since))| now - *since >= REQUEST_DEADLINE)
                .map(|(&key, _)| key)
                .collect();
            late.iter()
                .filter_map(|key| state.conns.remove(key))
                .map(|(conn, _)| conn)
                .collect()
        };
        for conn in idle {
            self.epoll.remove(conn.stream.as_raw_fd());
        }
    }

    /// Close every parked connection (the door has stopped).
    pub(super) fn close_all(&self) {
        let all: Vec<(Conn, Instant)> = self.lock().conns.drain().map(|(_, c)| c).collect();
        for (conn, _) in all {
            self.epoll.remove(conn.stream.as_raw_fd());
        }
    }
}
