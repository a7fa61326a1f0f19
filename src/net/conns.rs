//! The door's open connections, and which one gives way when a new one arrives at the bound.
//!
//! Why: a thread-per-connection door has a bound, and whoever holds its slots holds the door. A
//! slot held by a client that is doing nothing — an idle keep-alive connection, a request
//! trickling in, a refusal whose client is still sending — is taken back for a newcomer, oldest
//! first, the way nginx closes idle keep-alive connections at its limit: the newcomer may be the
//! operator, `mur ps`'s probe or `mur stop`'s door call, which must always be served. Only a
//! door whose every slot is busy answering (a handler at work, a stream) refuses with 503.
//!
//! Giving way is `shutdown(2)` on the connection's socket, under this registry's lock, which the
//! connection's thread also takes to leave — so the socket is still open (the thread holds it)
//! when it is shut down. The thread then reads EOF and ends. An idle keep-alive client sees its
//! connection closed before its next request, which HTTP/1.1 clients expect and retry.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A request that has been arriving for longer than this is a slow one: it may give way.
const SLOW_REQUEST: Duration = Duration::from_secs(1);

/// What a connection is doing, as far as giving way goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Doing {
    /// Between requests, no byte of the next one yet.
    Idle,
    /// A request has begun arriving (at this instant) and is not complete.
    Reading,
    /// A handler is at work on its request, or its answer (a stream too) is being written.
    Answering,
    /// Its request was refused; what the client is still sending is read and dropped.
    Lingering,
}

struct Slot {
    stream: Arc<TcpStream>,
    doing: Doing,
    since: Instant,
    /// Shut down to make room: never picked again, not counted against the bound.
    evicted: bool,
}

/// Every open connection, by arrival number (oldest first).
#[derive(Default)]
pub struct Conns {
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    slots: BTreeMap<u64, Slot>,
    next: u64,
    /// How many of `slots` are evicted (their threads have not yet left).
    evicted: usize,
}

/// One connection's place in the registry; it leaves when dropped.
pub struct Place {
    conns: Arc<Conns>,
    key: u64,
}

impl Conns {
    fn lock(&self) -> MutexGuard<'_, Open> {
        // panic = "abort": a poisoned lock cannot be observed half-updated.
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admit `stream` if the door holds fewer than `bound` connections (those shut down to make
    /// room not counted), making room when it is full by shutting down the one idle longest —
    /// else the one lingering longest, else the oldest slow request. `None`: every slot is busy
    /// answering, and the newcomer is to be refused.
    pub fn admit(self: &Arc<Self>, stream: &Arc<TcpStream>, bound: usize) -> Option<Place> {
        let mut open = self.lock();
        if open.slots.len() - open.evicted >= bound {
            let victim = open.victim()?;
            if let Some(slot) = open.slots.get_mut(&victim) {
                let _ = slot.stream.shutdown(std::net::Shutdown::Both);
                slot.evicted = true;
            }
            open.evicted += 1;
        }
        let key = open.next;
        open.next += 1;
        let slot = Slot {
            stream: stream.clone(),
            doing: Doing::Idle,
            since: Instant::now(),
            evicted: false,
        };
        open.slots.insert(key, slot);
        Some(Place {
            conns: self.clone(),
            key,
        })
    }
}

impl Open {
    /// The connection to give way: idle longest, else lingering longest, else the slow request
    /// that began longest ago.
    fn victim(&self) -> Option<u64> {
        let now = Instant::now();
        [Doing::Idle, Doing::Lingering, Doing::Reading]
            .into_iter()
            .find_map(|doing| {
                self.slots
                    .iter()
                    .filter(|(_, s)| !s.evicted && s.doing == doing)
                    .filter(|(_, s)| doing != Doing::Reading || now - s.since >= SLOW_REQUEST)
                    .min_by_key(|(_, s)| s.since)
                    .map(|(&key, _)| key)
            })
    }
}

impl Place {
    /// Say what the connection is doing now.
    pub fn doing(&self, doing: Doing) {
        let mut open = self.conns.lock();
        if let Some(slot) = open.slots.get_mut(&self.key) {
            slot.doing = doing;
            slot.since = Instant::now();
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut open = self.conns.lock();
        if open.slots.remove(&self.key).is_some_and(|s| s.evicted) {
            open.evicted -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    /// A connected pair: our client end and the door's end.
    fn pair(listener: &TcpListener) -> (TcpStream, Arc<TcpStream>) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (served, _) = listener.accept().unwrap();
        (client, Arc::new(served))
    }

    #[test]
    fn at_the_bound_the_longest_idle_gives_way_and_busy_ones_never_do() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let conns = Arc::new(Conns::default());
        let (mut first, a) = pair(&listener);
        let (_second, b) = pair(&listener);
        let place_a = conns.admit(&a, 2).unwrap();
        let place_b = conns.admit(&b, 2).unwrap();
        place_b.doing(Doing::Answering);
        // Full: the idle one (a) is shut down for the newcomer.
        let (_third, c) = pair(&listener);
        let place_c = conns.admit(&c, 2).unwrap();
        let mut byte = [0u8];
        assert_eq!(first.read(&mut byte).unwrap(), 0, "a was shut down");
        // Full again (a is leaving, uncounted): b answers, c reads a fresh request — nothing
        // may give way, so the next is refused.
        place_c.doing(Doing::Reading);
        let (_fourth, d) = pair(&listener);
        assert!(conns.admit(&d, 2).is_none());
        // Once a's thread has left and b is done, there is room without evicting anyone.
        drop(place_a);
        drop(place_b);
        assert!(conns.admit(&d, 2).is_some());
    }
}
