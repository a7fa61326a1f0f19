//! The ps bench's fake doors: thousands of listeners on 127.0.0.1, served by a few threads on
//! `epoll`, so 10,000 doors cost a few threads rather than 10,000 (the machine has two cores, and
//! the doors share them with the `mur ps` being measured).
//!
//! Each door answers `GET /.well-known/agent-card.json` (any request, in fact: the head is read,
//! not parsed) with a card naming its session, then closes. What it does is its [`Mode`], which
//! may be changed between runs: answer at once or a millisecond later, accept and never answer
//! (holding the connection until the client closes it), or trickle the answer a byte a second.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::common::fail;

/// What a door does with a connection once its request head has arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    /// Write the card and close.
    Answer = 0,
    /// Write nothing; hold the connection until the client closes it.
    Silent = 1,
    /// Write the card one byte a second.
    Trickle = 2,
    /// Write the card [`DELAY`] after the request, as a busy capsule's door might.
    Delayed = 3,
}

/// How long a [`Mode::Delayed`] door takes to answer.
pub const DELAY: Duration = Duration::from_millis(1);

/// Every door, and the threads serving them.
pub struct Doors {
    pub addrs: Vec<SocketAddr>,
    modes: Arc<Vec<AtomicU8>>,
}

/// `epoll` data of a listener: this bit, and its index among its thread's listeners. A
/// connection's data is its descriptor.
const LISTENER: u64 = 1 << 63;
/// How often trickling connections get their next byte.
const TRICKLE_EVERY: Duration = Duration::from_secs(1);

impl Doors {
    /// One door per session id, all answering, served by `threads` threads.
    pub fn open(sessions: &[String], threads: usize) -> Self {
        let listeners: Vec<TcpListener> = sessions
            .iter()
            .map(|_| {
                let listener = TcpListener::bind("127.0.0.1:0")
                    .unwrap_or_else(|err| fail(&format!("cannot bind a door: {err}")));
                listener
                    .set_nonblocking(true)
                    .unwrap_or_else(|err| fail(&format!("door: {err}")));
                listener
            })
            .collect();
        let addrs = listeners
            .iter()
            .map(|l| {
                l.local_addr()
                    .unwrap_or_else(|err| fail(&format!("door: {err}")))
            })
            .collect();
        let modes: Arc<Vec<AtomicU8>> = Arc::new(
            sessions
                .iter()
                .map(|_| AtomicU8::new(Mode::Answer as u8))
                .collect(),
        );
        let responses: Arc<Vec<Vec<u8>>> =
            Arc::new(sessions.iter().map(|s| card_response(s)).collect());
        let mut shares: Vec<Vec<(usize, TcpListener)>> = (0..threads).map(|_| Vec::new()).collect();
        for (i, listener) in listeners.into_iter().enumerate() {
            shares[i % threads].push((i, listener));
        }
        for share in shares {
            let (modes, responses) = (Arc::clone(&modes), Arc::clone(&responses));
            thread::Builder::new()
                .name("doors".into())
                .spawn(move || Server::new(share, modes, responses).run())
                .unwrap_or_else(|err| fail(&format!("cannot start a door thread: {err}")));
        }
        Self { addrs, modes }
    }

    pub fn set(&self, door: usize, mode: Mode) {
        self.modes[door].store(mode as u8, Ordering::SeqCst);
    }

    pub fn set_all(&self, mode: Mode) {
        for i in 0..self.addrs.len() {
            self.set(i, mode);
        }
    }
}

/// The whole HTTP response one door gives: its agent card.
fn card_response(session: &str) -> Vec<u8> {
    let card = serde_json::json!({
        "name": "bench",
        "version": "0.1.0",
        "capabilities": {"extensions": [{"uri": super::CARD_URI, "params": {"sessionId": session}}]},
    })
    .to_string();
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{card}",
        card.len()
    )
    .into_bytes()
}

/// One accepted connection.
struct Conn {
    stream: TcpStream,
    door: usize,
    head: Vec<u8>,
    /// Once the head is in: silent, or trickling with this many bytes written.
    held: Option<Held>,
}

