//! Writing an answer, and the lingering close after a refusal.

use std::io::Write;
use std::net::TcpStream;
use std::time::Instant;

use super::super::pool;
use super::{LINGER_BYTES, Response};

/// After a refusal: stop sending, then read and drop what the client still sends — until it
/// closes, `until`, or [`LINGER_BYTES`] — so its data does not arrive to a closed socket, which
/// would answer with a reset that can reach the client before it has read the refusal.
pub(super) fn linger(stream: &TcpStream, until: Instant) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut chunk = [0u8; 8192];
    let mut dropped = 0;
    while dropped < LINGER_BYTES {
        match super::super::read_by(stream, &mut chunk, until) {
            super::super::Received::Bytes(n) => dropped += n,
            _ => return,
        }
    }
}

/// Write all of `bytes`; a write of [`MAY_WAIT`] or more is marked as a wait.
fn send(mut stream: &TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    let mut write = || stream.write_all(bytes).and_then(|()| stream.flush());
    match bytes.len() >= MAY_WAIT {
        true => pool::blocking(write),
        false => write(),
    }
}

/// An answer this long may not fit the socket's send buffer, and writing it may wait on its
/// reader: a wait the door's pool may start another worker for.
const MAY_WAIT: usize = 64 << 10;

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

pub(super) fn write_response(
    stream: &TcpStream,
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
        return send(stream, &bytes);
    };
    // A streamed body ends when the connection closes. Its pieces come as they happen (a
    // body's own waits for them are marked where they wait), and its reader may be slow.
    out.push_str("Connection: close\r\n\r\n");
    send(stream, out.as_bytes())?;
    while let Some(piece) = body.next() {
        send(stream, &piece)?;
    }
    Ok(())
}
