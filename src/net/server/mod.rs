//! The door's HTTP/1.1 server: std sockets, a pool of workers that serve a connection while a
//! request of it is in hand, idle connections parked on one thread's epoll, `httparse` for heads.
//!
//! Every bound is enforced here, before a handler sees anything, so a bad request costs its own
//! connection and never the door:
//!
//! | bound | answer |
//! |---|---|
//! | head over 16 KiB | 431, connection closed |
//! | body over 1 MiB (by `Content-Length`) | 413, connection closed |
//! | body the handler does not admit when its head arrives ([`Handler::admit`]: the session's memory budget) | its refusal (503), body never read |
//! | request not complete 10 s after its first byte | 408, connection closed |
//! | malformed head, bad or duplicate `Content-Length`, `Transfer-Encoding` | 400 / 501, closed |
//! | 1,024 connections open at once (streams count) | the one idle longest gives way ([`super::conns`]); if every one is answering, the new one gets 503 |
//! | no thread for a new connection | 503 from the accept loop |
//!
//! An idle keep-alive connection is closed after the same 10 s without a byte. A refused request
//! is answered, then what its client still sends is read and dropped for up to
//! [`LINGER_TIME`] (nginx's lingering close), so the client reads the refusal instead of a reset.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

mod conn;
mod park;
mod read;
mod write;

use super::conns::{Conns, Place};
use super::pool::{self, Pool};
use conn::Server;
use park::Parked;
pub use read::parse_buffered;
use write::{linger, write_response};

pub const MAX_HEAD: usize = 16 * 1024;
pub const MAX_BODY: usize = 1024 * 1024;
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// Connections open at once; each needs a worker only while a request of it is served.
pub const MAX_CONNECTIONS: usize = 1024;
/// A worker's reserved stack, of which serving a request touches a few pages.
const WORKER_STACK: usize = 256 * 1024;
/// How often parked connections idle past [`REQUEST_DEADLINE`] are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// How long a refused request's client may go on sending before its connection is closed.
pub const LINGER_TIME: Duration = Duration::from_secs(5);
/// How much of it is read (and dropped) at most.
const LINGER_BYTES: usize = 64 << 20;
/// The longest the accept loop sleeps without looking at its stop flag (it is woken at once by
/// [`Stopper::stop`]; this only bounds a lost wake-up).
const ACCEPT_POLL: Duration = Duration::from_secs(1);
/// How long the accept loop backs off after a failed accept (`EMFILE` and the like).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// How long a stopped door waits for the answers already in hand (`session/stop`'s own among
/// them) to be written before [`serve`] returns and the process may exit.
const ANSWER_GRACE: Duration = Duration::from_secs(2);

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
    /// What the handler keeps counted for this response until it has been written (the
    /// server drops it then).
    pub hold: Option<Hold>,
}

/// A body produced piece by piece, on the connection's own thread.
pub trait BodyStream: Send {
    /// The next piece to write, waiting for it as long as it likes; `None` when the body is
    /// over. A reader that does not take a piece within [`REQUEST_DEADLINE`] loses the
    /// connection (the write times out), so a stalled reader holds only its own thread.
    fn next(&mut self) -> Option<Vec<u8>>;
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("headers", &self.headers)
            .field("body_len", &self.body.len())
            .field("stream", &self.stream.is_some())
            .finish()
    }
}

impl Response {
    pub fn json(status: u16, value: &serde_json::Value) -> Self {
        Self {
            status,
            headers: vec![("Content-Type", "application/json".into())],
            body: value.to_string().into_bytes(),
            stream: None,
            hold: None,
        }
    }

    pub fn text(status: u16, text: &str) -> Self {
        Self {
            status,
            headers: vec![("Content-Type", "text/plain; charset=utf-8".into())],
            body: format!("{text}\n").into_bytes(),
            stream: None,
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
            hold: None,
        }
    }
}

/// What answers requests. Called from many connection threads at once.
pub trait Handler: Send + Sync + 'static {
    /// Whether a request whose head has arrived may have its `body_len` bytes read: what the
    /// handler takes for it (handed back in [`Request::hold`]), or the refusal to answer instead
    /// — then the body is never read into memory (it is drained and dropped while the refusal
    /// lingers). `request` has its head and no body yet.
    fn admit(&self, request: &Request, body_len: usize) -> Result<Option<Hold>, Response> {
        let _ = (request, body_len);
        Ok(None)
    }

    fn handle(&self, request: Request) -> Response;
}

/// How a door is told to stop: a flag its connections read, and a pipe that wakes its accept
/// loop at once.
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

    /// Stop accepting; connections finish the request in hand and close.
    pub fn stop(&self) {
        self.flag.store(true, Ordering::Release);
        let _ = (&self.write).write_all(b"x");
    }

    pub fn is_stopped(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }
}

