//! The door's workers: a fixed few, each waiting on the one readiness set itself
//! (leader/followers), with no dispatcher between the kernel and the worker that serves.
//!
//! - **Connections** are registered once, edge-triggered (`EPOLLET`), and owned per connection:
//!   a report goes to one waiting worker, which *claims* the connection ([`Slab::claim`]) and
//!   serves it as far as it goes without waiting — reads, answers, writes, a pipelined request
//!   already read — then gives it back. A report that comes while another worker holds it
//!   marks it woken, and that worker serves it once more before giving it back, so exactly one
//!   worker serves a connection at a time and no report is lost. Why edge-triggered rather than
//!   `EPOLLONESHOT`: one-shot needs an `epoll_ctl` to re-arm after every request (measured: 3.4
//!   system calls per answered card GET at 8 busy keep-alive connections; 2.4 edge-triggered,
//!   recv, send and a share of an `epoll_wait`), and the claim already gives the one-owner
//!   guarantee one-shot would. The price is the edge discipline, kept in one place
//!   ([`super::conn`]): a connection counts on a next report only after reading until the
//!   socket is empty, and remembers across turns that it may have unread bytes.
//! - **The listener** is armed once (`EPOLLONESHOT`), not `EPOLLEXCLUSIVE`: exclusivity only
//!   helps across *several* sets, and a level-triggered listener on a set shared by every worker
//!   is reported to each waiter that looks while a connection is pending. Armed once, one worker
//!   takes it, accepts until `EAGAIN` (at most [`ACCEPT_BATCH`]) and re-arms it — so accepting
//!   never waits for a thread, and never wakes more than one.
//! - **The stop pipe** is level-triggered: once written, every worker sees it and leaves.
//! - **Timers** (request deadlines, idle closes, lingering closes, the [`STREAM_TICK`] re-poll of
//!   pending streams and answers) are a sweep of the slab every [`SWEEP_EVERY`], run by whichever
//!   worker finds it due — the one holding the timer role waits with a timeout for it; the others
//!   wait without one. No thread sleeps for a timer.
//! - **Wakers**: a deferred answer or a stream that said `Pending` holds the connection's
//!   [`Waker`]; firing it re-arms the connection, which reports it at once (it has room to
//!   write), so one worker comes back to poll it ([`Slab::wake`]). The engine fires wakers after
//!   releasing its own lock. A thread that has just produced an answer may serve its
//!   connection itself instead ([`wake_here`]): claimed like any other, so still one server
//!   at a time.
//!
//! Threads: [`workers_wanted`] in all, started by [`start`] before it returns. None is ever started
//! for a client, and none waits anywhere but in `epoll_wait` or on work.

use std::cell::Cell;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use super::conn::{Conn, Ctx};
use super::slab::{Claim, Doing, LISTENER, REFUSALS, STOPPED, Slab, Then};
use super::{Handler, MAX_CONNECTIONS, REQUEST_DEADLINE, STREAM_TICK, Stopper};
use crate::sys::epoll::{BATCH, Event, Poller, Watch};

/// A worker's reserved stack, of which serving a request touches a few pages.
const WORKER_STACK: usize = 256 * 1024;
/// How often the slab is swept for what fell due.
const SWEEP_EVERY: Duration = Duration::from_millis(250);
/// The most connections one worker accepts before re-arming the listener for another.
const ACCEPT_BATCH: usize = 64;
/// How long a stopped door waits for the answers already in hand (`session/stop`'s own among
/// them) to be written before [`serve`] returns and the process may exit.
const ANSWER_GRACE: Duration = Duration::from_secs(2);

const ONCE_READ: Watch = Watch::Once {
    read: true,
    write: false,
};

/// How many workers: two per core, at least four (a handler's CPU work on one does not hold the
/// door), at most eight.
pub(super) fn workers_wanted() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (2 * cores).clamp(4, 8)
}

