//! Parsing a request's head within the door's bounds: what it asks, and how long its body is —
//! known before a byte of the body is read.

use std::net::SocketAddr;

use super::{MAX_BODY, MAX_HEAD, Request, Response};

/// A complete head at the front of a buffer: the request (no body yet), the head's length and
/// the body's (by `Content-Length`, at most [`MAX_BODY`]).
pub(super) struct Head {
    pub(super) request: Request,
    pub(super) head_len: usize,
    pub(super) body_len: usize,
}

/// Take one complete request off the front of `buf`, if there is one (head and body both
/// arrived); nothing is taken otherwise.
pub fn parse_buffered(buf: &mut Vec<u8>, peer: SocketAddr) -> Result<Option<Request>, Response> {
    let Some(Head {
        mut request,
        head_len,
        body_len,
    }) = parse_head(buf, peer)?
    else {
        return Ok(None);
    };
    if buf.len() < head_len + body_len {
        return Ok(None);
    }
    request.body = buf[head_len..head_len + body_len].to_vec();
    buf.drain(..head_len + body_len);
    Ok(Some(request))
}

/// The head complete at the front of `buf`, if it is; `buf` is left as it is. `Err` is the
/// refusal of a head past a bound or malformed.
pub(super) fn parse_head(buf: &[u8], peer: SocketAddr) -> Result<Option<Head>, Response> {
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
    Ok(Some(Head {
        request,
        head_len,
        body_len,
    }))
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