/// Accept connections on `listener` until `stop` says so, serving their requests on the door's
/// pool of workers and parking them between requests. Returns once the door has stopped and
/// every request being answered has had its answer written (for at most `ANSWER_GRACE`); the
/// parked connections are closed.
///
/// This thread accepts, hands each connection whose next request begins to arrive to a worker,
/// closes connections idle past the deadline, and nudges the pool to grow while its workers are
/// stuck ([`super::pool`]).
pub fn serve(listener: TcpListener, handler: Arc<dyn Handler>, stop: Arc<Stopper>) {
    use std::os::fd::AsRawFd;
    // Room for every connection, and for what a session opens besides (best effort: with less,
    // an accept fails with EMFILE and is retried).
    crate::sys::socket::open_files_limit(MAX_CONNECTIONS as u64 + 256);
    let server = Arc::new(Server {
        handler,
        stop: stop.clone(),
        pool: Pool::new(MAX_CONNECTIONS, WORKER_STACK),
        parked: Parked::new(listener.as_raw_fd(), stop.read.as_raw_fd()).ok(),
        answering: AtomicUsize::new(0),
    });
    let conns = Arc::new(Conns::default());
    let (mut keys, mut swept) = (Vec::new(), Instant::now());
    while !stop.is_stopped() {
        let wait = match server.pool.nudge() {
            true => pool::STALL,
            false => ACCEPT_POLL,
        };
        let waited = match &server.parked {
            Some(parked) => parked.wait(&mut keys, wait),
            None => wait_to_accept(&listener, &stop, &mut keys, wait),
        };
        if waited.is_err() {
            // Nothing to wait on that works: look again later instead of spinning.
            std::thread::sleep(ACCEPT_BACKOFF);
            continue;
        }
        for &key in &keys {
            match (key, &server.parked) {
                (park::LISTENER, _) => accept(&listener, &conns, &server),
                (park::STOPPED, _) | (_, None) => {}
                (key, Some(parked)) => {
                    if let Some(conn) = parked.take(key) {
                        dispatch(&server, conn);
                    }
                }
            }
        }
        if let (true, Some(parked)) = (swept.elapsed() >= SWEEP_EVERY, &server.parked) {
            parked.sweep();
            swept = Instant::now();
        }
    }
    if let Some(parked) = &server.parked {
        parked.close_all();
    }
    // The session exits once this returns: an answer not yet written would be lost (the
    // `session/stop` that ended it would read as a dropped connection).
    let give_up = Instant::now() + ANSWER_GRACE;
    while server.answering.load(Ordering::Acquire) > 0 && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Where epoll is not to be had: wait on the listener and the stop pipe alone.
fn wait_to_accept(
    listener: &TcpListener,
    stop: &Stopper,
    keys: &mut Vec<u64>,
    wait: Duration,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let ready = crate::sys::poll::poll_fds(&[listener.as_raw_fd(), stop.read.as_raw_fd()], wait)?;
    keys.clear();
    if ready[0] {
        keys.push(park::LISTENER);
    }
    Ok(())
}

/// An open connection: its socket, its place among the door's connections, and the bytes of its
/// next request read so far. Here, above the worker that serves it (conn.rs) and the park that
/// holds it between requests (park.rs), so neither of those imports the other's.
struct Conn {
    pub(super) stream: Arc<TcpStream>,
    pub(super) peer: SocketAddr,
    pub(super) place: Place,
    pub(super) buf: Vec<u8>,
    /// Whether its socket has been added to the parking epoll (re-armed after that).
    pub(super) watched: bool,
}

impl Conn {
    fn new(stream: Arc<TcpStream>, peer: SocketAddr, place: Place) -> Self {
        let _ = stream.set_nodelay(true);
        let _ = stream.set_write_timeout(Some(REQUEST_DEADLINE));
        Self {
            stream,
            peer,
            place,
            buf: Vec::new(),
            watched: false,
        }
    }
}

/// Take one connection: admitted, it is parked until its first request arrives (or served at
/// once where nothing parks); past the bound, refused.
fn accept(listener: &TcpListener, conns: &Arc<Conns>, server: &Arc<Server>) {
    let Ok((stream, peer)) = listener.accept() else {
        // EMFILE and friends: back off instead of spinning on a listener we cannot drain.
        std::thread::sleep(ACCEPT_BACKOFF);
        return;
    };
    let stream = Arc::new(stream);
    let Some(place) = conns.admit(&stream, MAX_CONNECTIONS) else {
        refuse_busy(&stream, "every connection is busy; try again shortly");
        return;
    };
    let conn = Conn::new(stream, peer, place);
    match &server.parked {
        Some(parked) => parked.park(conn),
        None => dispatch(server, conn),
    }
}

/// Hand `conn` to a worker, or refuse it if no thread can be had.
fn dispatch(server: &Arc<Server>, conn: Conn) {
    if let Err(stream) = server.dispatch(conn) {
        refuse_busy(
            &stream,
            "no thread to serve this connection; try again shortly",
        );
    }
}

/// Answer 503 on a connection the door cannot serve, never a reset.
fn refuse_busy(stream: &TcpStream, why: &str) {
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let mut refusal = Response::text(503, why);
    refusal.headers.push(("Retry-After", "1".into()));
    if write_response(stream, &mut refusal, false).is_ok() {
        linger(stream, Instant::now() + Duration::from_secs(1));
    }
}
