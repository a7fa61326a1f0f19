//! Starting processes, on one path: a handler, in its own process group under a subreaper of
//! its own ([`Shim`]) that answers for everything it starts and ends it all with the task; and
//! a child its starter supervises itself ([`spawn_child`]: a formation member).
//!
//! Why not `std::process::Command`: the parent-death signal (`PR_SET_PDEATHSIG`) and the
//! inherited descriptors have to be set in the child, and any `pre_exec` makes std `fork` the
//! whole process — page tables and all, with a copy-on-write fault for every page either side
//! touches before the child execs: about a quarter of a millisecond per task on a session, 14%
//! of a formation launcher's time. Here every child is a `clone` sharing mur's memory
//! (`CLONE_VM`), the one that execs with `CLONE_VFORK` as `posix_spawn` does inside glibc and
//! musl (`exec.rs`), on a guarded stack of its own (`stack.rs`), making raw system calls only
//! ([`crate::sys::raw`]); a handler's subreaper is one more such clone (`reaper.rs`), kept for
//! later tasks and told each over its control socket (`ctl.rs`).
//!
//! Elsewhere (macOS) this is `std::process::Command`, whose `posix_spawn` or fork is the only
//! way there; no parent-death signal or subreaper exists, and the handler's group is what is
//! signalled (`group.rs`).

#[cfg(target_os = "linux")]
mod ctl;
mod environ;
#[cfg(target_os = "linux")]
mod exec;
#[cfg(not(target_os = "linux"))]
mod group;
#[cfg(target_os = "linux")]
mod reaper;
mod shim;
#[cfg(target_os = "linux")]
mod stack;

pub use environ::{Environment, Inherited};
#[cfg(not(target_os = "linux"))]
pub use group::Shim;
pub use shim::{Ask, Remote};
#[cfg(target_os = "linux")]
pub use shim::{Shim, Subreapers};

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::path::Path;
use std::process::ExitStatus;

use super::pidref::PidRef;

/// Where there is no subreaper, none is kept for later tasks.
#[cfg(not(target_os = "linux"))]
#[derive(Clone, Default)]
pub struct Subreapers {
    _none: (),
}

#[cfg(not(target_os = "linux"))]
impl Subreapers {
    pub fn retire_idle(&self) {}
}

/// What to start. The environment is given whole: nothing is inherited that is not in it.
pub struct Spec<'a> {
    /// Run as given when it holds a `/`, else looked up in the `PATH` of `env` (as `execvp`).
    pub program: &'a OsStr,
    /// Arguments after the program's name (which is `program`, as given).
    pub args: Vec<OsString>,
    pub env: Environment,
    pub cwd: &'a Path,
    /// Descriptors (close-on-exec, as all of ours are) the child alone inherits under their
    /// numbers, at most four: the flag is cleared in the child between clone and exec.
    pub keep: Vec<RawFd>,
    /// Whom it runs as, when not as mur ([`crate::sys::user::assume`], in the child).
    pub user: Option<crate::sys::user::Becomes>,
}

/// How a started handler ended, once what answers for it is reaped ([`Shim::end`]).
#[derive(Debug)]
pub enum Ended {
    /// It ran — its exec succeeded — and exited so.
    Exited(ExitStatus),
    /// It never ran: its exec, or a step before it, failed so (on Linux the start is known only
    /// then: [`spawn`] does not wait for it).
    NotStarted(io::Error),
}

/// A started handler: what answers for its processes, and our ends of its stdio.
pub struct Spawned {
    pub shim: Shim,
    pub stdin: File,
    pub stdout: File,
    pub stderr: File,
}

/// Start `spec` as a handler, leading its own process group, under a subreaper of its own where
/// there is one — one of `pool`'s, kept from an earlier task, or a new one that goes to `pool`
/// once the task is done — in a Landlock domain of `landlock` (a ruleset's descriptor) when
/// given. On Linux it returns once the subreaper has the task, before the handler's exec: its
/// stdin may be written at once, and whether it ran is said when it ends ([`Shim::end`]).
pub fn spawn(spec: &Spec<'_>, landlock: Option<RawFd>, pool: &Subreapers) -> io::Result<Spawned> {
    let pipe = || super::pipe::pipe().map_err(io::Error::other);
    let (stdin_read, stdin_write) = pipe()?;
    let (stdout_read, stdout_write) = pipe()?;
    let (stderr_read, stderr_write) = pipe()?;
    let shim = start(
        spec,
        [stdin_read, stdout_write, stderr_write],
        landlock,
        pool,
    )?;
    Ok(Spawned {
        shim,
        stdin: stdin_write.into(),
        stdout: stdout_read.into(),
        stderr: stderr_read.into(),
    })
}

/// A child [`spawn_child`] started: held by its pid (and pidfd), and our end of its stdout.
pub struct Child {
    pub held: PidRef,
    pub stdout: File,
}

/// Start `spec` as a child its starter supervises itself: no subreaper, no parent-death signal;
/// stdin `/dev/null`, stdout a pipe (our end returned), stderr ours; leading a process group of
/// its own when `own_group`, else in ours. Returns once it has been exec'd; reap it with
/// [`wait`].
pub fn spawn_child(spec: &Spec<'_>, own_group: bool) -> io::Result<Child> {
    let null = File::open("/dev/null")?;
    let (stdout_read, stdout_write) = super::pipe::pipe().map_err(io::Error::other)?;
    let pid = start_child(spec, [null.into(), stdout_write], own_group)?;
    Ok(Child {
        held: PidRef::child(pid),
        stdout: stdout_read.into(),
    })
}