/// What every worker of one door shares.
struct Server {
    handler: Arc<dyn Handler>,
    stop: Arc<Stopper>,
    listener: TcpListener,
    poller: Poller,
    slab: Slab,
    answering: Arc<AtomicUsize>,
    /// Whether a worker waits with a timeout for the next sweep.
    timer: AtomicBool,
    /// When the next sweep is due; locked by the one worker sweeping.
    sweep: Mutex<Instant>,
    /// The listener is not armed (accepting failed for want of descriptors): the next sweep
    /// arms it again.
    accept_paused: AtomicBool,
    me: Weak<Server>,
}

/// A door being served: its workers, joined by [`Serving::join`].
pub struct Serving {
    server: Arc<Server>,
    workers: Vec<std::thread::JoinHandle<()>>,
}

/// Start serving connections on `listener` until `stop` says so: every worker is started before
/// this returns (the door's threads are there, and counted, before anything else of the session
/// starts), fewer if the kernel gives fewer threads; `Err` if not one could be started, or
/// there is no readiness set to wait on.
pub fn start(
    listener: TcpListener,
    handler: Arc<dyn Handler>,
    stop: Arc<Stopper>,
) -> Result<Serving, String> {
    // Room for every connection, and for what a session opens besides (best effort: with less,
    // an accept fails with EMFILE and is tried again at the next sweep).
    crate::sys::socket::open_files_limit((MAX_CONNECTIONS + REFUSALS) as u64 + 256);
    let poller = listener
        .set_nonblocking(true)
        .and_then(|()| Poller::new())
        .map_err(|err| format!("cannot wait on the door's connections: {err}"))?;
    let server = Arc::new_cyclic(|me| Server {
        handler,
        stop,
        listener,
        poller,
        slab: Slab::new(MAX_CONNECTIONS),
        answering: Arc::default(),
        timer: AtomicBool::new(false),
        sweep: Mutex::new(Instant::now() + SWEEP_EVERY),
        accept_paused: AtomicBool::new(false),
        me: me.clone(),
    });
    (server.poller)
        .add(server.listener.as_raw_fd(), LISTENER, ONCE_READ)
        .and_then(|()| {
            let stopped = server.stop.read.as_raw_fd();
            server.poller.add(stopped, STOPPED, Watch::Always)
        })
        .map_err(|err| format!("cannot wait on the door's connections: {err}"))?;
    let mut workers = Vec::new();
    let mut refused = None;
    for n in 0..workers_wanted() {
        let name = match n {
            0 => "door".to_string(),
            n => format!("door-{n}"),
        };
        let worker = server.clone();
        match std::thread::Builder::new()
            .name(name)
            .stack_size(WORKER_STACK)
            .spawn(move || worker.work())
        {
            Ok(handle) => workers.push(handle),
            Err(err) => {
                refused = Some(err);
                break;
            }
        }
    }
    match (workers.is_empty(), refused) {
        (true, Some(err)) => Err(format!("cannot start the door: {err}")),
        _ => Ok(Serving { server, workers }),
    }
}

impl Serving {
    /// Wait until the door has stopped, then finish on this thread the answers in hand (for at
    /// most 2 s, `ANSWER_GRACE`) and close the connections left.
    pub fn join(self) {
        for worker in self.workers {
            let _ = worker.join();
        }
        self.server.wind_down();
    }
}

impl Server {
    /// A worker's life: wait on the set, serve what it hands out, sweep when due; until stopped.
    fn work(&self) {
        let mut events = Vec::with_capacity(BATCH);
        loop {
            let timer = self
                .timer
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
            let timeout = timer.then(|| self.until_sweep());
            let waited = self.poller.wait(&mut events, timeout);
            if timer {
                self.timer.store(false, Ordering::Release);
            }
            if waited.is_err() {
                // Nothing to wait on that works: look again at the next sweep, not spinning.
                std::thread::sleep(SWEEP_EVERY);
            }
            let mut stopped = false;
            for event in &events {
                match event.key {
                    LISTENER => self.accept(),
                    STOPPED => stopped = true,
                    key => {
                        if let Some(claim) = self.slab.claim(key, event) {
                            self.serve_claimed(claim, *event);
                        }
                    }
                }
            }
            if stopped {
                return;
            }
            self.sweep_if_due();
        }
    }

