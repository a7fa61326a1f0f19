//! The door's HTTP/1.1 server: std sockets, one thread per connection, `httparse` for heads.
//!
//! Every bound is enforced here, before a handler sees anything, so a bad request costs its own
//! connection and never the door:
//!
//! | bound | answer |
//! |---|---|
//! | head over 16 KiB | 431, connection closed |
//! | body over 1 MiB (by `Content-Length`) | 413, connection closed |
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

use super::conns::{Conns, Doing, Place};

pub const MAX_HEAD: usize = 16 * 1024;
pub const MAX_BODY: usize = 1024 * 1024;
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// Threads of 256 KiB reserved stack, of which a connection touches a few pages: about 16 KiB
/// of memory each, measured (docs/benchmarks.md).
pub const MAX_CONNECTIONS: usize = 1024;
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
}

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
        }
    }

    pub fn text(status: u16, text: &str) -> Self {
        Self {
            status,
            headers: vec![("Content-Type", "text/plain; charset=utf-8".into())],
            body: format!("{text}\n").into_bytes(),
            stream: None,
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
        }
    }
}

/// What answers requests. Called from many connection threads at once.
pub trait Handler: Send + Sync + 'static {
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

/// Accept connections on `listener` until `stop` says so, serving each on its own thread.
/// Returns once the accept loop has stopped and every request being answered has had its answer
/// written (for at most `ANSWER_GRACE`); idle connections are left to close on their threads.
pub fn serve(listener: TcpListener, handler: Arc<dyn Handler>, stop: Arc<Stopper>) {
    use std::os::fd::AsRawFd;
    // Room for every connection, and for what a session opens besides (best effort: with less,
    // an accept fails with EMFILE and is retried).
    crate::sys::socket::open_files_limit(MAX_CONNECTIONS as u64 + 256);
    let conns = Arc::new(Conns::default());
    let answering = Arc::new(AtomicUsize::new(0));
    while !stop.is_stopped() {
        let fds = [listener.as_raw_fd(), stop.read.as_raw_fd()];
        match crate::sys::poll::poll_fds(&fds, ACCEPT_POLL) {
            Ok(ready) if ready[0] => {}
            Ok(_) => continue,
            Err(_) => {
                // Nothing to wait on that works: look again later instead of spinning.
                std::thread::sleep(ACCEPT_BACKOFF);
                continue;
            }
        }
        let Ok((stream, peer)) = listener.accept() else {
            // EMFILE and friends: back off instead of spinning on a listener we cannot drain.
            std::thread::sleep(ACCEPT_BACKOFF);
            continue;
        };
        let stream = Arc::new(stream);
        let Some(place) = conns.admit(&stream, MAX_CONNECTIONS) else {
            refuse_busy(&stream, "every connection is busy; try again shortly");
            continue;
        };
        let (handler, stop, answering) = (handler.clone(), stop.clone(), answering.clone());
        let served = stream.clone();
        let spawned = std::thread::Builder::new()
            .name("door-conn".into())
            .stack_size(256 * 1024)
            .spawn(move || connection(&served, peer, &place, &*handler, &stop, &answering));
        if spawned.is_err() {
            refuse_busy(
                &stream,
                "no thread to serve this connection; try again shortly",
            );
        }
    }
    // The session exits once this returns: an answer not yet written would be lost (the
    // `session/stop` that ended it would read as a dropped connection).
    let give_up = Instant::now() + ANSWER_GRACE;
    while answering.load(Ordering::Acquire) > 0 && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(5));
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

