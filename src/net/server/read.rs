//! Reading one request off a connection: its head into the connection's buffer, its body — once
//! the handler has admitted it — into a buffer of its own, each within the door's bounds.

use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

use super::super::conns::{Doing, Place};
use super::{Handler, MAX_BODY, MAX_HEAD, REQUEST_DEADLINE, Request, Response};

/// Read one request from `stream`, with any bytes already in `buf` (pipelined). `Ok(None)` is a
/// connection closed (or idle past the deadline) between requests; `Err` is the response that
/// refuses a bad one.
///
/// The head is read into `buf` (at most [`MAX_HEAD`] and one read more); the body, once
/// `handler` has admitted it, straight into a buffer of exactly its length — never more than
/// it asked for, so what follows it stays in the socket, and no request is held twice.
pub(super) fn read_request(
    stream: &TcpStream,
    buf: &mut Vec<u8>,
    peer: SocketAddr,
    place: &Place,
    handler: &dyn Handler,
) -> Result<Option<Request>, Response> {
    let mut clock = Clock {
        started: (!buf.is_empty()).then(Instant::now),
        idle_since: Instant::now(),
    };
    let mut chunk = [0u8; 8192];
    let (mut request, head_len, body_len) = loop {
        if let Some(head) = parse_head(buf, peer)? {
            break head;
        }
        match clock.read(stream, &mut chunk, place)? {
            Some(n) => buf.extend_from_slice(&chunk[..n]),
            None => return Ok(None),
        }
    };
    buf.drain(..head_len);
    request.hold = handler.admit(&request, body_len)?;
    let mut body = vec![0; body_len];
    let mut filled = buf.len().min(body_len);
    body[..filled].copy_from_slice(&buf[..filled]);
    buf.drain(..filled);
    while filled < body_len {
        match clock.read(stream, &mut body[filled..], place)? {
            Some(n) => filled += n,
            None => return Ok(None),
        }
    }
    request.body = body;
    Ok(Some(request))
}

/// When the request being read began arriving, for its deadline ([`REQUEST_DEADLINE`] from its
/// first byte, or from the moment the connection went idle for the next one).
struct Clock {
    started: Option<Instant>,
    idle_since: Instant,
}

impl Clock {
    /// Read what has arrived into `into`, by the deadline: how much, `None` if the connection
    /// closed or stayed idle, the 408 refusal if a begun request is late.
    fn read(
        &mut self,
        stream: &TcpStream,
        into: &mut [u8],
        place: &Place,
    ) -> Result<Option<usize>, Response> {
        let deadline = self.started.unwrap_or(self.idle_since) + REQUEST_DEADLINE;
        match super::super::read_by(stream, into, deadline) {
            super::super::Received::Bytes(n) => {
                if self.started.is_none() {
                    self.started = Some(Instant::now());
                    place.doing(Doing::Reading);
                }
                Ok(Some(n))
            }
            super::super::Received::Late if self.started.is_some() => {
                Err(Response::text(408, "request not complete within 10 s"))
            }
            _ => Ok(None),
        }
    }
}

/// Take one complete request off the front of `buf`, if there is one (head and body both
/// arrived); nothing is taken otherwise.
pub fn parse_buffered(buf: &mut Vec<u8>, peer: SocketAddr) -> Result<Option<Request>, Response> {
    let Some((mut request, head_len, body_len)) = parse_head(buf, peer)? else {
        return Ok(None);
    };
    if buf.len() < head_len + body_len {
        return Ok(None);
    }
    request.body = buf[head_len..head_len + body_len].to_vec();
    buf.drain(..head_len + body_len);
    Ok(Some(request))
}

/// The request whose head is complete at the front of `buf` (with no body yet), the head's
/// length and the body's (by `Content-Length`, at most [`MAX_BODY`]); `buf` is left as it is.
fn parse_head(buf: &[u8], peer: SocketAddr) -> Result<Option<(Request, usize, usize)>, Response> {
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
        body: Vec::new(),
        peer,
        hold: None,
    };
    Ok(Some((request, head_len, body_len)))
}

fn head_too_large() -> Response {
    Response::text(431, "request head larger than 16 KiB")
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
            hold: None,
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
