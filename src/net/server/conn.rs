//! One connection's requests, served on a worker of the door's pool: read, answer, write, until
//! it closes, errs, asks to close — or, between requests, is parked ([`super::park`]) and its
//! worker goes back to the pool.

use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use super::super::conns::Doing;
use super::super::pool::Pool;
use super::park::Parked;
use super::read::read_request;
use super::write::{linger, write_response};
use super::{Conn, Handler, LINGER_TIME, Stopper};

/// How long a worker waits for a connection's next request before parking it, when no other
/// connection waits for a worker.
const NEXT_REQUEST: std::time::Duration = std::time::Duration::from_millis(2);

/// What every worker of one door shares.
pub(super) struct Server {
    pub(super) handler: Arc<dyn Handler>,
    pub(super) stop: Arc<Stopper>,
    pub(super) pool: Arc<Pool>,
    /// Where idle connections wait; `None` where epoll is not to be had (then a connection
    /// keeps its worker between requests).
    pub(super) parked: Option<Parked>,
    /// Requests being answered: counted from before the handler runs until the answer is
    /// written, so a stop the handler itself caused waits for it.
    pub(super) answering: AtomicUsize,
}

impl Server {
    /// Serve `conn` on a worker; `Err` gives it back when no worker can run it.
    pub(super) fn dispatch(self: &Arc<Self>, conn: Conn) -> Result<(), Arc<TcpStream>> {
        let stream = conn.stream.clone();
        let server = self.clone();
        self.pool
            .submit(Box::new(move || server.serve(conn)))
            .map_err(|_| stream)
    }

    /// Serve requests on `conn` until it closes, errs, asks to close or the door stops; park it
    /// when it is idle between requests.
    fn serve(&self, mut conn: Conn) {
        loop {
            let (stream, place) = (&*conn.stream, &conn.place);
            let request =
                match read_request(stream, &mut conn.buf, conn.peer, place, &*self.handler) {
                    Ok(Some(request)) => request,
                    Ok(None) => return,
                    Err(mut refusal) => {
                        place.doing(Doing::Lingering);
                        if write_response(stream, &mut refusal, false).is_ok() {
                            linger(stream, Instant::now() + LINGER_TIME);
                        }
                        return;
                    }
                };
            place.doing(Doing::Answering);
            self.answering.fetch_add(1, Ordering::AcqRel);
            let request_keep_alive = request.keep_alive;
            let mut response = self.handler.handle(request);
            let keep_alive =
                request_keep_alive && !self.stop.is_stopped() && response.stream.is_none();
            let written = write_response(stream, &mut response, keep_alive);
            drop(response);
            self.answering.fetch_sub(1, Ordering::AcqRel);
            if written.is_err() || !keep_alive {
                return;
            }
            place.doing(Doing::Idle);
            // A pipelined request already read is served at once; so is one that arrives
            // within `NEXT_REQUEST` while no other connection waits for a worker (a client
            // sending request after request keeps its worker, without two hand-offs each).
            // Otherwise the connection waits parked, without this worker.
            let Some(parked) = &self.parked else {
                continue;
            };
            let next_soon = || {
                !self.pool.backlogged()
                    && crate::sys::poll::poll_readable(stream, NEXT_REQUEST).unwrap_or(false)
            };
            if conn.buf.is_empty() && !next_soon() {
                parked.park(conn);
                return;
            }
        }
    }
}
