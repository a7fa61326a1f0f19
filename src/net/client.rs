//! HTTP/1.1 to doors on this machine, client side: requests on the wire, responses framed and
//! bounded, and event streams read as they come. Whole-response exchanges — every door probe,
//! every JSON-RPC call — run on [`super::multi`]'s event loop; a stream (`message/stream`) is
//! read here, blocking, an event at a time.
//!
//! Written on std sockets and `httparse` rather than a client crate because a door probe needs
//! what general clients do not give together: a connect deadline separate from the read deadline,
//! a read deadline for the whole response (a server dripping one byte a second must not hold a
//! `mur ps` for minutes), a cap on what is read, no thread per request and no name resolution —
//! a door's address is an IP literal, and a static binary has no resolver to lean on.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The most of a response head or body this client reads; an agent card is a few KiB.
pub const MAX_RESPONSE_BYTES: usize = 1 << 20;
/// The most bytes of one response read off the wire, by every reader of whole responses: its
/// body's bound, and room for its head.
pub const MAX_RESPONSE_READ: usize = MAX_RESPONSE_BYTES + 64 * 1024;

/// How long to wait for the connection, and for the whole response once connected.
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    pub connect: Duration,
    pub response: Duration,
}

/// One request. `headers` are sent as given, after `Host`, `Connection: close` and (with a body)
/// `Content-Length`.
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub headers: &'a [(&'a str, &'a str)],
    pub body: Option<&'a [u8]>,
}

/// A whole response as a server sent it: its status and body (what the door itself answers is
/// [`crate::net::server::Response`]).
#[derive(Debug)]
pub struct WholeResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

/// A door address as records and readiness lines carry it — `host:port`, optionally behind
/// `http://` and before a `/` — as a socket address. Only IP literals are accepted.
pub fn parse_door_addr(url: &str) -> Result<SocketAddr, String> {
    let bare = url.strip_prefix("http://").unwrap_or(url);
    let bare = bare.strip_suffix('/').unwrap_or(bare);
    bare.parse().map_err(|_| {
        format!(
            "'{}' is not a door address (an IP address and port, like 127.0.0.1:41873)",
            url.escape_debug()
        )
    })
}

impl Request<'_> {
    /// The request as it goes on the wire to `addr`: its head (`Host`, `Connection: close`, the
    /// given headers, `Content-Length` with a body) and its body. It may carry a bearer token:
    /// the bytes go to a socket and nowhere else.
    pub fn encode(&self, addr: SocketAddr) -> Vec<u8> {
        self.encode_for(&addr.to_string())
    }

    /// [`Request::encode`] with `host` as its `Host` (a name and port: a webhook's receiver may
    /// serve several names at one address).
    pub fn encode_for(&self, host: &str) -> Vec<u8> {
        let mut head = format!(
            "{} {} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n",
            self.method, self.path
        );
        for (name, value) in self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(body) = self.body {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        let mut out = head.into_bytes();
        out.extend_from_slice(self.body.unwrap_or_default());
        out
    }
}

/// Connect to `addr` within the connect deadline and write `request`, blocking.
fn connect_and_send(
    addr: SocketAddr,
    request: &Request,
    deadlines: Deadlines,
) -> Result<TcpStream, String> {
    let fail = |what: &str, err: &dyn std::fmt::Display| format!("{addr}: {what}: {err}");
    let mut stream = TcpStream::connect_timeout(&addr, deadlines.connect)
        .map_err(|err| fail("cannot connect", &err))?;
    let _ = stream.set_nodelay(true);
    stream
        .set_write_timeout(Some(deadlines.response))
        .map_err(|err| fail("cannot set a timeout", &err))?;
    stream
        .write_all(&request.encode(addr))
        .map_err(|err| fail("cannot send the request", &err))?;
    Ok(stream)
}

/// What a request that may stream got back.
pub enum Incoming {
    /// A whole response (an error answered before any stream opened, or not a stream at all).
    Whole(WholeResponse),
    /// `text/event-stream`: its events, read as they arrive.
    Events(Events),
}

