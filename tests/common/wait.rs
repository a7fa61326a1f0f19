//! Polling against a deadline: nothing in the tests sleeps blindly.

use std::thread;
use std::time::{Duration, Instant};

/// The default deadline for anything the `mur run` tests wait on.
pub const WAIT: Duration = Duration::from_secs(15);

/// How often [`wait_until`] and [`wait_for`] look again.
const POLL: Duration = Duration::from_millis(10);

/// Poll `condition` until it holds; panic naming `what` after `within`.
#[track_caller]
pub fn wait_until(within: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    wait_for(within, what, || condition().then_some(()))
}

/// Poll `probe` until it yields `Some`; panic naming `what` after `within`.
#[track_caller]
pub fn wait_for<T>(within: Duration, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        thread::sleep(POLL);
    }
}
