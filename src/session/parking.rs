//! The one way a thread that is not a door worker waits for something a poll reports
//! (`Settled::poll`, `Feed::poll_next`, `Watch::poll_frame`): a [`Waker`] that unparks it.
//!
//! Blocking waits are built on the polls with this waker, never on a second mechanism, so a
//! poll's promise — it stores the waker and fires it whenever polling again could differ — is
//! the only one there is to keep. A park may end early (a spurious or stale unpark): every
//! caller polls again in a loop, so that costs a poll, never a missed event.

use std::sync::Arc;
use std::task::{Poll, Wake, Waker};
use std::thread::Thread;

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker that unparks the calling thread.
pub fn waker() -> Waker {
    Waker::from(Arc::new(Unpark(std::thread::current())))
}

/// What `poll` gives once it is ready, this thread parked between polls.
pub fn block_on<T>(mut poll: impl FnMut(&Waker) -> Poll<T>) -> T {
    let waker = waker();
    loop {
        match poll(&waker) {
            Poll::Ready(ready) => return ready,
            Poll::Pending => std::thread::park(),
        }
    }
}
