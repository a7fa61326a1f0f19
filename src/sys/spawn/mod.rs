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
//! ([`crate::sys::raw`]); a handler's subreaper is one more such clone (`reaper.rs`).
//!
//! Elsewhere (macOS) this is `std::process::Command`, whose `posix_spawn` or fork is the only
//! way there; no parent-death signal or subreaper exists, and the handler's group is what is
//! signalled (`group.rs`).

#[cfg(target_os = "linux")]
mod exec;
#[cfg(not(target_os = "linux"))]
mod group;
#[cfg(target_os = "linux")]
mod reaper;
mod shim;
#[cfg(target_os = "linux")]
mod stack;

#[cfg(not(target_os = "linux"))]
pub use group::Shim;
#[cfg(target_os = "linux")]
pub use shim::Shim;
pub use shim::{Ask, Remote};

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::path::Path;
use std::process::ExitStatus;

use super::pidref::PidRef;

/// What to start. The environment is given whole: nothing is inherited that is not in it.
pub struct Spec<'a> {
    /// Run as given when it holds a `/`, else looked up in the `PATH` of `env` (as `execvp`).
    pub program: &'a OsStr,
    /// Arguments after the program's name (which is `program`, as given).
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub cwd: &'a Path,
    /// Descriptors (close-on-exec, as all of ours are) the child alone inherits under their
    /// numbers, at most four: the flag is cleared in the child between clone and exec.
    pub keep: Vec<RawFd>,
}

/// A started handler: what answers for its processes, and our ends of its stdio.
pub struct Spawned {
    pub shim: Shim,
    pub stdin: File,
    pub stdout: File,
    pub stderr: File,
}

