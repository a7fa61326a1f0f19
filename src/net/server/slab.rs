//! Every open connection in one slab: a fixed array of entries, each named in the readiness set
//! by its index and a generation, so a key that outlived its connection (an event, a waker, a
//! timer) finds nothing.
//!
//! Who serves an entry: the one worker that *claims* it ([`Slab::claim`]: `Idle` → `Busy` under
//! the entry's schedule lock). A claim is made for an event the readiness set handed out (armed
//! once, so at most one worker holds it), a timer that fell due, or an eviction. Anything else
//! that happens meanwhile — a waker firing, a second event for a connection re-armed by a
//! wake — finds it `Busy` and marks it `Woken`; the worker, releasing it ([`Slab::release`]),
//! sees the mark and serves it once more instead of re-arming. So a wake is never lost and a
//! connection is never served by two workers at once.
//!
//! Invariants: an entry's socket is in the readiness set exactly while the entry is in use. A
//! descriptor number may be reused by the next connection the moment it is closed, so nothing
//! arms a number it has not made sure is still its own: the worker holding the claim (nobody
//! can free the entry meanwhile), or a waker under the entry's schedule lock with the generation
//! checked. The generation changes when the entry is freed, before its socket is closed. The
//! schedule lock is a leaf: only a waker's `epoll_ctl` (never blocking) is made under it.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::conn::Conn;
use crate::sys::epoll::{Event, Poller, Watch, key_of, split};

/// The keys of the two descriptors not in the slab.
pub(super) const LISTENER: u64 = u64::MAX;
pub(super) const STOPPED: u64 = u64::MAX - 1;

/// Entries beyond [`super::MAX_CONNECTIONS`] for connections refused at the door: each carries
/// its 503 and lingers a moment; past these, a newcomer is closed unanswered.
pub const REFUSALS: usize = 64;

/// A request that has been arriving for longer than this is a slow one: it may give way.
const SLOW_REQUEST: Duration = Duration::from_secs(1);

/// What a connection is doing, as far as giving way goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Doing {
    /// Between requests, no byte of the next one yet.
    Idle,
    /// A request has begun arriving and is not complete.
    Reading,
    /// A handler's answer is being waited for or written (a stream too).
    Answering,
    /// Its request was refused; what the client is still sending is read and dropped.
    Lingering,
}

/// Who may serve an entry now.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Free,
    /// Armed in the readiness set (or waiting on a waker), no worker on it.
    Idle,
    /// A worker serves it.
    Busy,
    /// A worker serves it, and something happened since it began: serve it once more.
    Woken,
}

/// One entry's schedule: small, and locked only briefly.
struct Sched {
    generation: u32,
    state: State,
    fd: RawFd,
    /// Whether `fd` has been added to the readiness set (re-armed after that).
    added: bool,
    /// Whether this entry carries a refusal (one of the [`REFUSALS`]).
    refusal: bool,
    doing: Doing,
    since: Instant,
    /// When a worker must look at the connection even if nothing fires.
    due: Option<Instant>,
    /// What was reported while a worker served it (`Woken`), for its next turn.
    missed: Event,
}

struct Entry {
    sched: Mutex<Sched>,
    /// Locked by the worker that claimed the entry, and by nobody else.
    conn: Mutex<Option<Box<Conn>>>,
}

/// What a worker does with an entry it served.
pub(super) enum Then {
    Close,
    /// Wait for the socket's next report (it is edge-watched from its first arming on);
    /// `doing` for the bound; `due` when to look again regardless.
    Arm {
        doing: Doing,
        due: Option<Instant>,
    },
    /// Let others go first, then serve it again (a stream with more to write at once).
    Again,
}

/// What a claim holds: the entry's key and its connection, locked.
pub(super) struct Claim<'a> {
    pub(super) key: u64,
    pub(super) conn: MutexGuard<'a, Option<Box<Conn>>>,
}

pub(super) struct Slab {
    entries: Box<[Entry]>,
    free: Mutex<Vec<u32>>,
    /// Entries in use for served connections, and for refusals.
    open: AtomicUsize,
    refusing: AtomicUsize,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // panic = "abort": a poisoned lock cannot be observed half-updated.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Slab {
    pub(super) fn new(connections: usize) -> Self {
        let size = connections + REFUSALS;
        let now = Instant::now();
        let entries = (0..size)
            .map(|_| Entry {
                sched: Mutex::new(Sched {
                    generation: 0,
                    state: State::Free,
                    fd: -1,
                    added: false,
                    refusal: false,
                    doing: Doing::Idle,
                    since: now,
                    due: None,
                    missed: Event::default(),
                }),
                conn: Mutex::new(None),
            })
            .collect();
        Self {
            entries,
            free: Mutex::new((0..size as u32).rev().collect()),
            open: AtomicUsize::new(0),
            refusing: AtomicUsize::new(0),
        }
    }

