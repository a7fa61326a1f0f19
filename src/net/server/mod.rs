//! The door's HTTP/1.1 server: non-blocking std sockets on one readiness set, served by a fixed
//! handful of workers that each wait on the set themselves (leader/followers), `httparse` for
//! heads. No thread waits for a client or for the engine: a connection lives in a slab entry
//! (`slab.rs`) with its buffers and its state; a wait (a blocking `message/send`, a stream's next
//! event) is a [`std::task::Waker`] the engine fires, which re-arms the connection so that one
//! worker polls it again (`worker.rs`).
//!
//! Every bound is enforced here, before a handler sees anything, so a bad request costs its own
//! connection and never the door:
//!
//! | bound | answer |
//! |---|---|
//! | head over 16 KiB | 431, connection closed |
//! | body over 1 MiB (by `Content-Length`) | 413, connection closed |
//! | body the handler does not admit when its head arrives ([`Handler::admit`]: the token, the session's memory budget) | its refusal, body never read |
//! | request not complete 10 s after its first byte | 408, connection closed |
//! | malformed head, bad or duplicate `Content-Length`, `Transfer-Encoding` | 400 / 501, closed |
//! | 1,024 connections open at once (streams count) | the one idle longest gives way (`slab.rs`); if every one is answering, the new one gets 503 (64 entries beyond the bound carry such refusals; past those, it is closed) |
//! | an answer its client does not read for 10 s | connection closed |
//!
//! An idle keep-alive connection is closed after the same 10 s without a byte. A refused request
//! is answered, then what its client still sends is read and dropped for up to
//! [`LINGER_TIME`] (nginx's lingering close), so the client reads the refusal instead of a reset:
//! a state of the connection's entry with a deadline, not a thread asleep.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Poll, Waker};
use std::time::Duration;

mod conn;
mod read;
mod slab;
mod worker;
mod write;

pub use read::parse_buffered;
pub use worker::{Serving, start, wake_here};

pub const MAX_HEAD: usize = 16 * 1024;
pub const MAX_BODY: usize = 1024 * 1024;
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// Connections open at once; each is a slab entry, and needs a worker only while it has
/// something to do.
pub const MAX_CONNECTIONS: usize = 1024;
/// How long a refused request's client may go on sending before its connection is closed.
pub const LINGER_TIME: Duration = Duration::from_secs(5);
/// How long a connection refused at the door (no room) lingers.
const BUSY_LINGER: Duration = Duration::from_secs(1);
/// How much a lingering connection reads (and drops) at most.
const LINGER_BYTES: usize = 64 << 20;
/// How often a stream or a deferred answer that said `Pending` is polled again even if its
/// waker never fired (heartbeats and deadlines need no timer of their own).
pub const STREAM_TICK: Duration = Duration::from_secs(1);

/// One complete request. Its `Debug` names the headers without their values: one of them may
/// carry a bearer token.
pub struct Request {
    pub method: String,
    pub path: String,
    /// Header names lowercased, values as sent; repeated headers appear repeatedly.
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
    pub peer: SocketAddr,
    /// Whether the client asked for the connection to stay open: HTTP/1.1 unless it sent
    /// `Connection: close`; HTTP/1.0 only if it sent `Connection: keep-alive`.
    pub keep_alive: bool,
    /// What the handler took for this request when its head arrived ([`Handler::admit`]),
    /// handed back with it; held until the request is dropped.
    pub hold: Option<Hold>,
}

/// What a handler takes for a request before its body is read (a share of a memory budget),
/// opaque to the server: it only keeps it alive as long as the request.
pub type Hold = Box<dyn std::any::Any + Send>;

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Request")
            .field("method", &self.method)
            .field("path", &self.path)
            .field("headers", &names)
            .field("body_len", &self.body.len())
            .field("peer", &self.peer)
            .field("keep_alive", &self.keep_alive)
            .field("hold", &self.hold.is_some())
            .finish()
    }
}

impl Request {
    /// Every value of header `name` (lowercase).
    pub fn header_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }
}

/// One response; `Content-Length` and `Connection` are added by the server.
pub struct Response {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    /// A body written as it is produced instead of `body` (server-sent events): no
    /// `Content-Length`, and the connection closes when it ends.
    pub stream: Option<Box<dyn BodyStream>>,
    /// An answer not known yet: polled until it is, then written in this one's place
    /// ([`Response::deferred`]).
    pub deferred: Option<Box<dyn Deferred>>,
    /// What the handler keeps counted for this response until it has been written (the
    /// server drops it then).
    pub hold: Option<Hold>,
}

