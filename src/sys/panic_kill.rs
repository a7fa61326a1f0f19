//! The last resort under `panic = "abort"`: no destructor runs, so a panic hook SIGKILLs every
//! registered member before the abort, reading a lock-free registry — never a mutex a panicking
//! thread might hold.
//!
//! Invariant: the hook never signals a number that no longer names a member. A member is held
//! by [`Registered`], the only way to reap it, which takes it out of the registry after it has
//! exited (a zombie still holds its pid, and so its group id, so the hook's SIGKILL can reach
//! nothing else) and before it is reaped (after which the number may be handed on). The hook
//! claims a slot for the moment it signals it, and a release waits out that moment: so a
//! value the hook read is never signalled after the reap that follows its release.

use std::io;
use std::process::ExitStatus;
use std::sync::Once;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use super::pidref::PidRef;

/// How many members can be registered at once.
const SLOTS: usize = 1024;
/// A slot the hook is signalling right now: no pid or group is `i32::MIN`'s negation.
const CLAIMED: i32 = i32::MIN;

/// Positive: a process group to SIGKILL. Negative: a single pid (a member in our own group).
/// Zero: a free slot. [`CLAIMED`]: the hook is signalling it.
static REGISTRY: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
static HOOK: Once = Once::new();

/// What to kill for one member.
#[derive(Debug, Clone, Copy)]
pub enum Kill {
    /// The member leads its own process group.
    Group(u32),
    /// The member shares our group: kill it alone.
    Process(u32),
}

/// Install the hook, once per process.
pub fn install_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            each_registered(|value| {
                // SAFETY: integers only; positive values name groups we created, negative ones
                // pids of our own children, which are unreaped while registered (module doc).
                unsafe {
                    if value > 0 {
                        libc::killpg(value, libc::SIGKILL);
                    } else {
                        libc::kill(-value, libc::SIGKILL);
                    }
                }
            });
            previous(info);
        }));
    });
}

/// A child of ours that the panic hook SIGKILLs until it is reaped, and that is reaped only
/// here: after it has exited, its registration is released, and only then is it waited for.
pub struct Registered {
    held: PidRef,
    /// The slot and the value in it, until released.
    slot: Option<(usize, i32)>,
}

impl Registered {
    /// Register `held` (an unreaped child of ours) to be killed as `kill` says. Past `SLOTS`
    /// members it is held unregistered: the hook cannot reach it, which is only less thorough.
    pub fn new(held: PidRef, kill: Kill) -> Self {
        let value = match kill {
            Kill::Group(pgid) => i32::try_from(pgid).ok().filter(|&p| p > 0),
            Kill::Process(pid) => i32::try_from(pid).ok().filter(|&p| p > 0).map(|p| -p),
        };
        let slot = value.and_then(|value| {
            (0..SLOTS)
                .find(|&i| {
                    REGISTRY[i]
                        .compare_exchange(0, value, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok()
                })
                .map(|i| (i, value))
        });
        Self { held, slot }
    }

    /// The child's handle, to signal it or see it exit (never to reap it).
    pub fn held(&self) -> &PidRef {
        &self.held
    }

    /// Wait until the child has exited, forget it in the registry, reap it. A second call
    /// finds no child (`ECHILD`).
    pub fn reap(&mut self) -> io::Result<ExitStatus> {
        // Seen exited but left unreaped: the number names this child alone until the reap.
        while !self.held.wait_child_exit(Duration::from_secs(3600)) {}
        if let Some((slot, value)) = self.slot.take() {
            release(slot, value);
        }
        super::spawn::wait(self.held.pid())
    }
}

/// Free `slot`, which holds `value`, once the hook is not signalling it: when this returns, the
/// hook has either signalled `value` already or will never read it.
fn release(slot: usize, value: i32) {
    let cell = &REGISTRY[slot];
    while let Err(now) = cell.compare_exchange(value, 0, Ordering::SeqCst, Ordering::SeqCst) {
        debug_assert_eq!(now, CLAIMED, "a slot is freed by its holder alone");
        std::thread::yield_now();
    }
}

/// Run `signal` on each registered value, claiming its slot meanwhile (see [`release`]).
fn each_registered(mut signal: impl FnMut(i32)) {
    for cell in &REGISTRY {
        let value = cell.load(Ordering::SeqCst);
        if value == 0 || value == CLAIMED {
            continue;
        }
        if cell
            .compare_exchange(value, CLAIMED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            signal(value);
            cell.store(value, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests;
