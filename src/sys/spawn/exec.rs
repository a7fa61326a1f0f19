//! A handler from its clone to its `execve`: everything it needs prepared beforehand, and the
//! few raw system calls it makes in between.
//!
//! The child is cloned with `CLONE_VM | CLONE_VFORK` — by a task's subreaper, or by the thread
//! that starts a child of its own ([`crate::sys::spawn::spawn_child`]) — what `posix_spawn` does
//! inside glibc and musl: it borrows the memory it shares with mur for the few calls before
//! `execve`, while its parent sleeps until the exec (or the child's exit). So it may only make
//! raw system calls ([`crate::sys::raw`]: no `errno`, which is another thread's) on values
//! prepared here: no allocation, no lock, no unwinding. It finds every signal blocked (its parent
//! saw to that); it puts each one mur catches back to its default where its parent has not
//! already ([`Exec::reset_signals`], [`Exec::reset`]), so nothing of mur's can run in it, and
//! unblocks them all just before the exec.
//!
//! A failure before the exec is written to [`Exec::failed`] and the child exits 127; the
//! subreaper reaps it, and the session reads the slot once the clone has returned.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStringExt;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::sys::raw;

/// The most descriptors a child inherits under their own numbers, besides its stdio.
pub const MAX_KEEP: usize = 4;

/// Everything the child reads, made before the clone; and what it writes.
pub struct Exec {
    path: CString,
    /// Owned strings behind `argv` and `envp`, kept alive with them.
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    cwd: CString,
    /// The child's stdin, stdout and stderr, in its parent's descriptor table.
    pub stdio: [RawFd; 3],
    /// The other descriptors the child inherits under their numbers; -1 for none.
    pub keep: [RawFd; MAX_KEEP],
    /// Whether the child leads a process group of its own (else it stays in its parent's).
    pub own_group: bool,
    /// Whether it dies with its parent (`PR_SET_PDEATHSIG`): a handler with its subreaper.
    pub die_with_parent: bool,
    /// Whether it puts caught signals back to their defaults itself (its parent has not).
    pub reset_signals: bool,
    /// The signals the child, or the subreaper before it, puts back to their defaults
    /// ([`crate::sys::signal::reset_on_exec`]), read when the plan is made, before the clone.
    pub reset: u64,
    /// A Landlock ruleset it enters a domain of, last before its exec ([`crate::sys::landlock`]);
    /// -1 for none. Inherited like [`Exec::keep`]'s, but never past the exec (close-on-exec).
    pub landlock: RawFd,
    /// Whom it runs as, when not as mur, and what it keeps: set first of all, so every later step
    /// (the parent-death signal, which a change of user clears, the workdir, the exec) is the
    /// handler's own.
    pub user: Option<crate::sys::user::Becomes>,
    /// Its parent's pid, set before the clone: the parent the child must find.
    pub parent: AtomicI32,
    /// The errno of the step that failed in the child, 0 if it reached `execve`'s success.
    pub failed: AtomicI32,
    /// Whether that step was entering `cwd` (else setting up, or the exec itself).
    pub in_cwd: AtomicBool,
}

// SAFETY: the raw pointers point into the heap buffers of `_strings`, which this struct owns and
// never mutates, so they stay valid wherever it moves.
unsafe impl Send for Exec {}
// SAFETY: shared, it is only read — but for `parent`, `failed` and `in_cwd`, which are atomics
// (the child of a clone and its cloner are the ones that share it).
unsafe impl Sync for Exec {}