    /// How many served connections are open.
    pub(super) fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// Put `conn` (socket `fd`) in a free entry, claimed by the caller; `None` gives it back
    /// when there is no room (`refusal`: within [`REFUSALS`]; else within `bound`).
    pub(super) fn insert(
        &self,
        conn: Box<Conn>,
        fd: RawFd,
        refusal: bool,
    ) -> Result<Claim<'_>, Box<Conn>> {
        let (count, limit) = match refusal {
            true => (&self.refusing, REFUSALS),
            false => (&self.open, self.entries.len() - REFUSALS),
        };
        if count.fetch_add(1, Ordering::AcqRel) >= limit {
            count.fetch_sub(1, Ordering::AcqRel);
            return Err(conn);
        }
        let Some(index) = lock(&self.free).pop() else {
            count.fetch_sub(1, Ordering::AcqRel);
            return Err(conn);
        };
        let entry = &self.entries[index as usize];
        let mut sched = lock(&entry.sched);
        sched.state = State::Busy;
        (sched.fd, sched.added, sched.refusal) = (fd, false, refusal);
        (sched.doing, sched.since, sched.due) = (Doing::Idle, Instant::now(), None);
        let key = key_of(index as usize, sched.generation);
        drop(sched);
        let mut guard = lock(&entry.conn);
        *guard = Some(conn);
        Ok(Claim { key, conn: guard })
    }

    /// Claim the entry `key` names to serve it after `event`; `None` if it is gone or already
    /// served (then marked to be served once more, `event` kept for that turn).
    pub(super) fn claim(&self, key: u64, event: &Event) -> Option<Claim<'_>> {
        let (index, generation) = split(key);
        let entry = self.entries.get(index)?;
        let mut sched = lock(&entry.sched);
        if sched.generation != generation {
            return None;
        }
        match sched.state {
            State::Idle => sched.state = State::Busy,
            State::Busy | State::Woken => {
                sched.state = State::Woken;
                sched.missed.readable |= event.readable;
                sched.missed.writable |= event.writable;
                sched.missed.hangup |= event.hangup;
                return None;
            }
            State::Free => return None,
        }
        drop(sched);
        Some(Claim {
            key,
            conn: lock(&entry.conn),
        })
    }

    /// Something happened for `key` (its waker fired): have one worker serve it. If a worker
    /// serves it now, it serves it once more; if it is idle, it is armed to fire at once
    /// (writable: it has nothing unwritten when it waits on a waker) — or, when the waker's
    /// thread may serve it itself (`here`), claimed for that thread and handed back.
    pub(super) fn wake(&self, key: u64, poller: &Poller, here: bool) -> Option<Claim<'_>> {
        let (index, generation) = split(key);
        let entry = self.entries.get(index)?;
        let mut sched = lock(&entry.sched);
        if sched.generation != generation {
            return None;
        }
        match sched.state {
            State::Busy | State::Woken => {
                sched.state = State::Woken;
                sched.missed.writable = true;
            }
            State::Idle if sched.added && here => {
                sched.state = State::Busy;
                drop(sched);
                return Some(Claim {
                    key,
                    conn: lock(&entry.conn),
                });
            }
            // Re-armed, an edge-watched socket with room to write (it has nothing unwritten
            // while it waits on a waker) is reported at once.
            State::Idle if sched.added => {
                let _ = poller.rearm(sched.fd, key, Watch::Edge);
            }
            _ => {}
        }
        None
    }

    /// Give back a claimed entry, as `then` says. `Some`: it was reported meanwhile and stays
    /// claimed — serve it again, after what was reported.
    pub(super) fn release(
        &self,
        claim: &mut Claim<'_>,
        then: Then,
        poller: &Poller,
    ) -> Option<Event> {
        let (index, _) = split(claim.key);
        let entry = &self.entries[index];
        let mut sched = lock(&entry.sched);
        match then {
            Then::Close => return self.free_entry(claim, sched, poller),
            // Others go first: given back idle, then reported again. Armed under the lock (as a
            // waker arms), so the worker the report goes to finds it idle and claims it —
            // armed after, claimed, that worker would only mark it woken and this one serve it
            // again — and no sweep can free it between the two.
            Then::Again if sched.state != State::Woken && sched.added => {
                sched.state = State::Idle;
                if poller.rearm(sched.fd, claim.key, Watch::Edge).is_err() {
                    sched.state = State::Busy;
                    return self.free_entry(claim, sched, poller);
                }
                return None;
            }
            // Woken meanwhile (served again below), or never watched yet (added below).
            Then::Again => {}
            Then::Arm { doing, due } => {
                if sched.doing != doing {
                    (sched.doing, sched.since) = (doing, Instant::now());
                }
                sched.due = due;
            }
        }
        if sched.state == State::Woken {
            return Some(woken(&mut sched));
        }
        // An edge-watched socket stays armed: only its first wait adds it.
        if !sched.added {
            // Added without the lock: a socket added with bytes already there fires at once,
            // and the worker it goes to must not wait on this lock meanwhile. The entry stays
            // claimed (no sweep or eviction takes it, so its descriptor stays its own); an
            // event or a wake that comes first marks it woken, as while it was served.
            let fd = sched.fd;
            drop(sched);
            let armed = poller.add(fd, claim.key, Watch::Edge);
            sched = lock(&entry.sched);
            if armed.is_err() {
                // A socket that cannot be watched would never be served again.
                return self.free_entry(claim, sched, poller);
            }
            sched.added = true;
            if sched.state == State::Woken {
                return Some(woken(&mut sched));
            }
        }
        sched.state = State::Idle;
        None
    }

    /// Free the claimed entry and close its connection (after the lock: dropping it may close a
    /// feed, which takes the engine's locks).
    fn free_entry(
        &self,
        claim: &mut Claim<'_>,
        mut sched: MutexGuard<'_, Sched>,
        poller: &Poller,
    ) -> Option<Event> {
        if sched.added {
            poller.remove(sched.fd);
        }
        sched.missed = Event::default();
        sched.generation = sched.generation.wrapping_add(1);
        (sched.state, sched.fd, sched.added, sched.due) = (State::Free, -1, false, None);
        let count = match sched.refusal {
            true => &self.refusing,
            false => &self.open,
        };
        drop(sched);
        drop(claim.conn.take());
        count.fetch_sub(1, Ordering::AcqRel);
        lock(&self.free).push(split(claim.key).0 as u32);
        None
    }

    /// The keys of idle entries whose `due` has passed, claimed: for the timer to serve.
    pub(super) fn claim_due(&self, now: Instant, each: &mut dyn FnMut(Claim<'_>)) {
        self.claim_idle(&|sched| sched.due.is_some_and(|due| due <= now), each);
    }

    /// Claim every idle entry `wanted` says so of, one at a time, for `each`.
    fn claim_idle(&self, wanted: &dyn Fn(&Sched) -> bool, each: &mut dyn FnMut(Claim<'_>)) {
        for (index, entry) in self.entries.iter().enumerate() {
            let mut sched = lock(&entry.sched);
            if sched.state != State::Idle || !wanted(&sched) {
                continue;
            }
            sched.state = State::Busy;
            let key = key_of(index, sched.generation);
            drop(sched);
            each(Claim {
                key,
                conn: lock(&entry.conn),
            });
        }
    }

    /// The connection to give way for a newcomer, claimed: idle longest, else lingering longest,
    /// else the slow request that began longest ago. `None`: every one is busy answering.
    pub(super) fn claim_victim(&self) -> Option<Claim<'_>> {
        let now = Instant::now();
        let mut best: [Option<(Instant, u64)>; 3] = [None; 3];
        for (index, entry) in self.entries.iter().enumerate() {
            let sched = lock(&entry.sched);
            if sched.state != State::Idle || sched.refusal {
                continue;
            }
            let rank = match sched.doing {
                Doing::Idle => 0,
                Doing::Lingering => 1,
                Doing::Reading if now - sched.since >= SLOW_REQUEST => 2,
                _ => continue,
            };
            if best[rank].is_none_or(|(since, _)| sched.since < since) {
                best[rank] = Some((sched.since, key_of(index, sched.generation)));
            }
        }
        best.iter().flatten().find_map(|&(_, key)| {
            let (index, generation) = split(key);
            let entry = &self.entries[index];
            let mut sched = lock(&entry.sched);
            if sched.generation != generation || sched.state != State::Idle {
                return None;
            }
            sched.state = State::Busy;
            drop(sched);
            Some(Claim {
                key,
                conn: lock(&entry.conn),
            })
        })
    }

    /// Claim every entry in use (the door has stopped and no other worker runs).
    pub(super) fn claim_all(&self, each: &mut dyn FnMut(Claim<'_>)) {
        self.claim_idle(&|_| true, each);
    }
}

/// A woken entry stays claimed, for one more turn after what it missed.
fn woken(sched: &mut Sched) -> Event {
    sched.state = State::Busy;
    std::mem::take(&mut sched.missed)
}

impl Claim<'_> {
    pub(super) fn conn(&mut self) -> &mut Conn {
        self.conn
            .as_mut()
            .expect("a claimed entry holds its connection")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    /// A served connection's entry, claimed: our client end, and the claim.
    fn open<'a>(slab: &'a Slab, listener: &TcpListener) -> (TcpStream, Claim<'a>) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (served, peer) = listener.accept().unwrap();
        served.set_nonblocking(true).unwrap();
        let fd = served.as_raw_fd();
        let conn = Box::new(Conn::new(served, peer));
        let claim = slab.insert(conn, fd, false).ok().unwrap();
        (client, claim)
    }

    fn wait(doing: Doing) -> Then {
        Then::Arm { doing, due: None }
    }

    #[test]
    fn a_report_while_served_is_kept_for_one_more_turn_and_a_stale_key_finds_nothing() {
        let (slab, poller) = (Slab::new(2), Poller::new().unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (_client, mut claim) = open(&slab, &listener);
        let key = claim.key;
        assert!(
            slab.release(&mut claim, wait(Doing::Idle), &poller)
                .is_none()
        );
        drop(claim);
        let read = Event {
            key,
            readable: true,
            ..Event::default()
        };
        let mut claim = slab.claim(key, &read).expect("idle: claimed");
        assert!(slab.claim(key, &read).is_none(), "served: not twice");
        assert!(slab.wake(key, &poller, true).is_none(), "served: not twice");
        let missed = slab.release(&mut claim, wait(Doing::Idle), &poller);
        let missed = missed.expect("woken while served: once more");
        assert!(missed.readable && missed.writable, "{missed:?}");
        assert!(slab.release(&mut claim, Then::Close, &poller).is_none());
        drop(claim);
        assert!(slab.claim(key, &read).is_none(), "closed: a stale key");
        assert!(
            slab.wake(key, &poller, true).is_none(),
            "closed: a stale key"
        );
        assert_eq!(slab.open(), 0);
    }

    #[test]
    fn a_wake_here_claims_an_idle_entry_for_the_waking_thread_and_marks_a_served_one() {
        let (slab, poller) = (Slab::new(1), Poller::new().unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (_client, mut claim) = open(&slab, &listener);
        let key = claim.key;
        assert!(
            slab.release(&mut claim, wait(Doing::Answering), &poller)
                .is_none()
        );
        drop(claim);
        let mut here = slab.wake(key, &poller, true).expect("idle: claimed here");
        assert!(slab.claim(key, &Event::default()).is_none(), "not twice");
        assert!(slab.wake(key, &poller, true).is_none(), "served: marked");
        let missed = slab.release(&mut here, wait(Doing::Answering), &poller);
        assert!(missed.expect("woken while served").writable);
        slab.release(&mut here, Then::Close, &poller);
    }

    #[test]
    fn at_the_bound_the_longest_idle_gives_way_and_busy_ones_never_do() {
        let (slab, poller) = (Slab::new(2), Poller::new().unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (_a, mut idle) = open(&slab, &listener);
        let (_b, mut answering) = open(&slab, &listener);
        let (idle_key, answering_key) = (idle.key, answering.key);
        slab.release(&mut idle, wait(Doing::Idle), &poller);
        slab.release(&mut answering, wait(Doing::Answering), &poller);
        drop((idle, answering));
        let _c = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (served, addr) = listener.accept().unwrap();
        let fd = served.as_raw_fd();
        let third = slab.insert(Box::new(Conn::new(served, addr)), fd, false);
        assert!(third.is_err(), "full");
        let mut victim = slab.claim_victim().expect("the idle one gives way");
        assert_eq!(victim.key, idle_key);
        slab.release(&mut victim, Then::Close, &poller);
        drop(victim);
        assert!(
            slab.claim_victim().is_none(),
            "the answering one never does"
        );
        assert!(slab.claim(answering_key, &Event::default()).is_some());
    }
}
