//! Many HTTP/1.1 exchanges on one thread: non-blocking connects, writes and reads multiplexed
//! on one readiness poller (`epoll(7)`, kqueue on macOS: [`crate::sys::epoll`]). The engine under every whole-response call to a door — `mur ps`'s thousands of
//! probes at once, and the one a formation's readiness check or `mur stop` makes.
//!
//! A *job* is a conversation with one door, one *exchange* at a time: a connection of its own,
//! one request (`Connection: close`), its whole response. Whether another exchange follows an
//! answer is the job's to say ([`run`]'s `step`); the door probe's 1.0 fallback is one such
//! follow-up. Each exchange is a small state machine — connecting, writing, reading — under two
//! deadlines: [`Deadlines::connect`] from the moment its connection is started,
//! [`Deadlines::response`] from the moment it is made (the request's writing included).
//!
//! Invariants:
//! - **One thread, nothing blocks but the wait.** Every socket is non-blocking; no thread is
//!   spawned; the wait sleeps no later than the nearest deadline.
//! - **What waits costs nothing while it waits.** A socket is registered once, edge-triggered,
//!   when its connection starts, and deadlines are kept in order: a pass of the loop costs what
//!   became ready or fell due, never a walk of every exchange in flight — a thousand receivers
//!   that never answer cost the loop nothing between their deadlines.
//! - **Bounded by descriptors, not by jobs.** At most as many exchanges are in flight as there are
//!   descriptors free — the soft `RLIMIT_NOFILE` (raised toward the hard one when the jobs need
//!   more) less those already open and [`SPARE_FDS`] — and the rest wait in order. A socket
//!   refused for want of descriptors while others are in flight goes back to the head of the
//!   queue and lowers the bound to what is in flight; with nothing in flight it is that
//!   exchange's error.
//! - **Every exchange ends exactly once**, by its deadlines at the latest, with the response or a
//!   sentence naming the address and what failed; its socket is closed before its job is told.
//! - **Bounded memory per exchange**: its request, and at most
//!   [`super::client::MAX_RESPONSE_READ`] of response; every read goes through one shared
//!   scratch buffer.
//! - **A request is never shown.** It may carry a bearer token: no error quotes it, and
//!   [`Exchange`]'s `Debug` gives only its length.

use std::collections::{BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use super::client::{Deadlines, WholeResponse};
use crate::sys::epoll::{Event, Poller, Watch, key_of, split};
use crate::sys::{socket, wake};
use flight::Flight;

mod flight;

/// Descriptors kept free while exchanges are in flight, for what a job opens as it starts (the
/// `/proc` files a record's local checks read).
pub const SPARE_FDS: usize = 8;
/// What is taken to be open already when `/proc/self/fd` cannot be listed.
const OPEN_IF_UNKNOWN: usize = 16;
/// The most exchanges started between two looks at those in flight, so answers are read while a
/// long queue is still being started rather than only after.
const START_BATCH: usize = 256;
/// The shared scratch buffer each read goes through.
const READ_CHUNK: usize = 64 * 1024;
/// The most readiness events one wait takes.
const EVENTS: usize = 256;
/// The wake-up pipe's key; a flight's is its slot and the slot's generation ([`key_of`]).
const WAKE: u64 = u64::MAX;

/// One request to send on a connection of its own, and whose whole response to read.
pub struct Exchange {
    pub addr: SocketAddr,
    /// Head and body, as [`super::client::Request::encode`] writes them. May carry a bearer token.
    pub request: Vec<u8>,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Exchange {{ addr: {}, request: <{} bytes> }}",
            self.addr,
            self.request.len()
        )
    }
}

/// How an exchange ended: the whole response, or why there is none.
pub type Answer = Result<WholeResponse, String>;