impl Exec {
    /// The plan for running `path` (already resolved) with `argv` and `envp` in `cwd`, its
    /// stdio `stdio`, inheriting `keep` (at most [`MAX_KEEP`]); leading its own group, not dying
    /// with its parent, leaving signals to its parent (set [`Exec`]'s flags otherwise).
    pub fn new(
        path: OsString,
        argv: Vec<OsString>,
        env: &[(OsString, OsString)],
        cwd: OsString,
        stdio: [RawFd; 3],
        keep: &[RawFd],
    ) -> io::Result<Self> {
        if keep.len() > MAX_KEEP {
            let why = format!(
                "at most {MAX_KEEP} descriptors are inherited, not {}",
                keep.len()
            );
            return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
        }
        let mut kept = [-1; MAX_KEEP];
        kept[..keep.len()].copy_from_slice(keep);
        let argc = argv.len();
        let mut strings: Vec<CString> = argv.into_iter().map(cstring).collect::<io::Result<_>>()?;
        for (k, v) in env {
            let mut pair = k.clone();
            pair.push("=");
            pair.push(v);
            strings.push(cstring(pair)?);
        }
        let pointers = |range: &[CString]| -> Vec<*const libc::c_char> {
            range
                .iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        Ok(Self {
            path: cstring(path)?,
            argv: pointers(&strings[..argc]),
            envp: pointers(&strings[argc..]),
            _strings: strings,
            cwd: cstring(cwd)?,
            stdio,
            keep: kept,
            own_group: true,
            die_with_parent: false,
            reset_signals: false,
            reset: crate::sys::signal::reset_on_exec(),
            landlock: -1,
            user: None,
            parent: AtomicI32::new(0),
            failed: AtomicI32::new(0),
            in_cwd: AtomicBool::new(false),
        })
    }

    /// What the child reported, once its clone has returned: `Ok` if it reached its exec.
    pub fn outcome(&self, cwd: &std::path::Path) -> io::Result<()> {
        match self.failed.load(Ordering::Acquire) {
            0 => Ok(()),
            errno => {
                let err = io::Error::from_raw_os_error(errno);
                Err(if self.in_cwd.load(Ordering::Acquire) {
                    let cwd = cwd.display();
                    io::Error::new(err.kind(), format!("cannot enter the workdir {cwd}: {err}"))
                } else {
                    err
                })
            }
        }
    }
}

fn cstring(s: OsString) -> io::Result<CString> {
    CString::new(s.into_vec()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// The child, from clone to exec: the entry [`raw::clone`] runs, on the plan's address.
pub extern "C" fn child(plan: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `plan` is an `Exec` its cloner keeps alive and unmoved until this child has exec'd
    // or exited, writing only its atomics meanwhile: the cloner sleeps in the `CLONE_VFORK`
    // clone until then, and the plan is either in a subreaper's frame — which the session frees
    // only once no such clone can be under way, and leaks if the subreaper died inside one
    // (`reaper::Frame::cloning`) — or on the stack of the session thread asleep in the clone
    // (`spawn_child`), whose wait only a fatal signal ends, ending this whole process with it.
    let plan = unsafe { &*plan.cast::<Exec>() };
    let errno = match prepare(plan) {
        Ok(()) => {
            let argv = plan.argv.as_ptr() as usize;
            let envp = plan.envp.as_ptr() as usize;
            let args = [plan.path.as_ptr() as usize, argv, envp, 0, 0, 0];
            // SAFETY: the path, argv and envp are NUL-terminated strings and null-terminated
            // pointer arrays the plan owns.
            let exec = unsafe { raw::call(libc::SYS_execve, args) };
            match exec {
                Ok(_) => libc::EIO,
                Err(errno) => errno,
            }
        }
        Err(errno) => errno,
    };
    plan.failed.store(errno.max(1), Ordering::Release);
    127
}

/// The child's steps before `execve`.
fn prepare(plan: &Exec) -> Result<(), libc::c_int> {
    let call = |number, args: [usize; 6]| {
        // SAFETY: each call below passes integers, or the plan's NUL-terminated `cwd`.
        unsafe { raw::call(number, args) }
    };
    if plan.reset_signals {
        raw::default_signals(plan.reset)?;
    }
    if plan.own_group {
        call(libc::SYS_setpgid, [0; 6])?;
    }
    if let Some(becomes) = plan.user {
        crate::sys::user::assume(becomes)?;
    }
    if plan.die_with_parent {
        let pdeath = [libc::PR_SET_PDEATHSIG as usize, libc::SIGKILL as usize];
        call(libc::SYS_prctl, [pdeath[0], pdeath[1], 0, 0, 0, 0])?;
        // The parent died before the line above: nothing would end this child.
        if call(libc::SYS_getppid, [0; 6])? != plan.parent.load(Ordering::Acquire) as usize {
            return Err(libc::ESRCH);
        }
    }
    // Lifted above 2 first, so no dup below overwrites one still to be moved.
    let mut high = [0usize; 3];
    for (slot, &fd) in high.iter_mut().zip(&plan.stdio) {
        let dup = [fd as usize, libc::F_DUPFD_CLOEXEC as usize, 3, 0, 0, 0];
        *slot = call(libc::SYS_fcntl, dup)?;
    }
    for (target, &fd) in (0usize..).zip(&high) {
        // dup3 clears close-on-exec on the copy (and exists on every architecture; dup2 not).
        call(libc::SYS_dup3, [fd, target, 0, 0, 0, 0])?;
    }
    for &keep in plan.keep.iter().filter(|&&fd| fd >= 0) {
        let keep = keep as usize;
        let flags = call(libc::SYS_fcntl, [keep, libc::F_GETFD as usize, 0, 0, 0, 0])?;
        let cleared = flags & !(libc::FD_CLOEXEC as usize);
        call(
            libc::SYS_fcntl,
            [keep, libc::F_SETFD as usize, cleared, 0, 0, 0],
        )?;
    }
    if let Err(errno) = call(libc::SYS_chdir, [plan.cwd.as_ptr() as usize, 0, 0, 0, 0, 0]) {
        plan.in_cwd.store(true, Ordering::Release);
        return Err(errno);
    }
    // Last, so every step above still had the session's rights (the workdir is entered already).
    if plan.landlock >= 0 {
        crate::sys::landlock::restrict(plan.landlock)?;
    }
    raw::set_signal_mask(0).map(|_| ())
}
