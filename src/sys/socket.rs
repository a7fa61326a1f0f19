//! What `std` cannot do with sockets: start a TCP connection without waiting for it (a
//! non-blocking `connect(2)`), so one thread can have thousands under way and learn how each
//! went from `poll(2)`; and the descriptor limit, read and raised, that bounds how many.

use std::net::{SocketAddr, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd};

/// `socket` as the door's listener, if it is one: a TCP socket (IPv4 or IPv6) already listening
/// — what a service manager passes on socket activation. The `Err` says what it is instead.
pub fn listening_tcp(socket: OwnedFd) -> Result<std::net::TcpListener, String> {
    use std::os::fd::AsRawFd;
    let fd = socket.as_raw_fd();
    let option = |name: libc::c_int| -> std::io::Result<libc::c_int> {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `value` and `len` are live locals of the sizes given; the descriptor is ours.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                name,
                (&raw mut value).cast(),
                &mut len,
            )
        };
        if rc == 0 {
            Ok(value)
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    let kind = option(libc::SO_TYPE).map_err(|err| format!("not a socket ({err})"))?;
    let listener = std::net::TcpListener::from(socket);
    let family = listener
        .local_addr()
        .map_err(|_| "not an IP socket (a Unix socket?)".to_string())?;
    if kind != libc::SOCK_STREAM {
        return Err(format!("not a TCP socket ({family} is a datagram socket)"));
    }
    // SO_ACCEPTCONN is Linux's and the BSDs' alike.
    match option(libc::SO_ACCEPTCONN) {
        Ok(0) => Err(format!("a TCP socket at {family}, but not listening")),
        Ok(_) => Ok(listener),
        Err(err) => Err(format!("cannot tell whether it listens: {err}")),
    }
}

/// Start a TCP connection to `addr` on a new non-blocking, close-on-exec socket (no child forked
/// meanwhile by another thread inherits it on Linux, where both flags are set with the socket).
///
/// `Ok` once `connect(2)` has been issued, whether the connection is made or still under way
/// (`EINPROGRESS`): the socket becomes writable when it is made or refused, and then
/// [`TcpStream::take_error`] says which. The `Err` is the socket's creation failing (`EMFILE`,
/// `ENFILE`: see [`is_out_of_descriptors`]) or the connection refused at once. Reads and writes
/// on the stream never block; writes never raise `SIGPIPE` (std sends with `MSG_NOSIGNAL` on
/// Linux, and ignores `SIGPIPE` in every Rust binary).
pub fn connect_started(addr: &SocketAddr) -> std::io::Result<TcpStream> {
    let family = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    let socket = new_socket(family)?;
    let (storage, len) = sockaddr(addr);
    // SAFETY: `storage` is a live, initialised socket address of `len` bytes for `addr`'s family,
    // and the descriptor is ours.
    let rc = unsafe {
        libc::connect(
            std::os::fd::AsRawFd::as_raw_fd(&socket),
            (&raw const storage).cast(),
            len,
        )
    };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(err);
        }
    }
    Ok(TcpStream::from(socket))
}