    fn until_sweep(&self) -> Duration {
        let due = *self.sweep.lock().unwrap_or_else(|p| p.into_inner());
        due.saturating_duration_since(Instant::now())
    }

    fn ctx(&self, answer_only: bool) -> Ctx<'_> {
        Ctx {
            handler: &*self.handler,
            stopped: self.stop.is_stopped(),
            answering: &self.answering,
            answer_only,
        }
    }

    /// Serve a claimed connection until it waits, once more each time it was woken meanwhile.
    fn serve_claimed(&self, mut claim: Claim<'_>, event: Event) {
        let ctx = self.ctx(false);
        let mut event = event;
        loop {
            let then = claim.conn().drive(&event, &ctx);
            match self.slab.release(&mut claim, then, &self.poller) {
                // Reported while served: once more, after what was reported.
                Some(missed) => event = missed,
                None => return,
            }
        }
    }

    /// Write a claimed connection's waiting answer, for a thread that is not a worker
    /// ([`wake_here`]): anything else — the client's next request, often sent the moment it had
    /// its answer, a stream's pieces, what was reported meanwhile — is left to a worker
    /// (re-armed, so the readiness set reports it again), and that thread goes back to its own
    /// work. Whether it was left so (a worker will be woken for it).
    fn serve_once(&self, mut claim: Claim<'_>, event: Event) -> bool {
        let mut then = claim.conn().drive(&event, &self.ctx(true));
        let mut handed = matches!(then, Then::Again);
        while self.slab.release(&mut claim, then, &self.poller).is_some() {
            (then, handed) = (Then::Again, true);
        }
        handed
    }

    /// Take the connections waiting on the listener, then arm it again.
    fn accept(&self) {
        for _ in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok((stream, peer)) => self.admit(stream, peer),
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => {
                    // EMFILE and friends: a listener we cannot drain would fire again at once.
                    self.accept_paused.store(true, Ordering::Release);
                    return;
                }
            }
        }
        let fd = self.listener.as_raw_fd();
        if self.poller.rearm(fd, LISTENER, ONCE_READ).is_err() {
            self.accept_paused.store(true, Ordering::Release);
        }
    }

    /// One new connection: into the slab (the idle longest giving way at the bound), or
    /// refused 503 in one of the refusals' entries, or — past those — closed.
    fn admit(&self, stream: TcpStream, peer: SocketAddr) {
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        let _ = stream.set_nodelay(true);
        let fd = stream.as_raw_fd();
        if self.slab.open() >= MAX_CONNECTIONS {
            self.make_room();
        }
        let conn = Box::new(Conn::new(stream, peer));
        let conn = match self.slab.insert(conn, fd, false) {
            Ok(mut claim) => {
                let waker = self.waker(claim.key);
                claim.conn().set_waker(waker);
                // Added edge-watched: reported at once (it has room to write), and served
                // then — by whichever worker, its request likely there by that time.
                let idle = Then::Arm {
                    doing: Doing::Idle,
                    due: Some(Instant::now() + REQUEST_DEADLINE),
                };
                if let Some(missed) = self.slab.release(&mut claim, idle, &self.poller) {
                    self.serve_claimed(claim, missed);
                }
                return;
            }
            Err(conn) => Box::new(conn.into_refused()),
        };
        if let Ok(claim) = self.slab.insert(conn, fd, true) {
            self.serve_claimed(claim, Event::default());
        }
    }

    /// Close the connection that gives way for a newcomer, if one may. One that looked idle but
    /// whose request has arrived unseen is served instead, and the next one looked for.
    fn make_room(&self) {
        for _ in 0..4 {
            let Some(mut victim) = self.slab.claim_victim() else {
                return;
            };
            if !victim.conn().has_unread_request() {
                self.slab.release(&mut victim, Then::Close, &self.poller);
                return;
            }
            let arrived = Event {
                key: victim.key,
                readable: true,
                ..Event::default()
            };
            self.serve_claimed(victim, arrived);
        }
    }

    fn waker(&self, key: u64) -> Waker {
        Waker::from(Arc::new(ConnWaker {
            key,
            server: self.me.clone(),
        }))
    }

    /// Serve what fell due (deadlines, stream ticks) and arm a paused listener, if the sweep is
    /// due and no other worker is at it.
    fn sweep_if_due(&self) {
        let now = Instant::now();
        let Ok(mut due) = self.sweep.try_lock() else {
            return;
        };
        if now < *due {
            return;
        }
        *due = now + SWEEP_EVERY;
        drop(due);
        self.slab.claim_due(now, &mut |claim| {
            self.serve_claimed(claim, Event::default())
        });
        if self.accept_paused.swap(false, Ordering::AcqRel) {
            let fd = self.listener.as_raw_fd();
            if self.poller.rearm(fd, LISTENER, ONCE_READ).is_err() {
                self.accept_paused.store(true, Ordering::Release);
            }
        }
    }

    /// The door has stopped and every other worker has left: finish the answers in hand (for at
    /// most [`ANSWER_GRACE`]) on this thread, then close every connection.
    fn wind_down(&self) {
        self.poller.remove(self.listener.as_raw_fd());
        self.poller.remove(self.stop.read.as_raw_fd());
        let give_up = Instant::now() + ANSWER_GRACE;
        let mut events = Vec::with_capacity(BATCH);
        while self.answering.load(Ordering::Acquire) > 0 && Instant::now() < give_up {
            let _ = self.poller.wait(&mut events, Some(STREAM_TICK / 20));
            for event in &events {
                if let Some(claim) = self.slab.claim(event.key, event) {
                    self.serve_claimed(claim, *event);
                }
            }
            self.slab.claim_due(Instant::now(), &mut |claim| {
                self.serve_claimed(claim, Event::default());
            });
        }
        self.slab.claim_all(&mut |mut claim| {
            self.slab.release(&mut claim, Then::Close, &self.poller);
        });
    }
}