/// Wait for our child `pid` to exit, and reap it (`EINTR` retried).
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
/// file of that name in `PATH` (from the child's environment; `/usr/bin:/bin` without one), by
/// [`super::fs::find_on_path`]'s rule (absolute entries only).
fn resolve(program: &OsStr, env: &Environment) -> io::Result<OsString> {
    use std::os::unix::ffi::OsStrExt;
    if program.as_bytes().contains(&b'/') {
        return Ok(program.to_os_string());
    }
    if program.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }
    let path = env
        .get("PATH")
        .map_or_else(|| OsString::from("/usr/bin:/bin"), OsStr::to_os_string);
    super::fs::find_on_path(program, &path)
        .map(std::path::PathBuf::into_os_string)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no executable {:?} in PATH {:?}", program, path),
            )
        })
}

/// The program's resolved path and its whole argv (its name first, as given).
fn command_line(spec: &Spec<'_>) -> io::Result<(OsString, Vec<OsString>)> {
    let path = resolve(spec.program, &spec.env)?;
    let argv = std::iter::once(spec.program.to_os_string())
        .chain(spec.args.iter().cloned())
        .collect();
    Ok((path, argv))
}

#[cfg(target_os = "linux")]
fn plan(spec: &Spec<'_>, stdio: [RawFd; 3]) -> io::Result<exec::Exec> {
    let (path, argv) = command_line(spec)?;
    let cwd = spec.cwd.as_os_str().to_os_string();
    let mut exec = exec::Exec::new(path, argv, &spec.env, cwd, stdio, &spec.keep)?;
    exec.user = spec.user;
    Ok(exec)
}

#[cfg(target_os = "linux")]
fn start(
    spec: &Spec<'_>,
    stdio: [OwnedFd; 3],
    landlock: Option<RawFd>,
    pool: &Subreapers,
) -> io::Result<Shim> {
    use std::os::fd::AsRawFd;
    let mut exec = plan(spec, stdio.each_ref().map(AsRawFd::as_raw_fd))?;
    exec.landlock = landlock.unwrap_or(-1);
    // The subreaper is sent copies of these descriptors; ours close after.
    let shim = shim::start(exec, spec.cwd, pool);
    drop(stdio);
    shim
}

/// Clone the child from this thread (`CLONE_VM | CLONE_VFORK`: this thread sleeps until its
/// exec) on a guarded stack, every signal blocked meanwhile; stderr is ours, fd 2.
#[cfg(target_os = "linux")]
fn start_child(spec: &Spec<'_>, stdio: [OwnedFd; 2], own_group: bool) -> io::Result<u32> {
    use std::os::fd::AsRawFd;
    let [stdin, stdout] = stdio.each_ref().map(AsRawFd::as_raw_fd);
    let mut exec = plan(spec, [stdin, stdout, 2])?;
    exec.own_group = own_group;
    exec.reset_signals = true;
    let stack = stack::Stack::take()?;
    let launch = exec::Launch {
        plan: &exec,
        fds: exec.fds(),
    };
    let arg = (&raw const launch).cast_mut().cast();
    let old = super::raw::set_signal_mask(super::raw::ALL_SIGNALS)
        .map_err(io::Error::from_raw_os_error)?;
    let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
    // SAFETY: `exec::child` makes raw calls only, with no thread pointer, on its guarded stack
    // and the launch and plan, which live on this thread's stack frame until the clone returns —
    // after the child's exec or exit, as CLONE_VFORK holds this thread until then (a wait only a
    // fatal signal ends, and that ends the whole session, freeing nothing under the child).
    let cloned = unsafe { super::raw::clone(flags, stack.top(), exec::child, arg) };
    let _ = super::raw::set_signal_mask(old);
    // The child has exec'd or exited: nothing runs on its stack now.
    stack.give_back();
    drop(stdio);
    let pid = cloned.map_err(io::Error::from_raw_os_error)? as u32;
    if let Err(err) = exec.outcome(spec.cwd) {
        // It exited 127 before its exec: reap it, it names nothing else.
        let _ = wait(pid);
        return Err(err);
    }
    Ok(pid)
}

/// `spec` as a `std::process::Command`, its stdio set and its descriptors kept.
#[cfg(not(target_os = "linux"))]
fn command(spec: &Spec<'_>, stdio: [std::process::Stdio; 3]) -> io::Result<std::process::Command> {
    use std::os::unix::process::CommandExt;
    let (path, argv) = command_line(spec)?;
    let [stdin, stdout, stderr] = stdio;
    let mut command = std::process::Command::new(path);
    command
        .arg0(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .envs(spec.env.pairs())
        .current_dir(spec.cwd)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr);
    if !spec.keep.is_empty() {
        super::pipe::keep_open_in_child(&mut command, spec.keep.clone());
    }
    Ok(command)
}

/// No Landlock here: a ruleset cannot have been made ([`crate::sys::landlock`] is Linux's).
#[cfg(not(target_os = "linux"))]
fn start(
    spec: &Spec<'_>,
    stdio: [OwnedFd; 3],
    _landlock: Option<RawFd>,
    _pool: &Subreapers,
) -> io::Result<Shim> {
    group::start(command(spec, stdio.map(Into::into))?)
}

#[cfg(not(target_os = "linux"))]
fn start_child(spec: &Spec<'_>, stdio: [OwnedFd; 2], own_group: bool) -> io::Result<u32> {
    use std::os::unix::process::CommandExt;
    let [stdin, stdout] = stdio;
    let mut command = command(
        spec,
        [stdin.into(), stdout.into(), std::process::Stdio::inherit()],
    )?;
    if own_group {
        command.process_group(0);
    }
    // The child is reaped by pid ([`wait`]): dropping std's handle neither waits nor kills.
    Ok(command.spawn()?.id())
}

#[cfg(test)]
mod tests;