/// Run jobs `0..jobs`, each a conversation of one exchange at a time, all on this thread, each
/// exchange within `deadlines`. `step(job, None)` is asked for a job's first exchange when there
/// is room to start it (jobs start in order); `step(job, Some(answer))` gets the answer to its
/// latest exchange and says whether another follows (`Some`, started before any new job) or the
/// job is done (`None`, as is a job that has no first exchange). Returns when every job is done.
pub fn run(
    jobs: usize,
    deadlines: Deadlines,
    step: impl FnMut(usize, Option<Answer>) -> Option<Exchange>,
) {
    let grown = || Grown {
        jobs,
        recheck: None,
        until: None,
    };
    run_growing(deadlines, None, Duration::ZERO, usize::MAX, grown, step);
}

/// How many jobs [`run_growing`] has so far, and when to ask again at the latest (`None`: only
/// when woken or an exchange ends).
pub struct Grown {
    pub jobs: usize,
    pub recheck: Option<Instant>,
    /// Every exchange ends by then, whatever its deadlines (the caller is winding down).
    pub until: Option<Instant>,
}

/// [`run`] for jobs that keep coming, at most `most` exchanges in flight. `jobs()` says how many
/// there are so far; it is asked at the start, after any exchange ends, when `wake` (if any:
/// watched beside the exchanges; [`wake::Pipe::take`]n before asking) is readable, and when its
/// last `recheck` passes — never on a timer of its own, so a loop whose exchanges all hang sleeps
/// until one moves, a deadline passes or it is woken. A job added while others are in flight
/// starts at once rather than after the slowest of them. Returns when every job counted so far
/// is done.
///
/// `gap` is the least time between two asks that `wake` causes: woken sooner, the loop stops
/// watching the pipe and asks once the gap has passed. A caller woken for every item it queues
/// (push: an update per task event) would otherwise ask once per item.
pub fn run_growing(
    deadlines: Deadlines,
    wake: Option<&wake::Pipe>,
    gap: Duration,
    most: usize,
    mut jobs: impl FnMut() -> Grown,
    mut step: impl FnMut(usize, Option<Answer>) -> Option<Exchange>,
) {
    let first = jobs();
    let mut scheduler = Scheduler::new(first.jobs, deadlines);
    scheduler.most = most;
    scheduler.bound = scheduler.bound.min(most);
    scheduler.watch_wake(wake.map(wake::Pipe::fd));
    scheduler.recheck = first.recheck;
    scheduler.wind_down(first.until);
    let mut ask = false;
    let mut asked = Instant::now();
    loop {
        if ask || scheduler.recheck.is_some_and(|at| at <= Instant::now()) {
            if let Some(pipe) = wake.filter(|_| scheduler.wake.is_none()) {
                // Not watched while the gap ran: whatever it holds is seen by this ask.
                pipe.take();
                scheduler.watch_wake(Some(pipe.fd()));
            }
            asked = Instant::now();
            let grown = jobs();
            scheduler.recheck = grown.recheck;
            scheduler.wind_down(grown.until);
            if grown.jobs > scheduler.jobs {
                scheduler.grow(grown.jobs);
            }
        }
        if !scheduler.start(&mut step) {
            break;
        }
        let polled = scheduler.wait();
        let mut woken = polled && scheduler.events.iter().any(|e| e.key == WAKE);
        let soon = asked + gap;
        if woken && Instant::now() < soon {
            scheduler.watch_wake(None);
            scheduler.recheck = Some(scheduler.recheck.map_or(soon, |at| at.min(soon)));
            woken = false;
        } else if woken && let Some(wake) = wake {
            wake.take();
        }
        let ended = scheduler.advance(polled);
        ask = !polled || woken || !ended.is_empty();
        for (job, answer) in ended {
            if let Some(next) = step(job, Some(answer)) {
                scheduler.waiting.push_front((job, next));
            }
        }
    }
}

/// One exchange on its own: its answer.
pub fn one(exchange: Exchange, deadlines: Deadlines) -> Answer {
    let mut first = Some(exchange);
    let mut answer = None;
    run(1, deadlines, |_, got| {
        answer = got;
        first.take()
    });
    answer.unwrap_or_else(|| Err("the request was never sent".into()))
}