/// A connection's waker: fired by whatever its deferred answer or stream waits on.
struct ConnWaker {
    key: u64,
    server: Weak<Server>,
}

thread_local! {
    /// Whether this thread is in [`wake_here`], and how many connections it served there.
    static HERE: Cell<Option<usize>> = const { Cell::new(None) };
}

impl Wake for ConnWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let Some(server) = self.server.upgrade() else {
            return;
        };
        let here = HERE.get();
        let Some(claim) = server.slab.wake(self.key, &server.poller, here.is_some()) else {
            return;
        };
        // Not again inside: a wake the serving causes goes to a worker, as anywhere else.
        HERE.set(None);
        let writable = Event {
            key: self.key,
            writable: true,
            ..Event::default()
        };
        let handed = server.serve_once(claim, writable);
        HERE.set(here.map(|served| served + usize::from(!handed)));
    }
}

/// Fire `wakes` on this thread, and serve here each connection they wake that no worker holds:
/// the answer a thread has just produced written by that thread, not handed to a door worker —
/// a wake-up of another thread and a wait for it, on a task's way to its client
/// (docs/benchmarks.md). A connection a worker holds is marked for it, as by any wake. Only
/// for a thread holding no lock: polling an answer takes the engine's. Returns how many wakes
/// were left to a worker or another waiter.
pub fn wake_here(wakes: Vec<Waker>) -> usize {
    let count = wakes.len();
    let outer = HERE.replace(Some(0));
    wakes.into_iter().for_each(Waker::wake);
    let served = HERE.replace(outer).unwrap_or(0);
    count - served
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::server::{Deferred, Request, Response};
    use std::io::{Read, Write};
    use std::sync::mpsc;
    use std::task::Poll;
    use std::thread::ThreadId;

    /// Answers `/now` at once, and any other path later: ready only when polled on the thread
    /// `on` (so no worker can answer it), its waker sent out at its first poll. An answer names
    /// the thread that polled it ready.
    struct Later {
        wakers: Mutex<mpsc::Sender<Waker>>,
        on: ThreadId,
    }

    struct Answer {
        on: Option<ThreadId>,
        sent: Option<mpsc::Sender<Waker>>,
    }

    impl Deferred for Answer {
        fn poll(&mut self, waker: &Waker) -> Poll<Response> {
            let here = std::thread::current().id();
            if self.on.is_none_or(|on| on == here) {
                return Poll::Ready(Response::text(200, &format!("{here:?}")));
            }
            if let Some(sent) = self.sent.take() {
                sent.send(waker.clone()).unwrap();
            }
            Poll::Pending
        }
    }

    impl Handler for Later {
        fn handle(&self, request: Request) -> Response {
            let sent = self.wakers.lock().unwrap().clone();
            Response::deferred(Box::new(Answer {
                on: (request.path != "/now").then_some(self.on),
                sent: Some(sent),
            }))
        }
    }

    /// Fire `waker` here until `client` has an answer to read: a first wake may come while the
    /// worker that registered it still holds the connection (it is then marked for that
    /// worker, which polls again, on its own thread: not ready). What the last wake returned.
    fn wake_until_answered(client: &TcpStream, waker: &Waker) -> usize {
        let mut byte = [0u8];
        for _ in 0..1000 {
            let left = wake_here(vec![waker.clone()]);
            client.set_nonblocking(true).unwrap();
            let answered = client.peek(&mut byte).is_ok();
            client.set_nonblocking(false).unwrap();
            if answered {
                return left;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("no answer");
    }

    /// The threads that answered, in order, once the connection has closed.
    fn answered_by(client: &mut TcpStream) -> Vec<String> {
        let mut answers = String::new();
        client.read_to_string(&mut answers).unwrap();
        let by = answers.lines().filter(|l| l.starts_with("ThreadId"));
        by.map(str::to_string).collect()
    }

    #[test]
    fn a_waker_fired_by_wake_here_is_answered_on_the_waking_thread_and_no_more() {
        let (tx, wakers) = mpsc::channel();
        let me = std::thread::current().id();
        let handler = Arc::new(Later {
            wakers: Mutex::new(tx),
            on: me,
        });
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Stopper::new().unwrap();
        let serving = start(listener, handler, stop.clone()).unwrap();
        let connect = |requests: &[u8]| {
            let mut client = TcpStream::connect(addr).unwrap();
            let wait = Some(Duration::from_secs(10));
            client.set_read_timeout(wait).unwrap();
            client.write_all(requests).unwrap();
            client
        };
        let me = format!("{me:?}");

        let mut client = connect(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let waker = wakers.recv_timeout(Duration::from_secs(10)).unwrap();
        let left = wake_until_answered(&client, &waker);
        assert_eq!(left, 0, "served here: nothing left");
        assert_eq!(answered_by(&mut client), std::slice::from_ref(&me));

        // A request the client pipelined behind the answer is a worker's, not this thread's.
        let mut client = connect(
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /now HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        let waker = wakers.recv_timeout(Duration::from_secs(10)).unwrap();
        let left = wake_until_answered(&client, &waker);
        assert_eq!(left, 1, "the next request left to a worker");
        let by = answered_by(&mut client);
        assert_eq!(by.len(), 2, "{by:?}");
        assert_eq!(by[0], me, "{by:?}");
        assert_ne!(by[1], me, "{by:?}");

        // A waker that is not a connection's is left to whatever it wakes.
        assert_eq!(wake_here(vec![Waker::noop().clone()]), 1);
        stop.stop();
        serving.join();
    }
}