enum Held {
    Silent,
    Trickle(usize),
    /// Answered at this instant.
    Due(Instant),
}

/// One serving thread: its share of the listeners, and their connections.
struct Server {
    waiter: Waiter,
    listeners: Vec<(usize, TcpListener)>,
    conns: HashMap<RawFd, Conn>,
    modes: Arc<Vec<AtomicU8>>,
    responses: Arc<Vec<Vec<u8>>>,
}

impl Server {
    fn new(
        listeners: Vec<(usize, TcpListener)>,
        modes: Arc<Vec<AtomicU8>>,
        responses: Arc<Vec<Vec<u8>>>,
    ) -> Self {
        let mut server = Self {
            waiter: Waiter::new(),
            listeners,
            conns: HashMap::new(),
            modes,
            responses,
        };
        for k in 0..server.listeners.len() {
            let fd = server.listeners[k].1.as_raw_fd();
            server.waiter.add(fd, LISTENER | k as u64);
        }
        server
    }

    fn run(mut self) {
        let mut ready = Vec::new();
        let mut next_trickle = Instant::now() + TRICKLE_EVERY;
        loop {
            let due = self.answer_due();
            let wake = due.map_or(next_trickle, |due| due.min(next_trickle));
            self.waiter
                .wait(wake.saturating_duration_since(Instant::now()), &mut ready);
            for &data in &ready {
                if data & LISTENER != 0 {
                    self.accept((data & !LISTENER) as usize);
                } else {
                    self.read(data as RawFd);
                }
            }
            if Instant::now() >= next_trickle {
                self.trickle();
                next_trickle += TRICKLE_EVERY;
            }
        }
    }

    /// Accept every connection waiting on the `k`-th listener.
    fn accept(&mut self, k: usize) {
        let (door, listener) = &self.listeners[k];
        let door = *door;
        let mut accepted = Vec::new();
        // EMFILE and the like end the round too; the listener stays readable for the next.
        while let Ok((stream, _)) = listener.accept() {
            accepted.push(stream);
        }
        for stream in accepted {
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let fd = stream.as_raw_fd();
            self.waiter.add(fd, fd as u64);
            self.conns.insert(
                fd,
                Conn {
                    stream,
                    door,
                    head: Vec::new(),
                    held: None,
                },
            );
        }
    }

    /// Read what connection `fd` sent; answer, hold or start trickling once its head is in;
    /// close it (which also stops watching it) at EOF.
    fn read(&mut self, fd: RawFd) {
        let Some(conn) = self.conns.get_mut(&fd) else {
            return;
        };
        let mut buf = [0u8; 4096];
        let closed = loop {
            match conn.stream.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) if conn.held.is_none() => conn.head.extend_from_slice(&buf[..n]),
                Ok(_) => {}
                Err(err) if err.kind() == ErrorKind::WouldBlock => break false,
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(_) => break true,
            }
        };
        if closed {
            self.close(fd);
            return;
        }
        if conn.held.is_some() || !conn.head.windows(4).any(|w| w == b"\r\n\r\n") {
            return;
        }
        match self.modes[conn.door].load(Ordering::SeqCst) {
            m if m == Mode::Silent as u8 => conn.held = Some(Held::Silent),
            m if m == Mode::Trickle as u8 => conn.held = Some(Held::Trickle(0)),
            m if m == Mode::Delayed as u8 => conn.held = Some(Held::Due(Instant::now() + DELAY)),
            _ => self.answer(fd),
        }
    }

    /// Write connection `fd`'s card and close it. A card is a few hundred bytes: it fits an
    /// empty socket buffer; closing (the request read whole) ends it with a FIN.
    fn answer(&mut self, fd: RawFd) {
        if let Some(conn) = self.conns.get_mut(&fd) {
            let _ = conn.stream.write_all(&self.responses[conn.door]);
        }
        self.close(fd);
    }

    /// Answer every delayed connection whose time has come; when the next one is due.
    fn answer_due(&mut self) -> Option<Instant> {
        let now = Instant::now();
        let mut next = None;
        let mut due = Vec::new();
        for (&fd, conn) in &self.conns {
            match conn.held {
                Some(Held::Due(at)) if at <= now => due.push(fd),
                Some(Held::Due(at)) => next = Some(next.map_or(at, |n: Instant| n.min(at))),
                _ => {}
            }
        }
        for fd in due {
            self.answer(fd);
        }
        next
    }

    /// Stop watching connection `fd`, and close it.
    fn close(&mut self, fd: RawFd) {
        self.waiter.remove(fd);
        self.conns.remove(&fd);
    }

    /// The next byte to every trickling connection.
    fn trickle(&mut self) {
        for conn in self.conns.values_mut() {
            if let Some(Held::Trickle(sent)) = &mut conn.held {
                let response = &self.responses[conn.door];
                if *sent < response.len() && conn.stream.write(&response[*sent..=*sent]).is_ok() {
                    *sent += 1;
                }
            }
        }
    }
}