/// The exchanges in flight, each in a slot whose generation moves on when it is freed, so a key
/// outliving its flight finds nothing.
#[derive(Default)]
struct Slots {
    slots: Vec<(u32, Option<Flight>)>,
    free: Vec<usize>,
}

impl Slots {
    /// Keep `flight`; its key.
    fn insert(&mut self, flight: Flight) -> u64 {
        if let Some(slot) = self.free.pop() {
            self.slots[slot].1 = Some(flight);
            return key_of(slot, self.slots[slot].0);
        }
        self.slots.push((0, Some(flight)));
        key_of(self.slots.len() - 1, 0)
    }

    fn get(&mut self, key: u64) -> Option<&mut Flight> {
        let (slot, generation) = split(key);
        let (held, flight) = self.slots.get_mut(slot)?;
        flight.as_mut().filter(|_| *held == generation)
    }

    fn remove(&mut self, key: u64) -> Option<Flight> {
        let (slot, _) = split(key);
        self.get(key)?;
        let (generation, flight) = &mut self.slots[slot];
        *generation = generation.wrapping_add(1);
        self.free.push(slot);
        flight.take()
    }

    /// How many flights it holds.
    fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    fn keys(&self) -> Vec<u64> {
        let live = self.slots.iter().enumerate();
        live.filter(|(_, (_, f))| f.is_some())
            .map(|(slot, (generation, _))| key_of(slot, *generation))
            .collect()
    }
}

/// Why an exchange was not started.
enum NotStarted {
    /// Out of descriptors while others are in flight: to start again once one ends.
    Later(Exchange),
    /// It cannot be started: its answer.
    Failed(String),
}

/// The jobs, the exchanges waiting and those in flight.
struct Scheduler {
    jobs: usize,
    /// The next job not yet asked for its first exchange.
    next_job: usize,
    /// Exchanges to start before any new job: follow-ups, and those put back for want of a
    /// descriptor.
    waiting: VecDeque<(usize, Exchange)>,
    flights: Slots,
    /// Every flight's deadline and key, soonest first.
    deadlines_due: BTreeSet<(Instant, u64)>,
    /// The most exchanges in flight at once: at least one, at most one a job.
    bound: usize,
    /// The descriptors last found free for exchanges ([`room`]; 0: not counted yet).
    room: usize,
    deadlines: Deadlines,
    /// Every flight's socket is watched here, edge-triggered, under its key. `Err` when no
    /// poller could be made: every exchange is then that error.
    poller: Result<Poller, String>,
    /// What the last wait reported.
    events: Vec<Event>,
    scratch: Vec<u8>,
    /// The most exchanges in flight whatever the descriptors allow ([`run_growing`]).
    most: usize,
    /// Watched beside the flights under [`WAKE`]: jobs may be added ([`run_growing`]).
    wake: Option<RawFd>,
    /// When to look for jobs added, at the latest ([`run_growing`]).
    recheck: Option<Instant>,
    /// When every exchange ends at the latest ([`Grown::until`]).
    until: Option<Instant>,
}

impl Scheduler {
    fn new(jobs: usize, deadlines: Deadlines) -> Self {
        // Made before the descriptors are counted, so the bound leaves room for it.
        let poller = Poller::new().map_err(|err| format!("cannot wait on sockets: {err}"));
        // One job has nothing to count: it has one exchange at a time.
        let room = if jobs <= 1 { 0 } else { room(jobs) };
        Self {
            jobs,
            next_job: 0,
            waiting: VecDeque::new(),
            flights: Slots::default(),
            deadlines_due: BTreeSet::new(),
            bound: room.clamp(1, jobs.max(1)),
            room,
            deadlines,
            poller,
            events: Vec::with_capacity(EVENTS),
            scratch: vec![0; READ_CHUNK],
            most: usize::MAX,
            wake: None,
            recheck: None,
            until: None,
        }
    }