/// Serve requests on one connection until it closes, errs, asks to close, or the door stops.
fn connection(
    stream: &TcpStream,
    peer: SocketAddr,
    place: &Place,
    handler: &dyn Handler,
    stop: &Stopper,
    answering: &AtomicUsize,
) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(REQUEST_DEADLINE));
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    loop {
        let request = match read_request(stream, &mut buf, peer, place) {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(mut refusal) => {
                place.doing(Doing::Lingering);
                if write_response(stream, &mut refusal, false).is_ok() {
                    linger(stream, Instant::now() + LINGER_TIME);
                }
                return;
            }
        };
        place.doing(Doing::Answering);
        // Counted from before the handler runs until its answer is written, so a stop the
        // handler itself caused waits for this answer.
        answering.fetch_add(1, Ordering::AcqRel);
        let request_keep_alive = request.keep_alive;
        let mut response = handler.handle(request);
        let keep_alive = request_keep_alive && !stop.is_stopped() && response.stream.is_none();
        let written = write_response(stream, &mut response, keep_alive);
        answering.fetch_sub(1, Ordering::AcqRel);
        if written.is_err() || !keep_alive {
            return;
        }
        place.doing(Doing::Idle);
    }
}

/// After a refusal: stop sending, then read and drop what the client still sends — until it
/// closes, `until`, or [`LINGER_BYTES`] — so its data does not arrive to a closed socket, which
/// would answer with a reset that can reach the client before it has read the refusal.
fn linger(stream: &TcpStream, until: Instant) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut chunk = [0u8; 8192];
    let mut dropped = 0;
    while dropped < LINGER_BYTES {
        match super::read_by(stream, &mut chunk, until) {
            super::Received::Bytes(n) => dropped += n,
            _ => return,
        }
    }
}

/// Read one request from `stream`, with any bytes already in `buf` (pipelined). `Ok(None)` is a
/// connection closed (or idle past the deadline) between requests; `Err` is the response that
/// refuses a bad one.
fn read_request(
    stream: &TcpStream,
    buf: &mut Vec<u8>,
    peer: SocketAddr,
    place: &Place,
) -> Result<Option<Request>, Response> {
    let mut started = (!buf.is_empty()).then(Instant::now);
    let idle_since = Instant::now();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(request) = parse_buffered(buf, peer)? {
            return Ok(Some(request));
        }
        let deadline = started.unwrap_or(idle_since) + REQUEST_DEADLINE;
        match super::read_by(stream, &mut chunk, deadline) {
            super::Received::Bytes(n) => {
                if started.is_none() {
                    started = Some(Instant::now());
                    place.doing(Doing::Reading);
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            super::Received::Late => {
                return match started {
                    Some(_) => Err(Response::text(408, "request not complete within 10 s")),
                    None => Ok(None),
                };
            }
            super::Received::Closed | super::Received::Failed(_) => return Ok(None),
        }
    }
}

/// Take one complete request off the front of `buf`, if there is one.
pub fn parse_buffered(buf: &mut Vec<u8>, peer: SocketAddr) -> Result<Option<Request>, Response> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Request::new(&mut headers);
    let head_len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(len)) if len <= MAX_HEAD => len,
        Ok(httparse::Status::Complete(_)) => return Err(head_too_large()),
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => return Err(head_too_large()),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(head_too_large()),
        Err(err) => return Err(Response::text(400, &format!("malformed request: {err}"))),
    };
    let mut content_length: Option<usize> = None;
    for header in parsed.headers.iter() {
        if header.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(Response::text(
                501,
                "Transfer-Encoding is not supported; send Content-Length",
            ));
        }
        if header.name.eq_ignore_ascii_case("content-length") {
            let len = std::str::from_utf8(header.value)
                .ok()
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<usize>().ok())
                .ok_or_else(|| Response::text(400, "malformed Content-Length"))?;
            if content_length.is_some_and(|seen| seen != len) {
                return Err(Response::text(400, "conflicting Content-Length headers"));
            }
            content_length = Some(len);
        }
    }
    let body_len = content_length.unwrap_or(0);
    if body_len > MAX_BODY {
        return Err(Response::text(413, "body larger than 1 MiB"));
    }
    if buf.len() < head_len + body_len {
        return Ok(None);
    }
    let connection = |token: &[u8]| {
        parsed.headers.iter().any(|h| {
            h.name.eq_ignore_ascii_case("connection")
                && h.value
                    .split(|&b| b == b',')
                    .any(|v| v.trim_ascii().eq_ignore_ascii_case(token))
        })
    };
    let keep_alive = match parsed.version {
        Some(1) => !connection(b"close"),
        _ => connection(b"keep-alive"),
    };
    let request = Request {
        keep_alive,
        method: parsed.method.unwrap_or("").to_string(),
        path: parsed.path.unwrap_or("").to_string(),
        headers: parsed
            .headers
            .iter()
            .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
            .collect(),
        body: buf[head_len..head_len + body_len].to_vec(),
        peer,
    };
    buf.drain(..head_len + body_len);
    Ok(Some(request))
}

