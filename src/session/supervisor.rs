//! Supervision of a session's handlers: each started under a subreaper of its own
//! ([`crate::sys::spawn::Shim`]; the session's subreapers are kept between tasks and ended with
//! it), the registry of those running, ending them all at once, and reaping the children of the
//! session that no task owns.
//!
//! It has its own lock, held only to register, forget or signal a task's tree — never across a
//! spawn, a wait or a `/proc` walk — so no door read, stream chunk or task record ever waits on
//! a fork.
//!
//! # The session's threads and locks
//!
//! Every thread of a session, every lock and the order they are taken in are in
//! `ARCHITECTURE.md` ("Threads", "Locks and their order"). This registry's lock is a leaf:
//! nothing is taken while it is held, and it is never held across a spawn, a wait or a `/proc`
//! walk.

use std::collections::BTreeMap;
use std::io;
use std::sync::Mutex;
use std::time::Duration;

use crate::sys::spawn::Remote;
use crate::sys::spawn::{self, Spawned, Spec};

/// How many times a spawn failing with ETXTBSY is tried again, [`BUSY_WAIT`] apart.
const BUSY_RETRIES: u32 = 20;
const BUSY_WAIT: Duration = Duration::from_millis(10);

/// The running handlers' trees, each reachable through its subreaper; and the subreapers kept
/// for later tasks.
#[derive(Default)]
pub struct Supervisor {
    running: Mutex<Running>,
    subreapers: spawn::Subreapers,
}

#[derive(Default)]
struct Running {
    trees: BTreeMap<u64, Remote>,
    next: u64,
    /// Set by [`Supervisor::kill_all`]: a tree registered after it is killed at once.
    killed: bool,
}

/// A running handler's place in the registry, given up when dropped.
pub struct Registration<'a> {
    supervisor: &'a Supervisor,
    key: u64,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.supervisor.lock().trees.remove(&self.key);
    }
}

impl Supervisor {
    fn lock(&self) -> std::sync::MutexGuard<'_, Running> {
        // panic = "abort": a poisoned lock cannot be observed half-updated.
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Start the handler `spec` describes, to be registered ([`Supervisor::register`]) by the
    /// thread that watches it. ETXTBSY is passing (the handler file is open for writing
    /// somewhere: just written, or its writer's descriptor held by a child another process
    /// forked and has not yet exec'd): tried again a few times — here where the spawn says it
    /// (macOS), by the subreaper itself on Linux, where the spawn returns before the exec.
    /// `landlock`: the ruleset whose domain it runs in ([`spawn::spawn`]).
    pub fn spawn(
        &self,
        spec: &Spec<'_>,
        landlock: Option<std::os::fd::RawFd>,
    ) -> io::Result<Spawned> {
        let mut retries = 0;
        loop {
            match spawn::spawn(spec, landlock, &self.subreapers) {
                Err(err) if err.raw_os_error() == Some(libc::ETXTBSY) && retries < BUSY_RETRIES => {
                    retries += 1;
                    std::thread::sleep(BUSY_WAIT);
                }
                spawned => return spawned,
            }
        }
    }

    /// Register a started handler's tree, which [`Supervisor::kill_all`] then reaches — killed
    /// at once if that has already been called (so a tree started before a wind-down and
    /// registered after it is ended too).
    pub fn register(&self, spawned: &Spawned) -> Registration<'_> {
        let remote = spawned.shim.remote();
        let mut running = self.lock();
        if running.killed {
            remote.kill();
        }
        let key = running.next;
        running.next += 1;
        running.trees.insert(key, remote);
        Registration {
            supervisor: self,
            key,
        }
    }

    /// End the subreapers kept for later tasks, and reap them: the session ends in order and no
    /// handler runs.
    pub fn retire_idle(&self) {
        self.subreapers.retire_idle();
    }

    /// Kill every running handler's whole tree now, and any started from now on: the session is
    /// ending at once.
    pub fn kill_all(&self) {
        let mut running = self.lock();
        running.killed = true;
        running.trees.values().for_each(Remote::kill);
    }
}