/// Start `spec` as a handler, leading its own process group, under its own subreaper where there
/// is one, in a Landlock domain of `landlock` (a ruleset's descriptor) when given. Returns once
/// it has been exec'd; reap it with [`Shim::reap`].
pub fn spawn(spec: &Spec<'_>, landlock: Option<RawFd>) -> io::Result<Spawned> {
    let pipe = || super::pipe::pipe().map_err(io::Error::other);
    let (stdin_read, stdin_write) = pipe()?;
    let (stdout_read, stdout_write) = pipe()?;
    let (stderr_read, stderr_write) = pipe()?;
    let shim = start(spec, [stdin_read, stdout_write, stderr_write], landlock)?;
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
fn resolve(program: &OsStr, env: &[(OsString, OsString)]) -> io::Result<OsString> {
    use std::os::unix::ffi::OsStrExt;
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
    exec::Exec::new(path, argv, &spec.env, cwd, stdio, &spec.keep)
}

#[cfg(target_os = "linux")]
fn start(spec: &Spec<'_>, stdio: [OwnedFd; 3], landlock: Option<RawFd>) -> io::Result<Shim> {
    use std::os::fd::AsRawFd;
    let mut exec = plan(spec, stdio.each_ref().map(AsRawFd::as_raw_fd))?;
    exec.landlock = landlock.unwrap_or(-1);
    // The subreaper is cloned with a copy of this descriptor table; ours close after.
    let shim = shim::start(exec, spec.cwd);
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
    let stack = stack::Stack::map()?;
    let arg = (&raw const exec).cast_mut().cast();
    let old = super::raw::set_signal_mask(super::raw::ALL_SIGNALS)
        .map_err(io::Error::from_raw_os_error)?;
    let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
    // SAFETY: `exec::child` makes raw calls only, on its guarded stack and the plan, both of
    // which live on this frame until the clone returns — after the child's exec or exit, as
    // CLONE_VFORK holds this thread until then.
    let cloned = unsafe { super::raw::clone(flags, stack.top(), exec::child, arg) };
    let _ = super::raw::set_signal_mask(old);
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
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
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
fn start(spec: &Spec<'_>, stdio: [OwnedFd; 3], _landlock: Option<RawFd>) -> io::Result<Shim> {
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
mod tests {
    use super::*;
    #[cfg(target_os = "linux")]
    use std::io::BufRead;
    use std::io::{Read, Write};

    fn spec<'a>(program: &'a str, args: &[String]) -> Spec<'a> {
        Spec {
            program: OsStr::new(program),
            args: args.iter().map(OsString::from).collect(),
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("X".into(), "y".into()),
            ],
            cwd: Path::new("/"),
            keep: Vec::new(),
        }
    }

    fn spawn_plain(spec: &Spec<'_>) -> io::Result<Spawned> {
        spawn(spec, None)
    }

    fn sh(script: &str) -> [String; 2] {
        ["-c".to_string(), script.to_string()]
    }

    /// How many processes have `marker` in their command line.
    #[cfg(target_os = "linux")]
    fn alive_with(marker: &str) -> usize {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
            .filter(|cmdline| String::from_utf8_lossy(cmdline).contains(marker))
            .count()
    }

    /// A `sleep` argument no other process has: seconds, a fraction unique to this test run.
    #[cfg(target_os = "linux")]
    fn marker(seconds: u32) -> String {
        format!("{seconds}.{}{}", std::process::id(), line!())
    }

    #[test]
    fn a_child_reads_its_stdin_writes_its_stdout_and_sees_only_its_environment() {
        let args = sh("cat; echo \"$X $HOME\" >&2; pwd; exit 3");
        let mut child = spawn_plain(&spec("sh", &args)).unwrap();
        child.stdin.write_all(b"in\n").unwrap();
        drop(child.stdin);
        let (mut out, mut err) = (String::new(), String::new());
        child.stdout.read_to_string(&mut out).unwrap();
        child.stderr.read_to_string(&mut err).unwrap();
        assert_eq!(out, "in\n/\n");
        assert_eq!(err, "y \n", "X set, HOME not inherited");
        assert_eq!(child.shim.reap().unwrap().code(), Some(3));
    }

    #[test]
    fn a_child_leads_its_own_group_with_default_signals_none_blocked() {
        // Read by the shell's builtins, so no fork of its own (which blocks signals around it)
        // is under way while its status is read.
        let args = sh(
            "echo $$; read -r a b c d pgid rest < /proc/$$/stat; echo $pgid; \
             while read -r k v; do case $k in SigBlk:|SigIgn:) echo $v;; esac; done < /proc/$$/status",
        );
        let mut child = spawn_plain(&spec("sh", &args)).unwrap();
        let mut out = String::new();
        child.stdout.read_to_string(&mut out).unwrap();
        assert_eq!(child.shim.reap().unwrap().code(), Some(0));
        let mut lines = out.lines();
        let pid = lines.next().unwrap();
        assert_eq!(lines.next().unwrap(), pid, "its pgid is its pid");
        let mut mask = || u64::from_str_radix(lines.next().unwrap(), 16).unwrap();
        // The spawn blocks every signal around its clones; the handler gets none blocked.
        assert_eq!(mask(), 0, "SigBlk");
        // SIGPIPE (bit 13) is not ignored in the child although this test process ignores it.
        assert_eq!(mask() & (1 << (libc::SIGPIPE - 1)), 0, "SigIgn");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn what_a_handler_leaves_running_at_any_depth_is_gone_when_it_is_reaped() {
        let (deep, side) = (marker(301), marker(302));
        // A setsid'd chain three deep, a double fork, and the handler exits at once.
        let script = format!(
            "setsid sh -c 'setsid sh -c \"setsid sleep {deep} & sleep {deep}\" & sleep {deep}' &
             (sleep {side} &)
             while [ $(grep -l {deep} /proc/[0-9]*/cmdline 2>/dev/null | wc -l) -lt 3 ]; do sleep 0.01; done
             echo ready"
        );
        let args = sh(&script);
        let mut child = spawn_plain(&spec("sh", &args)).unwrap();
        let mut ready = String::new();
        std::io::BufReader::new(&mut child.stdout)
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(ready, "ready\n");
        assert_eq!(child.shim.reap().unwrap().code(), Some(0));
        assert_eq!(alive_with(&deep), 0, "the setsid chain");
        assert_eq!(alive_with(&side), 0, "the double fork");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_remote_terminates_the_group_then_kills_the_tree() {
        let hidden = marker(303);
        let script = format!(
            "setsid sleep {hidden} & trap 'echo term; exit 7' TERM; echo ready;
             while :; do sleep 0.01; done"
        );
        let args = sh(&script);
        let mut child = spawn_plain(&spec("sh", &args)).unwrap();
        let mut reader = std::io::BufReader::new(&mut child.stdout);
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n");
        let remote = child.shim.remote();
        remote.terminate();
        line.clear();
        reader.read_line(&mut line).unwrap();
        assert_eq!(line, "term\n");
        assert_eq!(child.shim.reap().unwrap().code(), Some(7));
        assert_eq!(alive_with(&hidden), 0, "killed once the handler ended");
        // After the end a remote reaches nothing, and says nothing.
        remote.kill();

        let stubborn = marker(304);
        let script =
            format!("trap '' TERM; setsid sleep {stubborn} & echo ready; exec sleep {stubborn}");
        let args = sh(&script);
        let mut child = spawn_plain(&spec("sh", &args)).unwrap();
        let mut line = String::new();
        std::io::BufReader::new(&mut child.stdout)
            .read_line(&mut line)
            .unwrap();
        child.shim.remote().kill();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.shim.reap().unwrap().signal(), Some(libc::SIGKILL));
        assert_eq!(alive_with(&stubborn), 0);
    }

    #[test]
    fn a_program_that_cannot_run_or_a_missing_directory_is_an_error() {
        #[cfg(target_os = "linux")]
        // SAFETY: an integer write through libc's own errno location for this thread.
        unsafe {
            *libc::__errno_location() = 4242
        };
        let err = spawn_plain(&spec("/nonexistent/handler", &[]))
            .err()
            .unwrap();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        #[cfg(target_os = "linux")]
        assert_eq!(
            io::Error::last_os_error().raw_os_error(),
            Some(4242),
            "the failed exec (on this thread's TLS) wrote no errno"
        );
        let err = spawn_plain(&spec("no-such-program-anywhere", &[]))
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            r#"no executable "no-such-program-anywhere" in PATH "/usr/bin:/bin""#
        );
        let mut bad_cwd = spec("true", &[]);
        bad_cwd.cwd = Path::new("/nonexistent");
        let err = spawn_plain(&bad_cwd).err().unwrap();
        assert!(
            err.to_string()
                .starts_with("cannot enter the workdir /nonexistent: "),
            "{err}"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_child_given_a_ruleset_reaches_only_what_it_allows() {
        use crate::sys::landlock::{self, Held, Ruleset};
        let Ok(abi) = landlock::abi() else {
            eprintln!("*** SKIPPED: no Landlock in this kernel ***");
            return;
        };
        let ruleset = Ruleset::new(abi, false).unwrap();
        for dir in ["/usr", "/bin", "/lib", "/lib64"] {
            if let Some(held) = Held::open(Path::new(dir), true).unwrap() {
                ruleset.allow(&held, landlock::READ_EXEC).unwrap();
            }
        }
        let null = Held::open(Path::new("/dev/null"), true).unwrap().unwrap();
        ruleset.allow(&null, landlock::ALL).unwrap();
        let args = sh("cat /etc/hostname >/dev/null 2>&1; echo $?");
        let run = |landlock| {
            let mut child = spawn(&spec("sh", &args), landlock).unwrap();
            let mut out = String::new();
            child.stdout.read_to_string(&mut out).unwrap();
            assert_eq!(child.shim.reap().unwrap().code(), Some(0));
            out
        };
        assert_eq!(run(None), "0\n", "readable without the ruleset");
        assert_eq!(run(Some(ruleset.raw_fd())), "1\n", "refused within it");
    }

    #[test]
    fn only_the_kept_descriptor_is_inherited() {
        let (keep_read, keep_write) = crate::sys::pipe::pipe().unwrap();
        let (_other_read, other_write) = crate::sys::pipe::pipe().unwrap();
        use std::os::fd::AsRawFd;
        let (kept, other) = (keep_write.as_raw_fd(), other_write.as_raw_fd());
        // Through /proc: `sh` may not take a descriptor above 9 in a redirection. Nothing else
        // above 2 is open in the handler: not the subreaper's control socket, not its signalfd.
        // (Listed by `ls` of the shell's descriptors while the shell itself waits for it,
        // holding nothing else open: no pipeline, no command substitution.)
        let script = format!(
            "echo kept > /proc/self/fd/{kept}; \
             (echo other > /proc/self/fd/{other}) 2>/dev/null || echo closed; \
             ls -l /proc/$$/fd"
        );
        let args = sh(&script);
        let mut with_keep = spec("sh", &args);
        with_keep.keep = vec![kept];
        let mut child = spawn_plain(&with_keep).unwrap();
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
        assert_eq!(child.shim.reap().unwrap().code(), Some(0));
        let mut fds: Vec<i32> = out
            .lines()
            .filter_map(|line| line.split_once(" -> ")?.0.rsplit(' ').next()?.parse().ok())
            .collect();
        fds.sort_unstable();
        assert_eq!(
            (out.lines().next(), fds),
            (Some("closed"), vec![0, 1, 2, kept])
        );
        let mut kept_text = String::new();
        File::from(keep_read)
            .read_to_string(&mut kept_text)
            .unwrap();
        assert_eq!(kept_text, "kept\n");
    }
}