/// Waiting on many descriptors at once, each told by a `u64` of the caller's: `epoll` on Linux.
#[cfg(target_os = "linux")]
struct Waiter {
    epoll: RawFd,
    events: Vec<libc::epoll_event>,
}

#[cfg(target_os = "linux")]
impl Waiter {
    fn new() -> Self {
        // SAFETY: epoll_create1 takes a flag; the descriptor it returns is this waiter's.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll < 0 {
            fail(&format!(
                "epoll_create1: {}",
                std::io::Error::last_os_error()
            ));
        }
        Self {
            epoll,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 1024],
        }
    }

    /// Wait for `fd` to be readable, telling it by `data`.
    fn add(&mut self, fd: RawFd, data: u64) {
        let mut event = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: data,
        };
        // SAFETY: `event` is live for the call; both descriptors are open.
        if unsafe { libc::epoll_ctl(self.epoll, libc::EPOLL_CTL_ADD, fd, &mut event) } != 0 {
            fail(&format!("epoll_ctl: {}", std::io::Error::last_os_error()));
        }
    }

    /// Nothing to do: closing a descriptor takes it out of the epoll set.
    fn remove(&mut self, _fd: RawFd) {}

    /// Wait at most `timeout` (and a millisecond); the data of what is ready into `ready`.
    fn wait(&mut self, timeout: Duration, ready: &mut Vec<u64>) {
        let millis = i32::try_from(timeout.as_millis() + 1).unwrap_or(i32::MAX);
        let len = i32::try_from(self.events.len()).unwrap_or(i32::MAX);
        // SAFETY: `events` is a live array of `len` entries.
        let n = unsafe { libc::epoll_wait(self.epoll, self.events.as_mut_ptr(), len, millis) };
        ready.clear();
        ready.extend(
            self.events[..usize::try_from(n).unwrap_or(0)]
                .iter()
                .map(|e| e.u64),
        );
    }
}

/// Elsewhere (the bench is compile-checked for macOS, not run there): `poll(2)` over every
/// descriptor, each wait.
#[cfg(not(target_os = "linux"))]
#[derive(Default)]
struct Waiter {
    watched: Vec<(RawFd, u64)>,
    poller: mur::sys::poll::Poller,
}

#[cfg(not(target_os = "linux"))]
impl Waiter {
    fn new() -> Self {
        Self::default()
    }

    fn add(&mut self, fd: RawFd, data: u64) {
        self.watched.push((fd, data));
    }

    fn remove(&mut self, fd: RawFd) {
        self.watched.retain(|&(watched, _)| watched != fd);
    }

    fn wait(&mut self, timeout: Duration, ready: &mut Vec<u64>) {
        self.poller.clear();
        for &(fd, _) in &self.watched {
            self.poller.push(fd, mur::sys::poll::Want::Read);
        }
        ready.clear();
        if self.poller.wait(timeout).is_ok() {
            ready.extend(
                (0..self.watched.len())
                    .filter(|&i| self.poller.ready(i))
                    .map(|i| self.watched[i].1),
            );
        }
    }
}
