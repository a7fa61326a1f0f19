//! Starting a handler process: in its own process group, its stdio three fresh pipes, one named
//! descriptor inherited, and — on Linux — dying with the thread that started it.
//!
//! Why not `std::process::Command`: the parent-death signal (`PR_SET_PDEATHSIG`) has to be set in
//! the child, and any `pre_exec` makes std `fork` the whole session — page tables and all, with a
//! copy-on-write fault for every page either side touches before the child execs. On a session
//! that cost about a quarter of a millisecond per task, as much as the rest of mur's work on it.
//! Here the child is `clone(CLONE_VM | CLONE_VFORK)`, what `posix_spawn` does inside glibc and
//! musl: it borrows the parent's memory for the few calls before `execve`, and the spawning thread
//! sleeps until the exec (or the child's exit) — and the child still sets its parent-death signal.
//!
//! The child runs on a stack of its own in memory it shares with every thread of the session, so
//! it may only make raw system calls on values prepared beforehand: no allocation, no lock, no
//! unwinding. Every signal is blocked across the clone (but the two glibc keeps for itself, which
//! only its own threads send), and the child puts each caught signal back to its default before
//! unblocking — so no session signal handler can ever run in it.
//! A failure before the exec is written to a slot the parent reads once the clone returns, and
//! the child exits 127 (the parent reaps it): the caller sees the `io::Error`, ETXTBSY included.
//!
//! Elsewhere (macOS) this is `std::process::Command`, whose `posix_spawn` or fork is the only
//! way there; no parent-death signal exists, and the group reaper covers for it.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::path::Path;
use std::process::ExitStatus;

/// What to start. The environment is given whole: nothing is inherited that is not in it.
pub struct Spec<'a> {
    /// Run as given when it holds a `/`, else looked up in the `PATH` of `env` (as `execvp`).
    pub program: &'a OsStr,
    /// Arguments after the program's name (which is `program`, as given).
    pub args: &'a [String],
    pub env: Vec<(OsString, OsString)>,
    pub cwd: &'a Path,
    /// A descriptor (close-on-exec, as all of ours are) the child alone inherits under its
    /// number: the flag is cleared in the child between clone and exec.
    pub keep: Option<RawFd>,
}

/// A started child: its pid (also its process group), and our ends of its stdio.
pub struct Spawned {
    pub pid: u32,
    pub stdin: File,
    pub stdout: File,
    pub stderr: File,
}

/// Start `spec` as an unreaped child of this process, leading its own process group. Reap it with
/// [`wait`].
pub fn spawn(spec: &Spec<'_>) -> io::Result<Spawned> {
    let pipe = || super::pipe::pipe().map_err(io::Error::other);
    let (stdin_read, stdin_write) = pipe()?;
    let (stdout_read, stdout_write) = pipe()?;
    let (stderr_read, stderr_write) = pipe()?;
    let pid = start(spec, [stdin_read, stdout_write, stderr_write])?;
    Ok(Spawned {
        pid,
        stdin: stdin_write.into(),
        stdout: stdout_read.into(),
        stderr: stderr_read.into(),
    })
}

/// Wait for our child `pid` to exit, and reap it.
pub fn wait(pid: u32) -> io::Result<ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    let Some(raw) = super::proc::as_pid_t(pid) else {
        return Err(io::Error::from_raw_os_error(libc::ECHILD));
    };
    let mut status = 0;
    loop {
        // SAFETY: `status` is a live integer the kernel fills; `raw` is our own child.
        if unsafe { libc::waitpid(raw, &mut status, 0) } == raw {
            return Ok(ExitStatus::from_raw(status));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// `program` as the path `execve` is given: as is with a `/`, else the first executable regular
/// file of that name in `PATH` (from the child's environment; `/usr/bin:/bin` without one).
fn resolve(program: &OsStr, env: &[(OsString, OsString)]) -> io::Result<OsString> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    if program.as_bytes().contains(&b'/') {
        return Ok(program.to_os_string());
    }
    if program.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map_or_else(|| OsString::from("/usr/bin:/bin"), |(_, v)| v.clone());
    // A relative entry would be looked up here but run from the workdir: skipped.
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .map(std::path::PathBuf::into_os_string)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no executable {:?} in PATH {:?}", program, path),
            )
        })
}

#[cfg(target_os = "linux")]
fn start(spec: &Spec<'_>, stdio: [OwnedFd; 3]) -> io::Result<u32> {
    linux::start(spec, stdio)
}

