//! One connection's state between the turns workers give it: what it has read, what it still
//! has to write, and what it waits for — and [`Conn::drive`], which takes it as far as it can go
//! without waiting and says how it is to wait next.
//!
//! Nothing here blocks: the socket is non-blocking, a handler's wait is a [`Deferred`] or a
//! [`BodyStream`] polled with the connection's [`Waker`], and a stream is not polled for more
//! while what it gave last is unwritten (so a slow reader slows its stream, whose feed the
//! engine cuts when it falls too far behind).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Poll, Waker};
use std::time::Instant;

use super::read::{Head, parse_head};
use super::slab::{Doing, Then};
use super::write::{head_bytes, reason_refused};
use super::{
    BUSY_LINGER, BodyStream, Deferred, Handler, Hold, LINGER_BYTES, LINGER_TIME, REQUEST_DEADLINE,
    Request, Response, STREAM_TICK,
};
use crate::sys::epoll::Event;

/// The most a worker reads from a socket at once.
const CHUNK: usize = 8192;
/// The most pieces of a stream written in one turn before the connection lets others go first.
const PIECES_PER_TURN: usize = 64;
/// A buffer larger than this is given back when the connection goes idle.
const KEEP_BUFFER: usize = 16 << 10;

/// What every connection's turn needs from its door.
pub(super) struct Ctx<'a> {
    pub(super) handler: &'a dyn Handler,
    pub(super) stopped: bool,
    pub(super) answering: &'a Arc<AtomicUsize>,
    /// Served by a thread that is not a worker ([`super::wake_here`]): a waiting answer is
    /// written, and anything else — the client's next request, a stream's next pieces — is
    /// handed to a worker (`Then::Again`) rather than handled here.
    pub(super) answer_only: bool,
}

/// Counted among the door's answers in hand from before its handler runs until it is written
/// or its connection is gone, so a stopping door waits for it.
struct Answering(Arc<AtomicUsize>);

