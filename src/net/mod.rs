//! HTTP on std sockets: the door's server, and the client side the host tools use to reach a
//! door — whole exchanges on one thread's event loop ([`multi`]), streams read as they come
//! ([`client`]).

pub mod client;
pub mod multi;
pub mod server;
pub mod webhook;

use std::io::Read;
use std::net::TcpStream;
use std::time::Instant;

/// What one bounded read from a socket gave.
pub(crate) enum Received {
    Bytes(usize),
    /// The peer closed its end.
    Closed,
    /// Nothing arrived before the deadline.
    Late,
    Failed(std::io::Error),
}

/// Read once into `chunk`, waiting no later than `deadline`. The wait is `poll(2)` rather than a
/// socket receive timeout, which the kernel fires up to a tick late; `EINTR` is retried. The
/// one read loop under the client's answers, whole or streamed (the door's server never waits
/// on a socket).
pub(crate) fn read_by(stream: &TcpStream, chunk: &mut [u8], deadline: Instant) -> Received {
    let mut stream = stream;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Received::Late;
        }
        match crate::sys::poll::poll_readable(stream, remaining) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(err) => return Received::Failed(err),
        }
        match stream.read(chunk) {
            Ok(0) => return Received::Closed,
            Ok(n) => return Received::Bytes(n),
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(err) => return Received::Failed(err),
        }
    }
}