#[cfg(not(target_os = "linux"))]
fn start(spec: &Spec<'_>, stdio: [OwnedFd; 3]) -> io::Result<u32> {
    use std::os::unix::process::CommandExt;
    let path = resolve(spec.program, &spec.env)?;
    let [stdin, stdout, stderr] = stdio;
    let mut command = std::process::Command::new(path);
    command
        .arg0(spec.program)
        .args(spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(spec.cwd)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0);
    if let Some(fd) = spec.keep {
        super::pipe::keep_open_in_child(&mut command, vec![fd]);
    }
    // The child is reaped by pid ([`wait`]): dropping std's handle neither waits nor kills.
    Ok(command.spawn()?.id())
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::{CString, OsString};
    use std::io;
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::ffi::OsStringExt;
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

    use super::Spec;

    /// The child's stack: its calls are a handful of thin libc wrappers, each a few hundred bytes
    /// of frame at most.
    const STACK_WORDS: usize = 64 * 1024 / 16;
    /// Above the highest signal number (64 on Linux).
    const SIGNALS: libc::c_int = 65;

    /// Everything the child reads, made before the clone; and the one thing it writes.
    struct Plan {
        path: CString,
        argv: Vec<*const libc::c_char>,
        envp: Vec<*const libc::c_char>,
        cwd: CString,
        stdio: [libc::c_int; 3],
        keep: libc::c_int,
        parent: libc::pid_t,
        /// The errno of the step that failed in the child, 0 if it reached `execve`'s success.
        failed: AtomicI32,
        /// Whether that step was entering `cwd` (else setting up or the exec itself).
        in_cwd: AtomicBool,
    }

    pub(super) fn start(spec: &Spec<'_>, stdio: [OwnedFd; 3]) -> io::Result<u32> {
        let path = cstring(super::resolve(spec.program, &spec.env)?)?;
        let argv_owned: Vec<CString> = std::iter::once(Ok(spec.program.to_os_string()))
            .chain(spec.args.iter().map(|a| Ok(OsString::from(a))))
            .map(|a: io::Result<OsString>| cstring(a?))
            .collect::<io::Result<_>>()?;
        let envp_owned: Vec<CString> = spec
            .env
            .iter()
            .map(|(k, v)| {
                let mut pair = k.clone();
                pair.push("=");
                pair.push(v);
                cstring(pair)
            })
            .collect::<io::Result<_>>()?;
        let mut plan = Plan {
            path,
            argv: null_terminated(&argv_owned),
            envp: null_terminated(&envp_owned),
            cwd: cstring(spec.cwd.as_os_str().to_os_string())?,
            stdio: stdio.each_ref().map(AsRawFd::as_raw_fd),
            keep: spec.keep.unwrap_or(-1),
            // SAFETY: `getpid` takes no argument and cannot fail.
            parent: unsafe { libc::getpid() },
            failed: AtomicI32::new(0),
            in_cwd: AtomicBool::new(false),
        };
        let mut stack: Vec<u128> = Vec::with_capacity(STACK_WORDS);
        // SAFETY: the top of the stack buffer: one past its last 16-byte word, so aligned to 16;
        // the buffer outlives the child's use of it (the clone returns only after the exec or
        // the child's exit, and `stack` is dropped after that).
        let top = unsafe { stack.as_mut_ptr().add(STACK_WORDS) }.cast::<libc::c_void>();
        let (pid, clone_error) = {
            let _blocked = BlockedSignals::all()?;
            // SAFETY: `child` is an `extern "C"` function that only makes async-signal-safe
            // calls on `plan`, which lives on this frame until the clone returns; CLONE_VFORK
            // suspends this thread until the child has exec'd or exited, so nothing here moves
            // or frees `plan`, `stack` or the strings meanwhile. Every signal is blocked.
            let pid = unsafe {
                libc::clone(
                    child,
                    top,
                    libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                    (&raw mut plan).cast(),
                )
            };
            // Read before anything else can set errno.
            (pid, io::Error::last_os_error())
        };
        drop(stack);
        drop(stdio);
        if pid < 0 {
            return Err(clone_error);
        }
        match plan.failed.load(Ordering::Acquire) {
            0 => Ok(pid as u32),
            errno => {
                // It exited 127 before its exec: reap it, it names nothing else.
                let _ = super::wait(pid as u32);
                let err = io::Error::from_raw_os_error(errno);
                Err(if plan.in_cwd.load(Ordering::Acquire) {
                    let cwd = spec.cwd.display();
                    io::Error::new(err.kind(), format!("cannot enter the workdir {cwd}: {err}"))
                } else {
                    err
                })
            }
        }
    }

    fn cstring(s: OsString) -> io::Result<CString> {
        CString::new(s.into_vec()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
    }

    fn null_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
        strings
            .iter()
            .map(|s| s.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    }

    /// Every signal blocked on this thread until dropped, when the old mask comes back: no
    /// handler may run in a child that shares our memory before it has reset them.
    struct BlockedSignals(libc::sigset_t);

    impl BlockedSignals {
        fn all() -> io::Result<Self> {
            // SAFETY: both sets are zeroed `sigset_t`s the calls fill; no other pointer.
            unsafe {
                let mut all: libc::sigset_t = std::mem::zeroed();
                let mut old: libc::sigset_t = std::mem::zeroed();
                libc::sigfillset(&mut all);
                match libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old) {
                    0 => Ok(Self(old)),
                    errno => Err(io::Error::from_raw_os_error(errno)),
                }
            }
        }
    }

    impl Drop for BlockedSignals {
        fn drop(&mut self) {
            // SAFETY: restores the mask read in `all`; no other pointer.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
        }
    }

    /// The child, from clone to exec.
    extern "C" fn child(plan: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `plan` is the parent's `Plan`, alive and unmoved while the parent sleeps.
        let plan = unsafe { &*plan.cast::<Plan>() };
        // SAFETY: only thin system-call wrappers on integers and the plan's prepared strings;
        // nothing allocates, locks or unwinds. Whatever fails is recorded and ends the child.
        unsafe {
            let errno = prepare(plan);
            if errno == 0 {
                libc::execve(plan.path.as_ptr(), plan.argv.as_ptr(), plan.envp.as_ptr());
            }
            let errno = if errno == 0 { last_errno() } else { errno };
            plan.failed.store(errno.max(1), Ordering::Release);
            libc::_exit(127)
        }
    }

    /// The child's steps before `execve`: 0, or the errno of the step that failed.
    ///
    /// # Safety
    ///
    /// Only in the cloned child, on the plan made for it.
    unsafe fn prepare(plan: &Plan) -> libc::c_int {
        // SAFETY: each call takes integers, zeroed structs on this stack, or the plan's strings.
        unsafe {
            // Caught signals back to their default (the handlers are the session's); SIGPIPE too,
            // which the Rust runtime ignores and a program expects at its default.
            for signal in 1..SIGNALS {
                // Never caught here (a panic aborts with it at its default), and musl's
                // `sigaction` takes a process-wide lock for it: not a call for this child.
                if signal == libc::SIGABRT {
                    continue;
                }
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 {
                    continue;
                }
                let caught = old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN;
                if caught || signal == libc::SIGPIPE {
                    let mut default: libc::sigaction = std::mem::zeroed();
                    default.sa_sigaction = libc::SIG_DFL;
                    if libc::sigaction(signal, &default, std::ptr::null_mut()) != 0 {
                        return last_errno();
                    }
                }
            }
            if libc::setpgid(0, 0) != 0 {
                return last_errno();
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return last_errno();
            }
            // The session died before the line above: nothing would end this child.
            if libc::getppid() != plan.parent {
                return libc::ESRCH;
            }
            // Lifted above 2 first, so no dup2 below overwrites one still to be moved.
            let mut high = [-1; 3];
            for (slot, &fd) in high.iter_mut().zip(&plan.stdio) {
                *slot = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3);
                if *slot < 0 {
                    return last_errno();
                }
            }
            for (target, &fd) in (0..).zip(&high) {
                if libc::dup2(fd, target) < 0 {
                    return last_errno();
                }
            }
            if plan.keep >= 0 {
                let flags = libc::fcntl(plan.keep, libc::F_GETFD);
                if flags < 0 || libc::fcntl(plan.keep, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0
                {
                    return last_errno();
                }
            }
            if libc::chdir(plan.cwd.as_ptr()) != 0 {
                plan.in_cwd.store(true, Ordering::Release);
                return last_errno();
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut())
        }
    }

    fn last_errno() -> libc::c_int {
        // Reads errno; builds no heap value.
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn spec<'a>(program: &'a str, args: &'a [String]) -> Spec<'a> {
        Spec {
            program: OsStr::new(program),
            args,
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("X".into(), "y".into()),
            ],
            cwd: Path::new("/"),
            keep: None,
        }
    }

    #[test]
    fn a_child_reads_its_stdin_writes_its_stdout_and_sees_only_its_environment() {
        let args = [
            "-c".to_string(),
            "cat; echo \"$X $HOME\" >&2; pwd; exit 3".into(),
        ];
        let mut child = spawn(&spec("sh", &args)).unwrap();
        child.stdin.write_all(b"in\n").unwrap();
        drop(child.stdin);
        let (mut out, mut err) = (String::new(), String::new());
        child.stdout.read_to_string(&mut out).unwrap();
        child.stderr.read_to_string(&mut err).unwrap();
        assert_eq!(out, "in\n/\n");
        assert_eq!(err, "y \n", "X set, HOME not inherited");
        assert_eq!(wait(child.pid).unwrap().code(), Some(3));
    }

    #[test]
    fn a_child_leads_its_own_group_with_default_signals() {
        let args = [
            "-c".to_string(),
            "cut -d' ' -f5 /proc/$$/stat; grep SigIgn /proc/self/status".into(),
        ];
        let mut child = spawn(&spec("sh", &args)).unwrap();
        let mut out = String::new();
        child.stdout.read_to_string(&mut out).unwrap();
        assert_eq!(wait(child.pid).unwrap().code(), Some(0));
        let mut lines = out.lines();
        let pgid: u32 = lines.next().unwrap().trim().parse().unwrap();
        assert_eq!(pgid, child.pid);
        // SIGPIPE (bit 13) is not ignored in the child although this test process ignores it.
        let ignored =
            u64::from_str_radix(lines.next().unwrap().split_whitespace().nth(1).unwrap(), 16);
        assert_eq!(ignored.unwrap() & (1 << (libc::SIGPIPE - 1)), 0);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_child_dies_with_the_thread_that_started_it() {
        use std::os::unix::process::ExitStatusExt;
        let args = ["30".to_string()];
        let pid = std::thread::spawn(move || spawn(&spec("sleep", &args)).unwrap().pid)
            .join()
            .unwrap();
        // The thread has ended without waiting: the parent-death signal ends the child.
        assert_eq!(wait(pid).unwrap().signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn a_program_that_cannot_run_or_a_missing_directory_is_an_error() {
        let err = spawn(&spec("/nonexistent/handler", &[])).err().unwrap();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        let err = spawn(&spec("no-such-program-anywhere", &[])).err().unwrap();
        assert_eq!(
            err.to_string(),
            r#"no executable "no-such-program-anywhere" in PATH "/usr/bin:/bin""#
        );
        let mut bad_cwd = spec("true", &[]);
        bad_cwd.cwd = Path::new("/nonexistent");
        let err = spawn(&bad_cwd).err().unwrap();
        assert!(
            err.to_string()
                .starts_with("cannot enter the workdir /nonexistent: "),
            "{err}"
        );
    }

    #[test]
    fn only_the_kept_descriptor_is_inherited() {
        let (keep_read, keep_write) = crate::sys::pipe::pipe().unwrap();
        let (_other_read, other_write) = crate::sys::pipe::pipe().unwrap();
        use std::os::fd::AsRawFd;
        let (kept, other) = (keep_write.as_raw_fd(), other_write.as_raw_fd());
        // Through /proc: `sh` may not take a descriptor above 9 in a redirection.
        let script = format!(
            "echo kept > /proc/self/fd/{kept}; \
             (echo other > /proc/self/fd/{other}) 2>/dev/null || echo closed"
        );
        let args = ["-c".to_string(), script];
        let mut with_keep = spec("sh", &args);
        with_keep.keep = Some(kept);
        let mut child = spawn(&with_keep).unwrap();
        // SAFETY: reads the flags of a descriptor we own; no pointer.
        let flags = unsafe { libc::fcntl(kept, libc::F_GETFD) };
        assert_eq!(
            flags & libc::FD_CLOEXEC,
            libc::FD_CLOEXEC,
            "cleared in the child only"
        );
        drop(keep_write);
        let mut out = String::new();
        child.stdout.read_to_string(&mut out).unwrap();
        assert_eq!(wait(child.pid).unwrap().code(), Some(0));
        assert_eq!(out, "closed\n");
        let mut kept_text = String::new();
        File::from(keep_read)
            .read_to_string(&mut kept_text)
            .unwrap();
        assert_eq!(kept_text, "kept\n");
    }
}