impl Answering {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Self(count.clone())
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Where the connection is in its exchange.
enum Phase {
    /// Reading the next request's head into `buf`.
    Head,
    /// Its head admitted, the body arriving into a buffer of exactly its length.
    Body(Box<Request>, Vec<u8>, usize),
    /// The handler's answer is not known yet; then kept alive or not, with the headers the
    /// handler put on the answer that deferred it (CORS and the like) added.
    Deferred(Box<dyn Deferred>, bool, Vec<(&'static str, String)>),
    /// A streamed body, then the connection closes.
    Stream(Box<dyn BodyStream>),
    /// Writing `out`, then as [`After`] says.
    Flush(After),
    /// A refusal was written; what the client still sends is dropped until then.
    Linger(Instant, usize),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum After {
    /// Keep alive: read the next request.
    Next,
    Close,
    /// Linger for this long: a refusal.
    Linger(std::time::Duration),
}

/// One open connection.
pub(super) struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    /// Bytes read and not yet taken (the next request's head; what a client pipelined).
    buf: Vec<u8>,
    /// Whether the socket may hold bytes not read yet: set by a report that it is readable,
    /// cleared only by a read that emptied it. Its reports are edge-triggered — one per
    /// arrival — so this, not the report in hand, says whether to read.
    unread: bool,
    /// The peer has hung up (at least its sending side): its end is read for, whatever else.
    hung_up: bool,
    /// The socket is gone both ways (reset, failed): nothing written would be read.
    gone: bool,
    /// What is still to be written, from `sent` on.
    out: Vec<u8>,
    sent: usize,
    phase: Phase,
    /// When the request being read began arriving (its 10 s count from there).
    started: Option<Instant>,
    /// When the connection last went idle between requests, or last made writing progress.
    since: Instant,
    /// What the handler keeps counted for the exchange until its answer is written.
    holds: Vec<Hold>,
    answering: Option<Answering>,
    waker: Waker,
}

/// What one step of a turn found.
enum Step {
    /// Go on at once.
    Again,
    /// Wait.
    Wait(Then),
}

/// Wait for the socket (edge-triggered: only after reading, or writing, until it would
/// block), a waker, or `due`.
fn arm(doing: Doing, due: Option<Instant>) -> Step {
    Step::Wait(Then::Arm { doing, due })
}

impl Conn {
    /// A new connection; its waker is set once it has a key ([`Conn::set_waker`]).
    pub(super) fn new(stream: TcpStream, peer: SocketAddr) -> Self {
        Self {
            stream,
            peer,
            buf: Vec::new(),
            unread: false,
            hung_up: false,
            gone: false,
            out: Vec::new(),
            sent: 0,
            phase: Phase::Head,
            started: None,
            since: Instant::now(),
            holds: Vec::new(),
            answering: None,
            waker: Waker::noop().clone(),
        }
    }

    pub(super) fn set_waker(&mut self, waker: Waker) {
        self.waker = waker;
    }

    /// This connection refused at the door instead: its 503 queued, then a short linger.
    pub(super) fn into_refused(mut self) -> Self {
        let mut refusal = Response::text(503, "every connection is busy; try again shortly");
        refusal.headers.push(("Retry-After", "1".into()));
        self.queue(&refusal, false);
        self.phase = Phase::Flush(After::Linger(BUSY_LINGER));
        self
    }

    /// Whether the connection, idle between requests as far as it has been served, has bytes
    /// of a request waiting in its socket (their event not yet handled): then it is not idle,
    /// and must not give way for a newcomer.
    pub(super) fn has_unread_request(&self) -> bool {
        matches!(self.phase, Phase::Head)
            && self.started.is_none()
            && self.stream.peek(&mut [0u8]).is_ok_and(|n| n > 0)
    }

    /// Take the connection as far as it goes without waiting, after `event` (all false: a timer
    /// or a first look), and say how it waits next.
    pub(super) fn drive(&mut self, event: &Event, ctx: &Ctx<'_>) -> Then {
        // A look without a readiness report (a timer's) reads too: a deadline must not pass on
        // bytes that arrived before it but whose report has not been handled yet.
        self.unread |= event.readable || event.hangup || !event.writable;
        self.hung_up |= event.hangup;
        self.gone |= event.gone;
        let mut pieces = 0;
        loop {
            let step = match self.flush() {
                Err(()) => Step::Wait(Then::Close),
                Ok(false) => {
                    let due = self.since + REQUEST_DEADLINE;
                    match Instant::now() >= due {
                        true => Step::Wait(Then::Close),
                        false => arm(Doing::Answering, Some(due)),
                    }
                }
                Ok(true) => match &mut self.phase {
                    Phase::Head if ctx.answer_only && !self.buf.is_empty() => {
                        Step::Wait(Then::Again)
                    }
                    Phase::Head => self.read_head(ctx),
                    Phase::Body(..) | Phase::Stream(..) | Phase::Linger(..) if ctx.answer_only => {
                        Step::Wait(Then::Again)
                    }
                    Phase::Body(..) => self.read_body(ctx),
                    Phase::Deferred(..) => self.poll_deferred(ctx),
                    // Others go first: a rearm reports the connection again at once.
                    Phase::Stream(..) if pieces >= PIECES_PER_TURN => Step::Wait(Then::Again),
                    Phase::Stream(..) => {
                        pieces += 1;
                        self.poll_stream()
                    }
                    Phase::Flush(after) => {
                        let after = *after;
                        self.after_flush(after, ctx)
                    }
                    Phase::Linger(until, dropped) => {
                        linger(&self.stream, *until, dropped, &mut self.unread)
                    }
                },
            };
            match step {
                Step::Again => {}
                Step::Wait(then) => return then,
            }
        }
    }

    /// Write what is queued: `Ok(true)` all of it, `Ok(false)` the socket is full.
    fn flush(&mut self) -> Result<bool, ()> {
        while self.sent < self.out.len() {
            match (&self.stream).write(&self.out[self.sent..]) {
                Ok(0) => return Err(()),
                Ok(n) => {
                    self.sent += n;
                    self.since = Instant::now();
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Err(()),
            }
        }
        self.out.clear();
        self.sent = 0;
        if self.out.capacity() > KEEP_BUFFER {
            self.out = Vec::new();
        }
        Ok(true)
    }

    /// Read once into `buf`, if the socket may have bytes: `Some(false)` nothing now,
    /// `Some(true)` bytes, `None` closed or failed.
    fn fill(&mut self) -> Option<bool> {
        if !self.unread {
            return Some(false);
        }
        let mut chunk = [0u8; CHUNK];
        match (&self.stream).read(&mut chunk) {
            Ok(0) => None,
            Ok(n) => {
                // A short read emptied the socket: what arrives later is reported anew.
                self.unread = n == CHUNK || self.hung_up;
                self.buf.extend_from_slice(&chunk[..n]);
                Some(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                self.unread = false;
                Some(false)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Some(false),
            Err(_) => None,
        }
    }

    fn read_head(&mut self, ctx: &Ctx<'_>) -> Step {
        if ctx.stopped && self.buf.is_empty() {
            return Step::Wait(Then::Close);
        }
        match parse_head(&self.buf, self.peer) {
            Err(refusal) => return self.refuse(refusal),
            Ok(Some(head)) => return self.admit(head, ctx),
            Ok(None) => {}
        }
        match self.fill() {
            None => return Step::Wait(Then::Close),
            Some(true) => {
                self.started.get_or_insert_with(Instant::now);
                return Step::Again;
            }
            Some(false) => {}
        }
        let now = Instant::now();
        match self.started {
            Some(started) if now >= started + REQUEST_DEADLINE => self.late(),
            Some(started) => arm(Doing::Reading, Some(started + REQUEST_DEADLINE)),
            None if now >= self.since + REQUEST_DEADLINE => Step::Wait(Then::Close),
            None => {
                if self.buf.capacity() > KEEP_BUFFER {
                    self.buf = Vec::new();
                }
                arm(Doing::Idle, Some(self.since + REQUEST_DEADLINE))
            }
        }
    }

    /// A complete head: admitted, its body is read next (or it is served at once); refused,
    /// the refusal is written and the body never read.
    fn admit(&mut self, head: Head, ctx: &Ctx<'_>) -> Step {
        let Head {
            mut request,
            head_len,
            body_len,
        } = head;
        self.buf.drain(..head_len);
        match ctx.handler.admit(&request, body_len) {
            Err(refusal) => return self.refuse(refusal),
            Ok(hold) => request.hold = hold,
        }
        let filled = self.buf.len().min(body_len);
        let mut body = vec![0; body_len];
        body[..filled].copy_from_slice(&self.buf[..filled]);
        self.buf.drain(..filled);
        self.phase = Phase::Body(Box::new(request), body, filled);
        Step::Again
    }

    fn read_body(&mut self, ctx: &Ctx<'_>) -> Step {
        let Phase::Body(_, body, filled) = &mut self.phase else {
            return Step::Again;
        };
        while *filled < body.len() && self.unread {
            match (&self.stream).read(&mut body[*filled..]) {
                Ok(0) => return Step::Wait(Then::Close),
                Ok(n) => *filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => self.unread = false,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Step::Wait(Then::Close),
            }
        }
        if *filled < body.len() {
            let due = self.started.unwrap_or(self.since) + REQUEST_DEADLINE;
            return match Instant::now() >= due {
                true => self.late(),
                false => arm(Doing::Reading, Some(due)),
            };
        }
        let Phase::Body(mut request, body, _) = std::mem::replace(&mut self.phase, Phase::Head)
        else {
            return Step::Again;
        };
        request.body = body;
        self.started = None;
        self.answering = Some(Answering::new(ctx.answering));
        let keep_alive = request.keep_alive;
        let response = ctx.handler.handle(*request);
        self.answer(response, keep_alive, ctx)
    }

    /// Queue `response`, or wait for it ([`Deferred`]), or stream it.
    fn answer(&mut self, mut response: Response, keep_alive: bool, ctx: &Ctx<'_>) -> Step {
        self.holds.extend(response.hold.take());
        if let Some(deferred) = response.deferred.take() {
            self.phase = Phase::Deferred(deferred, keep_alive, response.headers);
            return Step::Again;
        }
        if response.stream.is_some() {
            // A streamed body ends when the connection closes.
            self.queue(&response, false);
            if let Some(stream) = response.stream.take() {
                self.phase = Phase::Stream(stream);
            }
            return Step::Again;
        }
        let keep_alive = keep_alive && !ctx.stopped;
        self.queue(&response, keep_alive);
        self.phase = Phase::Flush(match keep_alive {
            true => After::Next,
            false => After::Close,
        });
        Step::Again
    }

    /// Queue `response`'s head and body.
    fn queue(&mut self, response: &Response, keep_alive: bool) {
        self.since = Instant::now();
        self.out.extend(head_bytes(response, keep_alive));
        self.out.extend_from_slice(&response.body);
    }

    fn poll_deferred(&mut self, ctx: &Ctx<'_>) -> Step {
        let Phase::Deferred(deferred, keep_alive, headers) = &mut self.phase else {
            return Step::Again;
        };
        match deferred.poll(&self.waker) {
            Poll::Ready(mut response) => {
                response.headers.append(headers);
                let keep_alive = *keep_alive;
                self.answer(response, keep_alive, ctx)
            }
            // The client has gone: its answer goes with it. Only gone, not half-closed: a client
            // may send its request, shut its sending side and read the answer (`nc -N`, Go's
            // CloseWrite), so a blocking send waits on for it (and its task runs on anyway).
            Poll::Pending if self.gone => Step::Wait(Then::Close),
            Poll::Pending => arm(Doing::Answering, Some(tick())),
        }
    }

    fn poll_stream(&mut self) -> Step {
        let Phase::Stream(stream) = &mut self.phase else {
            return Step::Again;
        };
        match stream.poll_next(&self.waker) {
            Poll::Ready(Some(piece)) => {
                self.out = piece;
                Step::Again
            }
            Poll::Ready(None) => Step::Wait(Then::Close),
            Poll::Pending if self.hung_up => Step::Wait(Then::Close),
            Poll::Pending => arm(Doing::Answering, Some(tick())),
        }
    }

    /// Everything queued is written: the exchange is over.
    fn after_flush(&mut self, after: After, ctx: &Ctx<'_>) -> Step {
        self.holds.clear();
        self.answering = None;
        match after {
            After::Close => Step::Wait(Then::Close),
            After::Next if ctx.stopped => Step::Wait(Then::Close),
            After::Next => {
                (self.phase, self.since) = (Phase::Head, Instant::now());
                // A request the client pipelined is served at once (no read: it is here).
                self.started = (!self.buf.is_empty()).then(Instant::now);
                Step::Again
            }
            After::Linger(time) => {
                // Stop sending; what the client still sends is read and dropped, so its data
                // does not arrive to a closed socket, whose reset could reach the client before
                // it has read the refusal.
                let _ = self.stream.shutdown(std::net::Shutdown::Write);
                self.buf = Vec::new();
                self.phase = Phase::Linger(Instant::now() + time, 0);
                Step::Again
            }
        }
    }

    /// Answer `refusal`, then linger.
    fn refuse(&mut self, refusal: Response) -> Step {
        self.queue(&refusal, false);
        self.phase = Phase::Flush(After::Linger(LINGER_TIME));
        Step::Again
    }

    /// The request was not complete in time: 408.
    fn late(&mut self) -> Step {
        self.refuse(Response::text(408, reason_refused(408)))
    }
}

/// Read and drop what a refused client still sends, until it closes, `until`, or
/// [`LINGER_BYTES`].
fn linger(stream: &TcpStream, until: Instant, dropped: &mut usize, unread: &mut bool) -> Step {
    let mut chunk = [0u8; CHUNK];
    while *dropped < LINGER_BYTES && Instant::now() < until {
        match (&*stream).read(&mut chunk) {
            Ok(0) => return Step::Wait(Then::Close),
            Ok(n) => *dropped += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                *unread = false;
                return arm(Doing::Lingering, Some(until));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Step::Wait(Then::Close),
        }
    }
    Step::Wait(Then::Close)
}

fn tick() -> Instant {
    Instant::now() + STREAM_TICK
}
