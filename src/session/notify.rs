//! The service manager's notifications (`sd_notify(3)`'s protocol, spoken without libsystemd):
//! `READY=1` once the door listens, `STATUS=` whenever what the session is doing changes (what
//! `systemctl status` shows under the unit), `STOPPING=1` when it begins to wind down.
//!
//! Only where the manager asks: `NOTIFY_SOCKET` names a datagram socket, a path or (`@…`) an
//! abstract name. Every send is best effort and never waits: a manager that went away must not
//! hold a session up. Handlers never see the variable (`session/handler.rs` keeps it out).

use std::os::unix::net::UnixDatagram;

/// The manager's socket, when one was named; and the last status sent, sent again only changed.
pub struct Notifier {
    socket: UnixDatagram,
    to: std::os::unix::net::SocketAddr,
    status: String,
}

impl Notifier {
    /// The socket `NOTIFY_SOCKET` names, if it names one this process can address.
    pub fn from_env() -> Option<Self> {
        let named = std::env::var_os("NOTIFY_SOCKET")?;
        let to = address(&named)?;
        let socket = UnixDatagram::unbound().ok()?;
        socket.set_nonblocking(true).ok()?;
        Some(Self {
            socket,
            to,
            status: String::new(),
        })
    }

    pub fn ready(&self) {
        self.send("READY=1");
    }

    pub fn stopping(&mut self) {
        self.send("STOPPING=1\nSTATUS=stopping: ending its tasks");
    }

    /// `STATUS=` with `status`, unless that is what was sent last.
    pub fn status(&mut self, status: String) {
        if status != self.status {
            self.send(&format!("STATUS={status}"));
            self.status = status;
        }
    }

    fn send(&self, message: &str) {
        let _ = self.socket.send_to_addr(message.as_bytes(), &self.to);
    }
}

/// `NOTIFY_SOCKET`'s address: a path, or an abstract name after `@` (Linux).
fn address(named: &std::ffi::OsStr) -> Option<std::os::unix::net::SocketAddr> {
    use std::os::unix::ffi::OsStrExt;
    match named.as_bytes() {
        [] => None,
        #[cfg(target_os = "linux")]
        [b'@', name @ ..] => {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name).ok()
        }
        _ => std::os::unix::net::SocketAddr::from_pathname(named).ok(),
    }
}
