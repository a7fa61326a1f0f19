//! The last resort under `panic = "abort"`: no destructor runs, so a panic hook SIGKILLs every
//! registered member before the abort, reading a lock-free registry — never a mutex a panicking
//! thread might hold.

use std::sync::Once;
use std::sync::atomic::{AtomicI32, Ordering};

/// How many members can be registered at once.
const SLOTS: usize = 1024;

/// Positive: a process group to SIGKILL. Negative: a single pid (a member in our own group).
/// Zero: a free slot.
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
            kill_registered();
            previous(info);
        }));
    });
}

/// Register `what`; the returned slot unregisters it.
pub fn register(what: Kill) -> Option<usize> {
    let value = match what {
        Kill::Group(pgid) => i32::try_from(pgid).ok().filter(|&p| p > 0)?,
        Kill::Process(pid) => -i32::try_from(pid).ok().filter(|&p| p > 0)?,
    };
    (0..SLOTS).find(|&i| {
        REGISTRY[i]
            .compare_exchange(0, value, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    })
}

/// Forget slot `slot` (the member was reaped).
pub fn unregister(slot: usize) {
    if let Some(cell) = REGISTRY.get(slot) {
        cell.store(0, Ordering::SeqCst);
    }
}

fn kill_registered() {
    for cell in &REGISTRY {
        let value = cell.load(Ordering::SeqCst);
        // SAFETY: integers only; positive values name groups we created, negative ones pids of
        // our own unreaped children.
        unsafe {
            if value > 0 {
                libc::killpg(value, libc::SIGKILL);
            } else if value < 0 {
                libc::kill(-value, libc::SIGKILL);
            }
        }
    }
}
