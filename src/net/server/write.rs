//! An answer's head on the wire; its body follows as it is.

use super::Response;

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

/// Why the door itself refused with `status` (the ones it refuses on its own).
pub(super) fn reason_refused(status: u16) -> &'static str {
    match status {
        408 => "request not complete within 10 s",
        _ => reason(status),
    }
}

/// `response`'s status line and headers, with `Content-Length` (none for a stream, whose end is
/// the connection's) and `Connection`.
pub(super) fn head_bytes(response: &Response, keep_alive: bool) -> Vec<u8> {
    use std::fmt::Write;
    let mut out = format!(
        "HTTP/1.1 {} {}\r\n",
        response.status,
        reason(response.status)
    );
    for (name, value) in &response.headers {
        let _ = write!(out, "{name}: {value}\r\n");
    }
    if response.stream.is_none() {
        let _ = write!(out, "Content-Length: {}\r\n", response.body.len());
    }
    let connection = match keep_alive {
        true => "keep-alive",
        false => "close",
    };
    let _ = write!(out, "Connection: {connection}\r\n\r\n");
    out.into_bytes()
}