fn head_too_large() -> Response {
    Response::text(431, "request head larger than 16 KiB")
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn write_response(
    mut stream: &TcpStream,
    response: &mut Response,
    keep_alive: bool,
) -> std::io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\n",
        response.status,
        reason(response.status)
    );
    for (name, value) in &response.headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    let Some(body) = response.stream.as_mut() else {
        out.push_str(&format!(
            "Content-Length: {}\r\nConnection: {}\r\n\r\n",
            response.body.len(),
            if keep_alive { "keep-alive" } else { "close" }
        ));
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(&response.body);
        stream.write_all(&bytes)?;
        return stream.flush();
    };
    // A streamed body ends when the connection closes.
    out.push_str("Connection: close\r\n\r\n");
    stream.write_all(out.as_bytes())?;
    stream.flush()?;
    while let Some(piece) = body.next() {
        stream.write_all(&piece)?;
        stream.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> SocketAddr {
        "127.0.0.1:9".parse().unwrap()
    }

    fn parse(bytes: &[u8]) -> Result<Option<Request>, u16> {
        let mut buf = bytes.to_vec();
        parse_buffered(&mut buf, peer()).map_err(|r| r.status)
    }

    #[test]
    fn a_requests_debug_never_shows_a_header_value() {
        let request = Request {
            method: "POST".into(),
            path: "/".into(),
            headers: vec![("authorization".into(), b"Bearer mdt1.secret".to_vec())],
            body: b"{}".to_vec(),
            peer: "127.0.0.1:1".parse().unwrap(),
            keep_alive: true,
        };
        let shown = format!("{request:?}");
        assert!(
            shown.contains("authorization") && !shown.contains("secret"),
            "{shown}"
        );
    }

    #[test]
    fn a_complete_request_with_a_body_parses_and_pipelining_keeps_the_rest() {
        let mut buf =
            b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nhiGET /x HTTP/1.1\r\n\r\n".to_vec();
        let first = parse_buffered(&mut buf, peer()).unwrap().unwrap();
        assert_eq!(
            (first.method.as_str(), first.body.as_slice()),
            ("POST", &b"hi"[..])
        );
        let second = parse_buffered(&mut buf, peer()).unwrap().unwrap();
        assert_eq!(second.path, "/x");
        assert!(buf.is_empty());
    }

    #[test]
    fn partial_requests_wait_for_more() {
        assert!(parse(b"GET / HTTP/1.1\r\n").unwrap().is_none());
        assert!(
            parse(b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhi")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn every_bound_has_its_status() {
        let big_head = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert_eq!(parse(big_head.as_bytes()).unwrap_err(), 431);
        assert_eq!(parse(&vec![b'a'; MAX_HEAD + 1]).unwrap_err(), 431);
        let unfinished_big = format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(MAX_HEAD));
        assert_eq!(parse(unfinished_big.as_bytes()).unwrap_err(), 431);
        let too_long = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            MAX_BODY + 1
        );
        assert_eq!(parse(too_long.as_bytes()).unwrap_err(), 413);
        for bad in ["-1", "", "1x", "99999999999999999999999", "+1"] {
            let head = format!("POST / HTTP/1.1\r\nContent-Length: {bad}\r\n\r\n");
            assert_eq!(parse(head.as_bytes()).unwrap_err(), 400, "{bad:?}");
        }
        assert_eq!(
            parse(b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab")
                .unwrap_err(),
            400
        );
        assert_eq!(
            parse(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap_err(),
            501
        );
        assert_eq!(parse(b"\xff\xfe / HTTP/1.1\r\n\r\n").unwrap_err(), 400);
    }
}