    /// Watch `fd` as the wake-up pipe, or (`None`) stop watching the one watched.
    fn watch_wake(&mut self, fd: Option<RawFd>) {
        let Ok(poller) = &self.poller else { return };
        if let Some(old) = self.wake.take() {
            poller.remove(old);
        }
        // Not watched, it is still looked at on every recheck and every exchange's end.
        self.wake = fd.filter(|&fd| poller.add(fd, WAKE, Watch::Always).is_ok());
    }

    /// Every exchange ends by `until` (once given, kept): the deadlines in flight brought
    /// forward to it.
    fn wind_down(&mut self, until: Option<Instant>) {
        let (None, Some(until)) = (self.until, until) else {
            return;
        };
        self.until = Some(until);
        let late: Vec<(Instant, u64)> = self.deadlines_due.range((until, 0)..).copied().collect();
        for (at, key) in late {
            if let Some(flight) = self.flights.get(key) {
                flight.cut_to(until);
                self.deadlines_due.remove(&(at, key));
                self.deadlines_due.insert((until, key));
            }
        }
    }

    /// There are `jobs` jobs now: the bound rises with them, within the descriptors free.
    /// Counting descriptors walks /proc/self/fd, a thousand entries with a thousand exchanges in
    /// flight: they are counted again only once the jobs outnumber those last found free.
    fn grow(&mut self, jobs: usize) {
        self.jobs = jobs;
        if self.bound >= self.most.min(jobs) {
            return;
        }
        if jobs > self.room {
            self.room = room(jobs);
        }
        self.bound = self.bound.max(self.room.clamp(1, jobs)).min(self.most);
    }

    /// Whether an exchange is waiting or a job has not started.
    fn more_to_start(&self) -> bool {
        !self.waiting.is_empty() || self.next_job < self.jobs
    }

    /// Start exchanges while there is room, at most [`START_BATCH`]. Whether anything is left to
    /// do.
    fn start(&mut self, step: &mut impl FnMut(usize, Option<Answer>) -> Option<Exchange>) -> bool {
        let mut started = 0;
        while self.flights.len() < self.bound && started < START_BATCH {
            let (job, exchange) = if let Some(next) = self.waiting.pop_front() {
                next
            } else if self.next_job < self.jobs {
                self.next_job += 1;
                match step(self.next_job - 1, None) {
                    Some(first) => (self.next_job - 1, first),
                    None => continue,
                }
            } else {
                break;
            };
            started += 1;
            match self.launch(job, exchange) {
                Ok(()) => {}
                Err(NotStarted::Later(exchange)) => {
                    self.room = self.flights.len();
                    self.bound = self.flights.len().min(self.most);
                    self.waiting.push_front((job, exchange));
                }
                Err(NotStarted::Failed(why)) => {
                    if let Some(next) = step(job, Some(Err(why))) {
                        self.waiting.push_front((job, next));
                    }
                }
            }
        }
        self.flights.len() > 0 || self.more_to_start()
    }

    /// Start `exchange`'s connection and watch it.
    fn launch(&mut self, job: usize, exchange: Exchange) -> Result<(), NotStarted> {
        let poller = self
            .poller
            .as_ref()
            .map_err(|err| NotStarted::Failed(err.clone()))?;
        let stream = match socket::connect_started(&exchange.addr) {
            Ok(stream) => stream,
            Err(err) if socket::is_out_of_descriptors(&err) && self.flights.len() > 0 => {
                return Err(NotStarted::Later(exchange));
            }
            Err(err) => {
                let why = format!("{}: cannot connect: {err}", exchange.addr);
                return Err(NotStarted::Failed(why));
            }
        };
        let fd = stream.as_raw_fd();
        let addr = exchange.addr;
        let flight = Flight::connecting(job, exchange, stream, self.deadlines, self.until);
        let deadline = flight.deadline;
        let key = self.flights.insert(flight);
        if let Err(err) = poller.add(fd, key, Watch::Edge) {
            drop(self.flights.remove(key));
            let why = format!("{addr}: cannot watch the connection: {err}");
            return Err(NotStarted::Failed(why));
        }
        self.deadlines_due.insert((deadline, key));
        Ok(())
    }

