//! The door's listening socket: bound at `--bind`/`--port`, or handed over ready-made —
//! `--listen-fd N`, or a service manager's socket activation (`LISTEN_PID`, `LISTEN_FDS`,
//! `LISTEN_FDNAMES`: sd_listen_fds(3)). A handed-over socket outlives the session that serves
//! it: while one session ends and the next starts, connections wait in its queue instead of
//! being refused. The session only ever closes its copy (never `shutdown`, which would abort
//! the queue for whoever serves next).

use std::net::{SocketAddr, TcpListener};

use super::Options;

/// Connections the door's listening socket queues before they are accepted: a burst of clients
/// beyond the 128 served at once gets its 503 at once instead of after a resent handshake. (A
/// handed-over socket keeps the backlog its manager gave it: `Backlog=` in a `.socket` unit.)
const DOOR_BACKLOG: u16 = 1024;
/// The first descriptor a service manager passes (`SD_LISTEN_FDS_START`).
const FIRST_PASSED: i32 = 3;
/// The name (`FileDescriptorName=`) that picks the door among several passed sockets.
const DOOR_NAME: &str = "door";

/// The door's listening socket and its `host:port`.
pub fn listen(options: &Options) -> Result<(TcpListener, String), String> {
    let listener = match options.listen_fd.map(Ok).or_else(activated).transpose()? {
        Some(fd) => handed_over(fd)?,
        None => {
            let listener =
                TcpListener::bind(SocketAddr::new(options.bind, options.port)).map_err(|err| {
                    format!("cannot listen on {}:{}: {err}", options.bind, options.port)
                })?;
            // Best effort: std's 128 still serves, only a burst of connections waits longer.
            let _ = crate::sys::socket::deepen_backlog(&listener, DOOR_BACKLOG);
            listener
        }
    };
    let addr = listener
        .local_addr()
        .map_err(|err| format!("cannot read the door's address: {err}"))?
        .to_string();
    Ok((listener, addr))
}

/// Descriptor `fd`, taken (close-on-exec from here: no handler inherits it) if it is a
/// listening TCP socket.
fn handed_over(fd: i32) -> Result<TcpListener, String> {
    let file = crate::sys::pipe::take_inherited(fd)?;
    crate::sys::socket::listening_tcp(file.into())
        .map_err(|why| format!("descriptor {fd} is not a door to serve: {why}"))
}

/// The descriptor a service manager passed this process, if it passed any: the one socket, or
/// among several the one named [`DOOR_NAME`]. Variables meant for another process (its
/// `LISTEN_PID` not ours: a parent's, inherited) are not ours to act on.
fn activated() -> Option<Result<i32, String>> {
    let pid: u32 = std::env::var("LISTEN_PID").ok()?.parse().ok()?;
    if pid != std::process::id() {
        return None;
    }
    let count: i32 = match std::env::var("LISTEN_FDS").map(|n| n.parse()) {
        Ok(Ok(count)) if count >= 1 => count,
        _ => return None,
    };
    if count == 1 {
        return Some(Ok(FIRST_PASSED));
    }
    let names = std::env::var("LISTEN_FDNAMES").unwrap_or_default();
    Some(
        names
            .split(':')
            .position(|name| name == DOOR_NAME)
            .filter(|&at| (at as i32) < count)
            .map(|at| FIRST_PASSED + at as i32)
            .ok_or_else(|| {
                format!(
                    "the service manager passed {count} sockets and none is named \
                     '{DOOR_NAME}': name the door's FileDescriptorName={DOOR_NAME} in its \
                     .socket unit"
                )
            }),
    )
}