/// Send `request` and read the response head: a server-sent-event stream is returned open, to
/// be read event by event; anything else is read whole (at most [`MAX_RESPONSE_BYTES`]).
pub fn send_streaming(
    addr: SocketAddr,
    request: &Request,
    deadlines: Deadlines,
) -> Result<Incoming, String> {
    let stream = connect_and_send(addr, request, deadlines)?;
    let deadline = Instant::now() + deadlines.response;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 8192];
    loop {
        if let Some((status, Framing::UntilClose, head_len)) =
            parse_head(&buf).map_err(|err| format!("{addr}: bad response: {err}"))?
            && is_event_stream(&buf[..head_len])
        {
            buf.drain(..head_len);
            return Ok(Incoming::Events(Events {
                stream,
                buf,
                status,
                wait: deadlines.response,
                addr,
            }));
        }
        if let Some(response) =
            complete_response(&buf).map_err(|err| format!("{addr}: bad response: {err}"))?
        {
            return Ok(Incoming::Whole(response));
        }
        match super::read_by(&stream, &mut chunk, deadline) {
            super::Received::Bytes(n) if buf.len() + n <= MAX_RESPONSE_READ => {
                buf.extend_from_slice(&chunk[..n]);
            }
            super::Received::Bytes(_) => return Err(format!("{addr}: response larger than 1 MiB")),
            super::Received::Closed => {
                return finish_at_eof(&buf)
                    .map(Incoming::Whole)
                    .map_err(|err| format!("{addr}: bad response: {err}"));
            }
            super::Received::Late => return Err(format!("{addr}: no answer in time")),
            super::Received::Failed(err) => return Err(format!("{addr}: read failed: {err}")),
        }
    }
}

/// Whether a response head says `Content-Type: text/event-stream`.
fn is_event_stream(head: &[u8]) -> bool {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Response::new(&mut headers);
    parsed.parse(head).is_ok()
        && parsed.headers.iter().any(|h| {
            h.name.eq_ignore_ascii_case("content-type")
                && h.value
                    .to_ascii_lowercase()
                    .starts_with(b"text/event-stream")
        })
}

/// An open event stream.
pub struct Events {
    stream: TcpStream,
    buf: Vec<u8>,
    pub status: u16,
    /// How long the stream may be silent (keep-alive comments count) before it is given up.
    wait: Duration,
    addr: SocketAddr,
}

impl Events {
    /// The next event's `data` (its data lines joined by newlines); `Ok(None)` when the stream
    /// has ended. An event larger than 1 MiB, or silence longer than the wait, is the `Err`.
    pub fn next_event(&mut self) -> Result<Option<String>, String> {
        let mut chunk = [0u8; 8192];
        loop {
            while let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = self.buf.drain(..end + 2).collect();
                let text = String::from_utf8_lossy(&event);
                let data: Vec<&str> = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                if !data.is_empty() {
                    return Ok(Some(data.join("\n")));
                }
            }
            if self.buf.len() > MAX_RESPONSE_BYTES {
                return Err(format!("{}: an event larger than 1 MiB", self.addr));
            }
            let deadline = Instant::now() + self.wait;
            match super::read_by(&self.stream, &mut chunk, deadline) {
                super::Received::Bytes(n) => self.buf.extend_from_slice(&chunk[..n]),
                super::Received::Closed => return Ok(None),
                super::Received::Late => {
                    return Err(format!(
                        "{}: the stream was silent for {}s",
                        self.addr,
                        self.wait.as_secs()
                    ));
                }
                super::Received::Failed(err) => {
                    return Err(format!("{}: read failed: {err}", self.addr));
                }
            }
        }
    }
}

/// How the body of a parsed head is delimited.
enum Framing {
    Length(usize),
    Chunked,
    UntilClose,
}

