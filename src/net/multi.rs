//! Many HTTP/1.1 exchanges on one thread: non-blocking connects, writes and reads multiplexed
//! with `poll(2)`. The engine under every whole-response call to a door — `mur ps`'s thousands of
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
//! - **One thread, nothing blocks but `poll`.** Every socket is non-blocking; no thread is
//!   spawned; `poll` sleeps no later than the nearest deadline.
//! - **Bounded by descriptors, not by jobs.** At most as many exchanges are in flight as there are
//!   descriptors free — the soft `RLIMIT_NOFILE` (raised toward the hard one when the jobs need
//!   more) less those already open and [`SPARE_FDS`] — and the rest wait in order. A socket
//!   refused for want of descriptors while others are in flight goes back to the head of the
//!   queue and lowers the bound to what is in flight; with nothing in flight it is that
//!   exchange's error.
//! - **Every exchange ends exactly once**, by its deadlines at the latest, with the response or a
//!   sentence naming the address and what failed; its socket is closed before its job is told.
//! - **Bounded memory per exchange**: its request, and at most [`MAX_RESPONSE_READ`] of response;
//!   every read goes through one shared scratch buffer.
//! - **A request is never shown.** It may carry a bearer token: no error quotes it, and
//!   [`Exchange`]'s `Debug` gives only its length.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use super::client::{self, Deadlines, MAX_RESPONSE_READ, WholeResponse};
use crate::sys::poll::{Poller, Want};
use crate::sys::{socket, wake};

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

