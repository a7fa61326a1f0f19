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
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use super::ctl;
use super::environ::{Environment, Inherited};
use crate::sys::raw;

/// The most descriptors a child inherits under their own numbers, besides its stdio.
pub const MAX_KEEP: usize = 4;

/// Everything the child reads, made before the clone; and what it writes.
pub struct Exec {
    path: CString,
    /// Owned strings behind `argv` and the child's own variables in `envp`, kept alive with them.
    _strings: Vec<CString>,
    /// The inherited environment, shared and never changed, that the rest of `envp` points into.
    _inherited: Arc<Inherited>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    cwd: CString,
    /// The child's stdin, stdout and stderr, in the descriptor table the plan is made in.
    pub stdio: [RawFd; 3],
    /// The other descriptors the child inherits under their numbers there (each above 2); -1
    /// for none.
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
// never mutates, and of `_inherited`'s strings, which it holds a count of and nothing mutates
// (an `Arc` hands out no `&mut` while shared); so they stay valid wherever it moves.
unsafe impl Send for Exec {}
// SAFETY: shared, it is only read — but for `parent`, `failed` and `in_cwd`, which are atomics
// (the child of a clone and its cloner are the ones that share it).
unsafe impl Sync for Exec {}

impl Exec {
    /// The plan for running `path` (already resolved) with `argv` and `env` in `cwd`, its
    /// stdio `stdio`, inheriting `keep` (at most [`MAX_KEEP`]); leading its own group, not dying
    /// with its parent, leaving signals to its parent (set [`Exec`]'s flags otherwise).
    pub fn new(
        path: OsString,
        argv: Vec<OsString>,
        env: &Environment,
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
        if let Some(fd) = keep.iter().find(|&&fd| fd < 3) {
            let why = format!("descriptor {fd} cannot be inherited under its number: stdio's");
            return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
        }
        let mut kept = [-1; MAX_KEEP];
        kept[..keep.len()].copy_from_slice(keep);
        let argc = argv.len();
        let mut strings: Vec<CString> = argv.into_iter().map(cstring).collect::<io::Result<_>>()?;
        strings.extend(env.own_rendered()?);
        let (args, own) = strings.split_at(argc);
        let end = std::iter::once(std::ptr::null());
        let argv = args.iter().map(|s| s.as_ptr()).chain(end.clone()).collect();
        let inherited = env.kept().map(|entry| entry.as_ptr());
        let envp = inherited
            .chain(own.iter().map(|s| s.as_ptr()))
            .chain(end)
            .collect();
        Ok(Self {
            path: cstring(path)?,
            argv,
            envp,
            _strings: strings,
            _inherited: env.inherited(),
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

/// Where a child's descriptors are in the process that clones it — which may not be where the
/// plan was made (a subreaper receives them over its control socket): its stdio, each inherited
/// one with the number the child is to have it under, and the ruleset.
#[derive(Clone, Copy)]
pub struct Fds {
    pub stdio: [RawFd; 3],
    /// `(where it is, the number the child has it under)`; `-1` where there is none.
    pub keep: [(RawFd, RawFd); MAX_KEEP],
    pub landlock: RawFd,
}

/// What the child of a clone runs on: the plan, and where its descriptors are in its cloner.
pub struct Launch<'a> {
    pub plan: &'a Exec,
    pub fds: Fds,
}

impl Exec {
    /// Its descriptors where the plan was made: each inherited one under its own number.
    pub fn fds(&self) -> Fds {
        Fds {
            stdio: self.stdio,
            keep: self.keep.map(|fd| (fd, fd)),
            landlock: self.landlock,
        }
    }

    /// Its descriptors as they are passed to a subreaper, in order: stdio, the inherited ones
    /// (packed first in [`Exec::keep`]), the ruleset if any; and how many there are.
    pub fn passed(&self) -> ([RawFd; ctl::MAX_FDS], usize) {
        let mut fds = [-1; ctl::MAX_FDS];
        let present = self.stdio.iter().chain(&self.keep).chain([&self.landlock]);
        let mut count = 0;
        for &fd in present.filter(|&&fd| fd >= 0) {
            fds[count] = fd;
            count += 1;
        }
        (fds, count)
    }

    /// Where the descriptors [`Exec::passed`] sent arrived, `received` in the same order: each
    /// inherited one to be moved to the number the plan gave it. `None` when they are not as
    /// many as the plan has.
    pub fn received(&self, received: &[RawFd]) -> Option<Fds> {
        let kept = self.keep.iter().filter(|&&fd| fd >= 0).count();
        let ruleset = usize::from(self.landlock >= 0);
        if received.len() != 3 + kept + ruleset {
            return None;
        }
        let mut fds = Fds {
            stdio: [received[0], received[1], received[2]],
            keep: [(-1, -1); MAX_KEEP],
            landlock: if ruleset == 1 { received[3 + kept] } else { -1 },
        };
        for (slot, (&from, &to)) in fds
            .keep
            .iter_mut()
            .zip(received[3..].iter().zip(&self.keep))
        {
            if to >= 0 {
                *slot = (from, to);
            }
        }
        Some(fds)
    }
}

/// The child, from clone to exec: the entry [`raw::clone`] runs, on a [`Launch`]'s address.
pub extern "C" fn child(launch: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `launch` and the plan it borrows are kept alive and unmoved by the cloner until
    // this child has exec'd or exited, and only the plan's atomics are written meanwhile: the
    // cloner sleeps in the `CLONE_VFORK` clone until then. Both are either on the stack of a
    // subreaper asleep in that clone and in the plan the session lent it — which the session
    // frees only once no such clone can be under way, and leaks, with that stack, if the
    // subreaper died inside one (`reaper::Frame::cloning`) — or on the stack of the session
    // thread asleep in the clone (`spawn_child`), whose wait only a fatal signal ends, ending
    // this whole process with it.
    let launch = unsafe { &*launch.cast::<Launch<'_>>() };
    let plan = launch.plan;
    let errno = match prepare(plan, &launch.fds) {
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
fn prepare(plan: &Exec, fds: &Fds) -> Result<(), libc::c_int> {
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
    // Every descriptor is first lifted above every number one is moved to (close-on-exec, so
    // the copies go at the exec), so no move below overwrites one still to be moved — wherever
    // the cloner had them (a subreaper receives them at its lowest free numbers).
    let keep = fds.keep.iter().filter(|(from, _)| *from >= 0);
    let floor = keep
        .clone()
        .map(|&(_, to)| to as usize + 1)
        .fold(3, usize::max);
    let lift = |fd: RawFd| {
        let dup = [fd as usize, libc::F_DUPFD_CLOEXEC as usize, floor, 0, 0, 0];
        call(libc::SYS_fcntl, dup)
    };
    let mut moves = [(0usize, 0usize); 3 + MAX_KEEP];
    let mut count = 0;
    let targets = (0..3).zip(&fds.stdio).map(|(to, &from)| (from, to));
    for (from, to) in targets.chain(keep.copied()) {
        moves[count] = (lift(from)?, to as usize);
        count += 1;
    }
    let landlock = match fds.landlock {
        ruleset if ruleset >= 0 => Some(lift(ruleset)?),
        _ => None,
    };
    for &(high, to) in &moves[..count] {
        // dup3 clears close-on-exec on the copy (and exists on every architecture; dup2 not).
        call(libc::SYS_dup3, [high, to, 0, 0, 0, 0])?;
    }
    if let Err(errno) = call(libc::SYS_chdir, [plan.cwd.as_ptr() as usize, 0, 0, 0, 0, 0]) {
        plan.in_cwd.store(true, Ordering::Release);
        return Err(errno);
    }
    // Last, so every step above still had the session's rights (the workdir is entered already).
    if let Some(ruleset) = landlock {
        crate::sys::landlock::restrict(ruleset as RawFd)?;
    }
    raw::set_signal_mask(0).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(keep: &[RawFd], landlock: RawFd) -> Exec {
        let argv = vec![OsString::from("true")];
        let mut exec = Exec::new(
            "/bin/true".into(),
            argv,
            &Environment::default(),
            "/".into(),
            [10, 11, 12],
            keep,
        )
        .unwrap();
        exec.landlock = landlock;
        exec
    }

    #[test]
    fn descriptors_passed_to_a_subreaper_arrive_each_bound_for_its_number() {
        let exec = plan(&[40, 41], 42);
        let (passed, count) = exec.passed();
        assert_eq!(&passed[..count], &[10, 11, 12, 40, 41, 42]);
        // Received at the subreaper's lowest free numbers, in the same order.
        let fds = exec.received(&[0, 1, 2, 3, 4, 5]).unwrap();
        assert_eq!(fds.stdio, [0, 1, 2]);
        assert_eq!(fds.keep[..3], [(3, 40), (4, 41), (-1, -1)]);
        assert_eq!(fds.landlock, 5);
        // Where the plan was made, each is where it is.
        assert_eq!(exec.fds().keep[..2], [(40, 40), (41, 41)]);

        let bare = plan(&[], -1);
        let (passed, count) = bare.passed();
        assert_eq!(&passed[..count], &[10, 11, 12]);
        let fds = bare.received(&[7, 8, 9]).unwrap();
        assert_eq!((fds.stdio, fds.landlock), ([7, 8, 9], -1));
        assert!(fds.keep.iter().all(|&(from, to)| from < 0 && to < 0));
    }

    #[test]
    fn descriptors_not_as_many_as_the_plan_has_are_refused() {
        let exec = plan(&[40], 42);
        for wrong in [
            &[0, 1, 2][..],
            &[0, 1, 2, 3][..],
            &[0, 1, 2, 3, 4, 5][..],
            &[][..],
        ] {
            assert!(exec.received(wrong).is_none(), "{wrong:?}");
        }
    }

    #[test]
    fn a_descriptor_under_a_stdio_number_or_too_many_cannot_be_inherited() {
        let argv = || vec![OsString::from("true")];
        let new = |keep: &[RawFd]| {
            Exec::new(
                "/bin/true".into(),
                argv(),
                &Environment::default(),
                "/".into(),
                [10, 11, 12],
                keep,
            )
        };
        assert!(new(&[2]).is_err());
        assert!(new(&[3, 4, 5, 6, 7]).is_err());
        assert!(new(&[3, 4, 5, 6]).is_ok());
    }
}