    /// Wait until a socket in flight is ready, its deadline passes, or — when more could start —
    /// not at all; what fired is in [`Self::events`]. Whether the wait worked: if not, every
    /// flight is looked at as if ready (its non-blocking socket says whether it really is).
    fn wait(&mut self) -> bool {
        let now = Instant::now();
        let timeout = if self.flights.len() < self.bound && self.more_to_start() {
            Duration::ZERO
        } else {
            let first = self.deadlines_due.first();
            first.map_or(Duration::ZERO, |(at, _)| at.saturating_duration_since(now))
        };
        let timeout = match self.recheck {
            Some(at) => timeout.min(at.saturating_duration_since(now)),
            None => timeout,
        };
        self.events.clear();
        let waited = match &self.poller {
            Ok(poller) => poller.wait_up_to::<EVENTS>(&mut self.events, Some(timeout)),
            Err(_) => return true,
        };
        if waited.is_ok() {
            return true;
        }
        // Not a busy loop: pause as long as a millisecond before looking at everything.
        std::thread::sleep(timeout.min(Duration::from_millis(1)));
        false
    }

    /// Move every flight that was reported or is past its deadline (every flight when the wait
    /// failed: `!polled`); the jobs whose exchange ended, with its answer. Their sockets are
    /// closed by then.
    fn advance(&mut self, polled: bool) -> Vec<(usize, Answer)> {
        let now = Instant::now();
        let mut ended = Vec::new();
        let reported: Vec<u64> = if polled {
            let events = self.events.iter().map(|e| e.key);
            events.filter(|&key| key != WAKE).collect()
        } else {
            self.flights.keys()
        };
        for key in reported {
            self.move_flight(key, true, now, &mut ended);
        }
        while let Some(&(at, key)) = self.deadlines_due.first()
            && at <= now
        {
            self.deadlines_due.pop_first();
            self.move_flight(key, false, now, &mut ended);
        }
        ended
    }

    /// Take the flight under `key` (if it is still in flight) as far as it goes; once it has
    /// ended, its socket unwatched and closed and its answer in `ended`.
    fn move_flight(
        &mut self,
        key: u64,
        ready: bool,
        now: Instant,
        ended: &mut Vec<(usize, Answer)>,
    ) {
        let (deadlines, until) = (self.deadlines, self.until);
        let Some(flight) = self.flights.get(key) else {
            return;
        };
        let before = flight.deadline;
        let answer = flight.advance(ready, now, &mut self.scratch, deadlines, until);
        let after = flight.deadline;
        self.deadlines_due.remove(&(before, key));
        let Some(answer) = answer else {
            self.deadlines_due.insert((after, key));
            return;
        };
        if let Some(flight) = self.flights.remove(key) {
            // Unwatched before it closes: a copy of the descriptor in a child being spawned
            // would otherwise keep it in the set under a key that may be reused.
            if let Ok(poller) = &self.poller {
                poller.remove(flight.stream.as_raw_fd());
            }
            ended.push((flight.job, answer));
        }
    }
}

/// How many exchanges may be in flight at once for `jobs` jobs, as far as descriptors go: the
/// limit, raised toward what `jobs` need, less those open and [`SPARE_FDS`].
fn room(jobs: usize) -> usize {
    let taken = socket::open_descriptors().unwrap_or(OPEN_IF_UNKNOWN) + SPARE_FDS;
    let limit = socket::open_files_limit((jobs + taken) as u64);
    usize::try_from(limit)
        .unwrap_or(usize::MAX)
        .saturating_sub(taken)
}

#[cfg(test)]
mod tests;