/// Let `listener` queue up to `backlog` connections not yet accepted (`listen(2)` again, which
/// on a listening socket only resizes its queue; the kernel caps it at `somaxconn`).
///
/// Why: std listens with a backlog of 128. A burst of more connections than that at once
/// overflows the queue, and the kernel drops the extras' handshakes, which their clients resend
/// only a second later: measured, at 1,000 clients connecting at once, a second's wait at the
/// 90th percentile for an answer the door gives in microseconds (a 503 past its connection cap).
pub fn deepen_backlog(listener: &std::net::TcpListener, backlog: u16) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: integers only, on a socket we hold.
    if unsafe { libc::listen(listener.as_raw_fd(), libc::c_int::from(backlog)) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Send one byte on `stream` without blocking and without `SIGPIPE`; a full buffer or a closed
/// peer drops it (the callers' peers read every byte they are sent, or are gone).
pub fn send_byte(stream: &std::os::unix::net::UnixStream, byte: u8) {
    use std::os::fd::AsRawFd;
    #[cfg(target_os = "linux")]
    let flags = libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT;
    #[cfg(not(target_os = "linux"))]
    let flags = libc::MSG_DONTWAIT;
    // SAFETY: a one-byte buffer that outlives the call, on a socket the stream owns.
    unsafe { libc::send(stream.as_raw_fd(), (&raw const byte).cast(), 1, flags) };
}

/// Whether a failure to create a socket is for want of descriptors (this process's limit, or
/// the system's): a reason to wait for one to close, not that the door is unreachable.
pub fn is_out_of_descriptors(err: &std::io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// A stream socket of `family`, non-blocking and close-on-exec, set atomically.
#[cfg(not(target_vendor = "apple"))]
fn new_socket(family: libc::c_int) -> std::io::Result<OwnedFd> {
    let kind = libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    // SAFETY: socket(2) takes integers only.
    let fd = unsafe { libc::socket(family, kind, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned to us and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// macOS has no `SOCK_NONBLOCK`/`SOCK_CLOEXEC`: the flags one `fcntl` at a time, the socket
/// owned at once so a failed `fcntl` closes it.
#[cfg(target_vendor = "apple")]
fn new_socket(family: libc::c_int) -> std::io::Result<OwnedFd> {
    use std::os::fd::AsRawFd;
    // SAFETY: socket(2) takes integers only.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned to us and is owned by nobody else.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    super::pipe::add_flag(socket.as_raw_fd(), super::pipe::FD_FLAGS, libc::FD_CLOEXEC)?;
    super::pipe::set_nonblocking(socket.as_raw_fd())?;
    Ok(socket)
}

/// `addr` as the C socket address `connect(2)` takes, and its length.
fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: `sockaddr_storage` is a plain C struct of integers, for which all-zero bytes are a
    // valid (unspecified-family) value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(v4) => {
            // SAFETY: `sockaddr_storage` is larger than and aligned for every socket address,
            // `sockaddr_in` included; the reference lives no longer than `storage`.
            let sin = unsafe { &mut *(&raw mut storage).cast::<libc::sockaddr_in>() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes(v4.ip().octets());
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            // SAFETY: as above, for `sockaddr_in6`.
            let sin6 = unsafe { &mut *(&raw mut storage).cast::<libc::sockaddr_in6>() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v6.port().to_be();
            sin6.sin6_flowinfo = v6.flowinfo();
            sin6.sin6_addr.s6_addr = v6.ip().octets();
            sin6.sin6_scope_id = v6.scope_id();
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    #[cfg(target_vendor = "apple")]
    {
        storage.ss_len = len as u8;
    }
    (storage, len as libc::socklen_t)
}

/// How many descriptors this process holds open now (its standard streams, whatever it
/// inherited, what it opened), from `/proc/self/fd` (`/dev/fd` on macOS); `None` when that
/// cannot be listed.
pub fn open_descriptors() -> Option<usize> {
    let dir = if cfg!(target_vendor = "apple") {
        "/dev/fd"
    } else {
        "/proc/self/fd"
    };
    // Less the one the listing itself holds open.
    Some(std::fs::read_dir(dir).ok()?.count().saturating_sub(1))
}

/// macOS's `OPEN_MAX` (`<sys/syslimits.h>`; the libc crate does not carry it): the most
/// `setrlimit` lets a soft descriptor limit be there.
#[cfg(target_vendor = "apple")]
const OPEN_MAX: u64 = 10240;

/// The soft limit on this process's open descriptors (`RLIMIT_NOFILE`), first raised as far
/// toward `want` as the hard limit lets it (never lowered). On macOS, whose hard limit is
/// usually "unlimited", never above `OPEN_MAX`, which `setrlimit` refuses to exceed. A limit that
/// cannot be read is taken as 256, the smallest soft limit in common use.
///
/// The raised limit is inherited by every child spawned afterwards, so only a caller about to
/// need the descriptors itself should ask for more than it has.
pub fn open_files_limit(want: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a live struct getrlimit(2) fills.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 256;
    }
    let (soft, ceiling): (u64, u64) = (limit.rlim_cur, limit.rlim_max);
    #[cfg(target_vendor = "apple")]
    let ceiling = ceiling.min(OPEN_MAX);
    let target = want.min(ceiling);
    if target <= soft {
        return soft;
    }
    limit.rlim_cur = target;
    // SAFETY: `limit` is a live, initialised struct; a soft limit at most the hard one is
    // ours to set.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        return soft;
    }
    target
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_deepened_backlog_holds_a_burst_beyond_stds_128() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        deepen_backlog(&listener, 1024).unwrap();
        let addr = listener.local_addr().unwrap();
        // Nothing is accepted: past a full queue, a connection's handshake is dropped and its
        // connect times out.
        let held: Vec<TcpStream> = (0..300)
            .map(|n| {
                TcpStream::connect_timeout(&addr, Duration::from_secs(3))
                    .unwrap_or_else(|err| panic!("connection {n}: {err}"))
            })
            .collect();
        assert_eq!(held.len(), 300);
    }
}