/// A body produced piece by piece, polled by whichever worker the connection's turn falls to.
///
/// `Ready(Some(piece))` is the next piece to write, `Ready(None)` the end of the body, and
/// `Pending` nothing now — with `waker` stored (replacing any earlier one), to be woken whenever
/// polling again could give something else. The server polls a stream again when its waker
/// fires and at least every [`STREAM_TICK`] besides, and never while a piece is unwritten: a
/// reader that does not take a piece within [`REQUEST_DEADLINE`] loses the connection, so a
/// stalled reader holds its own connection and no thread.
pub trait BodyStream: Send {
    fn poll_next(&mut self, waker: &Waker) -> Poll<Option<Vec<u8>>>;
}

/// An answer not known when the handler returns (a blocking `message/send` waiting for its
/// task): polled like a [`BodyStream`] — again when `waker` fires, and every [`STREAM_TICK`] —
/// until it is `Ready`. A client that closes meanwhile drops it.
pub trait Deferred: Send {
    fn poll(&mut self, waker: &Waker) -> Poll<Response>;
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("headers", &self.headers)
            .field("body_len", &self.body.len())
            .field("stream", &self.stream.is_some())
            .field("deferred", &self.deferred.is_some())
            .finish()
    }
}

impl Response {
    pub fn json(status: u16, value: &serde_json::Value) -> Self {
        // Written as bytes, not through `Display` (`to_string`), whose formatter adapter costs
        // about as much again. A tree of strings and numbers cannot fail to serialize.
        Self::json_bytes(status, serde_json::to_vec(value).unwrap_or_default())
    }

    /// `body`, JSON already written.
    pub fn json_bytes(status: u16, body: Vec<u8>) -> Self {
        Self {
            status,
            headers: vec![("Content-Type", "application/json".into())],
            body,
            stream: None,
            deferred: None,
            hold: None,
        }
    }

    pub fn text(status: u16, text: &str) -> Self {
        Self {
            status,
            headers: vec![("Content-Type", "text/plain; charset=utf-8".into())],
            body: format!("{text}\n").into_bytes(),
            stream: None,
            deferred: None,
            hold: None,
        }
    }

    /// `text/event-stream`, written as `stream` produces it.
    pub fn event_stream(stream: Box<dyn BodyStream>) -> Self {
        Self {
            status: 200,
            headers: vec![
                ("Content-Type", "text/event-stream".into()),
                ("Cache-Control", "no-cache".into()),
            ],
            body: Vec::new(),
            stream: Some(stream),
            deferred: None,
            hold: None,
        }
    }

    /// An answer `deferred` will give once it is known: its status, headers and body, with the
    /// headers set on this one added (a wrapper's, such as CORS's).
    pub fn deferred(deferred: Box<dyn Deferred>) -> Self {
        Self {
            status: 200,
            headers: Vec::new(),
            body: Vec::new(),
            stream: None,
            deferred: Some(deferred),
            hold: None,
        }
    }
}

/// What answers requests. Called from many workers at once; it must not wait (a wait is a
/// [`Deferred`] or a [`BodyStream`]).
pub trait Handler: Send + Sync + 'static {
    /// Whether a request whose head has arrived may have its `body_len` bytes read: what the
    /// handler takes for it (handed back in [`Request::hold`]), or the refusal to answer instead
    /// — then the body is never read into memory (it is drained and dropped while the refusal
    /// lingers). Called for every request as soon as its head is complete, before a body byte
    /// is read beyond what arrived with the head. `request` has its head and no body yet.
    fn admit(&self, request: &Request, body_len: usize) -> Result<Option<Hold>, Response> {
        let _ = (request, body_len);
        Ok(None)
    }

    fn handle(&self, request: Request) -> Response;
}

/// How a door is told to stop: a flag its connections read, and a pipe in the readiness set
/// that wakes every worker at once.
pub struct Stopper {
    flag: AtomicBool,
    read: std::os::fd::OwnedFd,
    write: std::fs::File,
}

impl Stopper {
    pub fn new() -> Result<Arc<Self>, String> {
        let (read, write) = crate::sys::pipe::pipe()?;
        Ok(Arc::new(Self {
            flag: AtomicBool::new(false),
            read,
            write: write.into(),
        }))
    }

    /// Stop accepting; connections finish the answer in hand and close.
    pub fn stop(&self) {
        self.flag.store(true, Ordering::Release);
        let _ = (&self.write).write_all(b"x");
    }

    pub fn is_stopped(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }
}