/// One request to send on a connection of its own, and whose whole response to read.
pub struct Exchange {
    pub addr: SocketAddr,
    /// Head and body, as [`client::Request::encode`] writes them. May carry a bearer token.
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
/// there are so far; it is asked at the start, after any exchange ends, when `wake` (if any: polled
/// beside the exchanges; [`wake::Pipe::take`]n before asking) is readable, and when its last
/// `recheck` passes — never on a timer of its own, so a loop whose exchanges all hang sleeps
/// until one moves, a deadline passes or it is woken. A job added while others are in flight
/// starts at once rather than after the slowest of them. Returns when every job counted so far
/// is done.
///
/// `gap` is the least time between two asks that `wake` causes: woken sooner, the loop leaves
/// the pipe out of its polls and asks once the gap has passed. A caller woken for every item it
/// queues (push: an update per task event) would otherwise ask — and poll every exchange in
/// flight — once per item; with a thousand stuck exchanges that walk was most of a core.
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
    scheduler.wake = wake.map(wake::Pipe::fd);
    scheduler.recheck = first.recheck;
    scheduler.until = first.until;
    let mut ask = false;
    let mut asked = Instant::now();
    loop {
        if ask || scheduler.recheck.is_some_and(|at| at <= Instant::now()) {
            if let Some(pipe) = wake.filter(|_| scheduler.wake.is_none()) {
                // Left out while the gap ran: whatever it holds is seen by this ask.
                pipe.take();
                scheduler.wake = Some(pipe.fd());
            }
            asked = Instant::now();
            let grown = jobs();
            scheduler.recheck = grown.recheck;
            scheduler.until = scheduler.until.or(grown.until);
            if grown.jobs > scheduler.jobs {
                scheduler.jobs = grown.jobs;
                // Counting descriptors walks /proc/self/fd, a thousand entries with a thousand
                // exchanges in flight: only while the bound may still rise (the same bound).
                if scheduler.bound < most.min(grown.jobs) {
                    scheduler.bound = scheduler.bound.max(bound(grown.jobs)).min(most);
                }
            }
        }
        if !scheduler.start(&mut step) {
            break;
        }
        let polled = scheduler.wait();
        let mut woken =
            polled && scheduler.wake.is_some() && scheduler.poller.ready(scheduler.flights.len());
        let soon = asked + gap;
        if woken && Instant::now() < soon {
            scheduler.wake = None;
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

/// The jobs, the exchanges waiting and those in flight.
struct Scheduler {
    jobs: usize,
    /// The next job not yet asked for its first exchange.
    next_job: usize,
    /// Exchanges to start before any new job: follow-ups, and those put back for want of a
    /// descriptor.
    waiting: VecDeque<(usize, Exchange)>,
    flights: Vec<Flight>,
    /// The most exchanges in flight at once.
    bound: usize,
    deadlines: Deadlines,
    /// `flights[i]`'s socket is the poller's `i`-th descriptor between [`Scheduler::wait`] and
    /// [`Scheduler::advance`].
    poller: Poller,
    scratch: Vec<u8>,
    /// The most exchanges in flight whatever the descriptors allow ([`run_growing`]).
    most: usize,
    /// Polled beside the flights, its index theirs: jobs may be added ([`run_growing`]).
    wake: Option<RawFd>,
    /// When to look for jobs added, at the latest ([`run_growing`]).
    recheck: Option<Instant>,
    /// When every exchange ends at the latest ([`Grown::until`]).
    until: Option<Instant>,
}

impl Scheduler {
    fn new(jobs: usize, deadlines: Deadlines) -> Self {
        Self {
            jobs,
            next_job: 0,
            waiting: VecDeque::new(),
            flights: Vec::new(),
            bound: bound(jobs),
            deadlines,
            poller: Poller::default(),
            scratch: vec![0; READ_CHUNK],
            most: usize::MAX,
            wake: None,
            recheck: None,
            until: None,
        }
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
            match socket::connect_started(&exchange.addr) {
                Ok(stream) => self.flights.push(Flight {
                    job,
                    stream,
                    phase: Phase::Connecting,
                    deadline: Instant::now() + self.deadlines.connect,
                    received: Vec::new(),
                    exchange,
                    cut: false,
                }),
                Err(err) if socket::is_out_of_descriptors(&err) && !self.flights.is_empty() => {
                    self.bound = self.flights.len().min(self.most);
                    self.waiting.push_front((job, exchange));
                }
                Err(err) => {
                    let answer = Err(format!("{}: cannot connect: {err}", exchange.addr));
                    if let Some(next) = step(job, Some(answer)) {
                        self.waiting.push_front((job, next));
                    }
                }
            }
        }
        !self.flights.is_empty() || self.more_to_start()
    }

    /// Wait until a socket in flight is ready, its deadline passes, or — when more could start —
    /// not at all. Whether `poll` worked: if not, every flight is looked at as if ready (its
    /// non-blocking socket says whether it really is).
    fn wait(&mut self) -> bool {
        self.poller.clear();
        for flight in &mut self.flights {
            if let Some(until) = self.until
                && flight.deadline > until
            {
                flight.deadline = until;
                flight.cut = true;
            }
            self.poller
                .push(flight.stream.as_raw_fd(), flight.phase.want());
        }
        let timeout = if self.flights.len() < self.bound && self.more_to_start() {
            Duration::ZERO
        } else {
            let now = Instant::now();
            self.flights
                .iter()
                .map(|f| f.deadline.saturating_duration_since(now))
                .min()
                .unwrap_or(Duration::ZERO)
        };
        let timeout = match self.recheck {
            Some(at) => timeout.min(at.saturating_duration_since(Instant::now())),
            None => timeout,
        };
        if let Some(fd) = self.wake {
            self.poller.push(fd, Want::Read);
        }
        if self.poller.wait(timeout).is_ok() {
            return true;
        }
        // Not a busy loop: pause as long as a millisecond before looking at everything.
        std::thread::sleep(timeout.min(Duration::from_millis(1)));
        false
    }

    /// Move every flight that is ready or past its deadline; the jobs whose exchange ended, with
    /// its answer. Their sockets are closed by then.
    fn advance(&mut self, polled: bool) -> Vec<(usize, Answer)> {
        let now = Instant::now();
        let mut ended = Vec::new();
        // Backwards, so `swap_remove` only moves a flight already looked at.
        for i in (0..self.flights.len()).rev() {
            let ready = !polled || self.poller.ready(i);
            let flight = &mut self.flights[i];
            if let Some(answer) = flight.advance(ready, now, &mut self.scratch, self.deadlines) {
                let flight = self.flights.swap_remove(i);
                ended.push((flight.job, answer));
            }
        }
        ended
    }
}

/// How many exchanges `jobs` jobs may have in flight at once: one for one job (nothing to
/// count), else the descriptors free — the limit, raised if need be, less those open and
/// [`SPARE_FDS`] — at least one and at most one a job.
fn bound(jobs: usize) -> usize {
    if jobs <= 1 {
        return 1;
    }
    let taken = socket::open_descriptors().unwrap_or(OPEN_IF_UNKNOWN) + SPARE_FDS;
    let limit = socket::open_files_limit((jobs + taken) as u64);
    usize::try_from(limit)
        .unwrap_or(usize::MAX)
        .saturating_sub(taken)
        .clamp(1, jobs)
}

/// Where an exchange in flight is.
enum Phase {
    /// The connection is under way: waiting for the socket to be writable.
    Connecting,
    /// Connected; `sent` bytes of the request written so far.
    Writing { sent: usize },
    /// The request is written: reading the response.
    Reading,
}

impl Phase {
    fn want(&self) -> Want {
        match self {
            Self::Connecting | Self::Writing { .. } => Want::Write,
            Self::Reading => Want::Read,
        }
    }
}

/// One exchange in flight.
struct Flight {
    job: usize,
    exchange: Exchange,
    stream: TcpStream,
    phase: Phase,
    /// The connect deadline while connecting, the response deadline after.
    deadline: Instant,
    received: Vec<u8>,
    /// Its deadline was brought forward to [`Grown::until`].
    cut: bool,
}

impl Flight {
    /// Take this exchange as far as its socket lets it without blocking; its answer when it has
    /// ended. A deadline that has passed ends it, ready or not.
    fn advance(
        &mut self,
        ready: bool,
        now: Instant,
        scratch: &mut [u8],
        deadlines: Deadlines,
    ) -> Option<Answer> {
        let addr = self.exchange.addr;
        if now >= self.deadline {
            return Some(Err(match self.phase {
                _ if self.cut => format!("{addr}: cut short, its caller winding down"),
                Phase::Connecting => format!(
                    "{addr}: cannot connect: no connection within {:?}",
                    deadlines.connect
                ),
                _ => format!("{addr}: no complete answer within {:?}", deadlines.response),
            }));
        }
        if !ready {
            return None;
        }
        if let Phase::Connecting = self.phase {
            if let Some(err) = self.stream.take_error().unwrap_or_else(Some) {
                return Some(Err(format!("{addr}: cannot connect: {err}")));
            }
            self.phase = Phase::Writing { sent: 0 };
            self.deadline = now + deadlines.response;
            self.cut = false;
        }
        match &mut self.phase {
            Phase::Writing { sent } => {
                match write_some(&mut self.stream, &self.exchange.request, sent) {
                    Ok(true) => self.phase = Phase::Reading,
                    Ok(false) => {}
                    Err(err) => {
                        return Some(Err(format!("{addr}: cannot send the request: {err}")));
                    }
                }
                None
            }
            _ => self.read(scratch),
        }
    }

    /// Read whatever has arrived, through `scratch`; the answer once the response is complete by
    /// its framing or the door closed, or the reason there is none.
    fn read(&mut self, scratch: &mut [u8]) -> Option<Answer> {
        let addr = self.exchange.addr;
        let bad = |err: String| format!("{addr}: bad response: {err}");
        loop {
            match self.stream.read(scratch) {
                Ok(0) => return Some(client::finish_at_eof(&self.received).map_err(bad)),
                Ok(n) => {
                    if self.received.len() + n > MAX_RESPONSE_READ {
                        return Some(Err(format!("{addr}: response larger than 1 MiB")));
                    }
                    self.received.extend_from_slice(&scratch[..n]);
                    match client::complete_response(&self.received) {
                        Ok(None) => {}
                        Ok(Some(response)) => return Some(Ok(response)),
                        Err(err) => return Some(Err(bad(err))),
                    }
                }
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(err) if err.kind() == ErrorKind::WouldBlock => return None,
                Err(err) => return Some(Err(format!("{addr}: read failed: {err}"))),
            }
        }
    }
}

/// Write what is left of `request` past `*sent`; whether all of it is written (`false`: the
/// socket is full for now).
fn write_some(stream: &mut TcpStream, request: &[u8], sent: &mut usize) -> std::io::Result<bool> {
    while *sent < request.len() {
        match stream.write(&request[*sent..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => *sent += n,
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) if err.kind() == ErrorKind::WouldBlock => return Ok(false),
            Err(err) => return Err(err),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests;
