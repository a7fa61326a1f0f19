//! One exchange in flight: a small state machine — connecting, writing, reading — driven by
//! edge-triggered readiness. Each time its socket is reported it goes as far as the socket lets
//! it without blocking (until `EAGAIN`), so no edge is left unconsumed; a deadline that has
//! passed ends it, ready or not.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use super::{Answer, Exchange};
use crate::net::client::{self, Deadlines, MAX_RESPONSE_READ};

/// Where an exchange in flight is.
enum Phase {
    /// The connection is under way: waiting for the socket to be writable.
    Connecting,
    /// Connected; `sent` bytes of the request written so far.
    Writing { sent: usize },
    /// The request is written: reading the response.
    Reading,
}

/// One exchange in flight.
pub(super) struct Flight {
    pub job: usize,
    exchange: Exchange,
    pub stream: TcpStream,
    phase: Phase,
    /// The connect deadline while connecting, the response deadline after — each no later than
    /// the caller's [`super::Grown::until`].
    pub deadline: Instant,
    received: Vec<u8>,
    /// Its deadline was brought forward to the caller's `until`.
    cut: bool,
}

/// `at`, or `until` when that is sooner; whether it was cut so.
pub(super) fn no_later(at: Instant, until: Option<Instant>) -> (Instant, bool) {
    match until {
        Some(until) if until < at => (until, true),
        _ => (at, false),
    }
}

impl Flight {
    /// The exchange for `job` whose connection `stream` was just started, under `deadlines`.
    pub fn connecting(
        job: usize,
        exchange: Exchange,
        stream: TcpStream,
        deadlines: Deadlines,
        until: Option<Instant>,
    ) -> Self {
        let (deadline, cut) = no_later(Instant::now() + deadlines.connect, until);
        Self {
            job,
            exchange,
            stream,
            phase: Phase::Connecting,
            deadline,
            received: Vec::new(),
            cut,
        }
    }

    /// Bring the deadline forward to `until` if it is later (the caller winds down).
    pub fn cut_to(&mut self, until: Instant) {
        if self.deadline > until {
            self.deadline = until;
            self.cut = true;
        }
    }

    /// Take this exchange as far as its socket lets it without blocking (`ready`: it was
    /// reported; not: only its deadline is looked at); its answer when it has ended.
    pub fn advance(
        &mut self,
        ready: bool,
        now: Instant,
        scratch: &mut [u8],
        deadlines: Deadlines,
        until: Option<Instant>,
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
            (self.deadline, self.cut) = no_later(now + deadlines.response, until);
        }
        if let Phase::Writing { sent } = &mut self.phase {
            match write_some(&mut self.stream, &self.exchange.request, sent) {
                // Read at once: what arrived meanwhile raised no edge of its own.
                Ok(true) => self.phase = Phase::Reading,
                Ok(false) => return None,
                Err(err) => return Some(Err(format!("{addr}: cannot send the request: {err}"))),
            }
        }
        self.read(scratch)
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
