//! Signals: sending one (`kill(2)`, `pidfd_open(2)`, `pidfd_send_signal(2)`), and catching the
//! termination signals as flags. Whether a process *may* be signalled is decided elsewhere
//! ([`crate::process`]); these are the calls.

use std::os::fd::OwnedFd;

/// The first termination signal caught by [`catch_termination`], or 0.
static CAUGHT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
/// How many termination signals have been caught.
static COUNT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Every signal this process catches, a bit each (signal N is bit N - 1): SIGSEGV and SIGBUS,
/// which Rust's runtime catches before `main` to report a stack overflow, and those mur catches,
/// each recorded by [`catch_termination`] — the one place mur installs a handler — before it is
/// installed. A child cloned to exec a program puts these back to their defaults
/// ([`reset_on_exec`], [`super::raw::default_signals`]) instead of reading all 64 dispositions
/// to find them: 62 reads cost ~65 µs a spawn on a 2-core VM, a fifth of a task's overhead.
static HANDLED: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(bit(libc::SIGSEGV) | bit(libc::SIGBUS));

/// `signal`'s bit in a mask like [`reset_on_exec`]'s.
pub const fn bit(signal: libc::c_int) -> u64 {
    1 << (signal - 1)
}

/// The signals a child cloned from this process puts back to their defaults before its exec:
/// those this process catches (`HANDLED`); SIGPIPE, which the Rust runtime ignores and a
/// program expects at its default; SIGCHLD, whose ignoring would have the kernel reap the
/// program's children unasked; and 32 to 34, which the C library keeps for itself (glibc's
/// SIGCANCEL and SIGSETXID, musl's SIGCANCEL, SIGSYNCCALL and SIGTIMER: caught, or ignored as
/// glibc leaves 32) — a fresh program has them at their defaults. Every other signal ignored
/// when mur was started stays ignored, as an exec keeps it.
pub fn reset_on_exec() -> u64 {
    let libc_own = bit(32) | bit(33) | bit(34);
    HANDLED.load(std::sync::atomic::Ordering::SeqCst)
        | bit(libc::SIGPIPE)
        | bit(libc::SIGCHLD)
        | libc_own
}

/// The handler: atomic operations and one `write(2)` only (async-signal-safe). It keeps the
/// interrupted code's `errno`: the write can fail (a full wake-up pipe: `EAGAIN`) and would
/// otherwise overwrite an errno the interrupted thread was about to read.
extern "C" fn record_signal(signal: libc::c_int) {
    use std::sync::atomic::Ordering;
    let errno = errno_location();
    // SAFETY: this thread's own errno, read and later written back on this thread.
    let saved = unsafe { *errno };
    let _ = CAUGHT.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
    COUNT.fetch_add(1, Ordering::SeqCst);
    super::wake::notify();
    // SAFETY: as above.
    unsafe { *errno = saved };
}

/// Where libc keeps this thread's `errno`.
fn errno_location() -> *mut libc::c_int {
    // SAFETY: returns a pointer to the calling thread's errno; no argument.
    #[cfg(target_os = "linux")]
    return unsafe { libc::__errno_location() };
    // SAFETY: as above.
    #[cfg(not(target_os = "linux"))]
    return unsafe { libc::__error() };
}

/// Turn SIGINT, SIGTERM and SIGHUP into flags ([`caught_termination`], [`termination_count`])
/// for the rest of this process's life (each also wakes [`super::wake::wait`]), so a session
/// winds down in order — cancelling its tasks and removing its record — instead of dying with
/// its record in place. The `Err` says which step failed; a caller that ran on would die with
/// its record in place on the first signal, or notice it only at its next tick.
pub fn catch_termination() -> Result<(), String> {
    super::wake::init().map_err(|err| format!("cannot set up signal handling: {err}"))?;
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // Recorded first: a child cloned meanwhile resets it whether or not it is caught yet.
        HANDLED.fetch_or(bit(signal), std::sync::atomic::Ordering::SeqCst);
        // SAFETY: installs a handler that only touches atomics; the function pointer lives for the
        // whole program, and the zeroed `sigaction` is then filled field by field.
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = record_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(format!(
                "cannot catch signal {signal}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// The first termination signal caught since [`catch_termination`], if any.
pub fn caught_termination() -> Option<libc::c_int> {
    match CAUGHT.load(std::sync::atomic::Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// How many termination signals have arrived; a second one means "now".
pub fn termination_count() -> u32 {
    COUNT.load(std::sync::atomic::Ordering::SeqCst)
}

/// A descriptor naming process `pid` for as long as it lives (never a later holder of the
/// number). `ENOSYS` where the kernel has none (Linux < 5.3, other systems).
#[cfg(target_os = "linux")]
pub fn pidfd_open(pid: libc::pid_t) -> std::io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: `pidfd_open(pid, flags)` takes two integers and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us, open and owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

#[cfg(not(target_os = "linux"))]
pub fn pidfd_open(_pid: libc::pid_t) -> std::io::Result<OwnedFd> {
    Err(std::io::Error::from_raw_os_error(libc::ENOSYS))
}

/// Send `signal` to the process `fd` names: that process and no other.
#[cfg(target_os = "linux")]
pub fn pidfd_send_signal(fd: &OwnedFd, signal: libc::c_int) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a live descriptor, a signal number, a null siginfo (the kernel fills in the
    // `kill(2)` defaults) and no flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub fn pidfd_send_signal(_fd: &OwnedFd, _signal: libc::c_int) -> std::io::Result<()> {
    Err(std::io::Error::from_raw_os_error(libc::ENOSYS))
}

/// `kill(2)`: `signal` to whichever process holds `pid` now. Callers verify first
/// ([`crate::process`]), and prefer [`pidfd_send_signal`] where there is a pidfd.
pub fn kill(pid: libc::pid_t, signal: libc::c_int) -> std::io::Result<()> {
    // SAFETY: two integers; no memory is passed.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handler_leaves_errno_as_it_found_it() {
        super::super::wake::init().unwrap();
        // Fill the wake-up pipe, so the handler's write fails with EAGAIN.
        for _ in 0..100_000 {
            super::super::wake::notify();
        }
        // SAFETY: this thread's errno, set to a marker.
        unsafe { *errno_location() = 4242 };
        record_signal(libc::SIGHUP);
        assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(4242));
    }

    /// What a child resets is read from [`HANDLED`], not from the kernel: every signal this
    /// process catches must be in it, or a child would keep that handler until its exec.
    #[cfg(target_os = "linux")]
    #[test]
    fn every_signal_this_process_catches_is_reset_in_a_child() {
        let reset = reset_on_exec();
        for signal in 1..=64 {
            // The kernel's layout: handler, flags, restorer, mask.
            let mut old = [0usize; 4];
            // SAFETY: reads a disposition into a live buffer as large as the kernel's struct.
            let read = unsafe {
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    signal,
                    std::ptr::null::<u8>(),
                    old.as_mut_ptr(),
                    8usize,
                )
            };
            let caught = read == 0 && old[0] != libc::SIG_DFL && old[0] != libc::SIG_IGN;
            assert!(
                !caught || reset & bit(signal) != 0,
                "signal {signal} is caught"
            );
        }
        for signal in [
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGPIPE,
            libc::SIGCHLD,
            32,
            33,
        ] {
            assert_ne!(reset & bit(signal), 0, "{signal}");
        }
    }
}