/// The status, framing and head length of `buf`, or `None` if the head is not complete yet.
fn parse_head(buf: &[u8]) -> Result<Option<(u16, Framing, usize)>, String> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Response::new(&mut headers);
    let head_len = match parsed.parse(buf).map_err(|err| err.to_string())? {
        httparse::Status::Complete(len) => len,
        httparse::Status::Partial => return Ok(None),
    };
    let status = parsed.code.unwrap_or(0);
    let mut framing = Framing::UntilClose;
    for header in parsed.headers.iter() {
        if header.name.eq_ignore_ascii_case("transfer-encoding") {
            if header.value.eq_ignore_ascii_case(b"chunked") {
                framing = Framing::Chunked;
            }
        } else if header.name.eq_ignore_ascii_case("content-length")
            && !matches!(framing, Framing::Chunked)
        {
            let len = std::str::from_utf8(header.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .ok_or("malformed Content-Length")?;
            if len > MAX_RESPONSE_BYTES {
                return Err("body larger than 1 MiB".into());
            }
            framing = Framing::Length(len);
        }
    }
    Ok(Some((status, framing, head_len)))
}

/// The response in `buf` if it is complete by its own framing.
pub fn complete_response(buf: &[u8]) -> Result<Option<WholeResponse>, String> {
    let Some((status, framing, head_len)) = parse_head(buf)? else {
        return Ok(None);
    };
    let rest = &buf[head_len..];
    let body = match framing {
        Framing::Length(len) if rest.len() >= len => rest[..len].to_vec(),
        Framing::Chunked => match dechunk(rest)? {
            Some(body) => body,
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    Ok(Some(WholeResponse { status, body }))
}

/// The response in `buf` once the server has closed the connection.
pub(super) fn finish_at_eof(buf: &[u8]) -> Result<WholeResponse, String> {
    if let Some(response) = complete_response(buf)? {
        return Ok(response);
    }
    match parse_head(buf)? {
        Some((status, Framing::UntilClose, head_len)) => Ok(WholeResponse {
            status,
            body: buf[head_len..].to_vec(),
        }),
        _ => Err("connection closed before the response was complete".into()),
    }
}

/// A chunked body decoded, `None` while incomplete.
fn dechunk(mut rest: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut body = Vec::new();
    loop {
        let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let size_text = std::str::from_utf8(&rest[..line_end]).map_err(|_| "bad chunk size")?;
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| "bad chunk size")?;
        // Compared without adding: a door may claim a size near `usize::MAX`.
        if size > MAX_RESPONSE_BYTES - body.len() {
            return Err("body larger than 1 MiB".into());
        }
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(Some(body));
        }
        if rest.len() < size + 2 {
            return Ok(None);
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_size_near_usize_max_is_refused_not_a_panic() {
        for size in ["fffffffffffffffe", "ffffffffffffffff", "100001"] {
            let response =
                format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{size}\r\nab\r\n");
            assert_eq!(
                complete_response(response.as_bytes()).err().as_deref(),
                Some("body larger than 1 MiB"),
                "{size}"
            );
        }
    }

    #[test]
    fn door_addresses_are_ip_literals_with_a_port() {
        for ok in ["127.0.0.1:41873", "http://127.0.0.1:1/", "[::1]:80"] {
            assert!(parse_door_addr(ok).is_ok(), "{ok}");
        }
        for bad in [
            "localhost:80",
            "127.0.0.1",
            "",
            "http://",
            "example.com:443",
            "1.2.3.4:99999",
        ] {
            assert!(parse_door_addr(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn framing_by_length_chunks_and_close() {
        let r = complete_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi").unwrap();
        assert_eq!(r.unwrap().body, b"hi");
        assert!(
            complete_response(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nhi")
                .unwrap()
                .is_none()
        );
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n1;x\r\n!\r\n0\r\n\r\n";
        assert_eq!(complete_response(chunked).unwrap().unwrap().body, b"hi!");
        let close = b"HTTP/1.1 200 OK\r\n\r\nall of it";
        assert!(complete_response(close).unwrap().is_none());
        assert_eq!(finish_at_eof(close).unwrap().body, b"all of it");
        assert!(finish_at_eof(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhi").is_err());
        assert!(complete_response(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
        assert!(complete_response(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n").is_err());
        assert!(complete_response(b"garbage\r\n\r\n").is_err());
    }
}
