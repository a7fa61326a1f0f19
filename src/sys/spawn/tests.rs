use super::*;

#[cfg(target_os = "linux")]
mod kept;
#[cfg(target_os = "linux")]
use std::io::BufRead;
use std::io::{Read, Write};

fn spec<'a>(program: &'a str, args: &[String]) -> Spec<'a> {
    Spec {
        program: OsStr::new(program),
        args: args.iter().map(OsString::from).collect(),
        env: Environment::of(vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("X".into(), "y".into()),
        ]),
        cwd: Path::new("/"),
        keep: Vec::new(),
        user: None,
    }
}

/// Spawn `spec` under a subreaper of a pool of its own (ended once its task is: the pool goes
/// with the task's `Shim`).
fn spawn_plain(spec: &Spec<'_>) -> io::Result<Spawned> {
    spawn(spec, None, &Subreapers::default())
}

/// Spawn `spec` and reap it: its exit status, or why it did not start (said at the reap: on
/// Linux the spawn returns before the handler's exec).
fn run_plain(spec: &Spec<'_>) -> io::Result<std::process::ExitStatus> {
    spawn_plain(spec).and_then(|mut child| child.shim.reap())
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
    let err = run_plain(&spec("/nonexistent/handler", &[])).err().unwrap();
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    #[cfg(target_os = "linux")]
    assert_eq!(
        io::Error::last_os_error().raw_os_error(),
        Some(4242),
        "the failed exec (on this thread's TLS) wrote no errno"
    );
    let err = run_plain(&spec("no-such-program-anywhere", &[]))
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        r#"no executable "no-such-program-anywhere" in PATH "/usr/bin:/bin""#
    );
    let mut bad_cwd = spec("true", &[]);
    bad_cwd.cwd = Path::new("/nonexistent");
    let err = run_plain(&bad_cwd).err().unwrap();
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
        let mut child = spawn(&spec("sh", &args), landlock, &Subreapers::default()).unwrap();
        let mut out = String::new();
        child.stdout.read_to_string(&mut out).unwrap();
        assert_eq!(child.shim.reap().unwrap().code(), Some(0));
        out
    };
    assert_eq!(run(None), "0\n", "readable without the ruleset");
    assert_eq!(run(Some(ruleset.raw_fd())), "1\n", "refused within it");
}

#[cfg(target_os = "linux")]
#[test]
fn a_child_given_a_user_runs_as_it_with_no_other_group() {
    if crate::sys::proc::euid() != 0 {
        eprintln!("*** SKIPPED: not root: only root runs a child as another user ***");
        return;
    }
    let mut spec = spec("sh", &sh("id -u; id -g; id -G; grep -c . /proc/1/environ"));
    spec.user = Some(crate::sys::user::Becomes {
        ids: crate::sys::user::Ids {
            uid: 65534,
            gid: 65534,
        },
        keeps: 0,
    });
    let mut child = spawn(&spec, None, &Subreapers::default()).unwrap();
    let mut out = String::new();
    child.stdout.read_to_string(&mut out).unwrap();
    let _ = child.shim.reap();
    // pid 1's environ is root's: refused, so grep prints nothing on stdout.
    assert_eq!(out, "65534\n65534\n65534\n", "{out}");
}

#[cfg(target_os = "linux")]
#[test]
fn a_child_keeping_file_access_reads_roots_files_but_no_roots_process() {
    if crate::sys::proc::euid() != 0 {
        eprintln!("*** SKIPPED: not root: only root runs a child as another user ***");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("mur-keeps-{}", std::process::id()));
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let secret = dir.join("secret");
    std::fs::write(&secret, "root's\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let script = format!(
        "id -u; grep CapEff /proc/self/status; cat {}; \
         cat /proc/1/environ >/dev/null 2>&1 || echo environ refused; \
         kill -0 1 2>/dev/null || echo signal refused",
        secret.display()
    );
    let mut spec = spec("sh", &sh(&script));
    spec.user = Some(crate::sys::user::Becomes {
        ids: crate::sys::user::Ids {
            uid: 65534,
            gid: 65534,
        },
        keeps: crate::sys::user::FILE_ACCESS,
    });
    let mut child = spawn(&spec, None, &Subreapers::default()).unwrap();
    let mut out = String::new();
    child.stdout.read_to_string(&mut out).unwrap();
    let _ = child.shim.reap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        out, "65534\nCapEff:\t0000000000000006\nroot's\nenviron refused\nsignal refused\n",
        "{out}"
    );
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

/// The thread pointer of the calling thread (x86_64: the FS base; aarch64: `TPIDR_EL0`).
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn thread_pointer() -> usize {
    let mut pointer = 0usize;
    #[cfg(target_arch = "x86_64")]
    {
        const ARCH_GET_FS: usize = 0x1003;
        let args = [ARCH_GET_FS, (&raw mut pointer) as usize, 0, 0, 0, 0];
        // SAFETY: the kernel writes one word into a live local.
        let _ = unsafe { crate::sys::raw::call(libc::SYS_arch_prctl, args) };
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reads a register.
    unsafe {
        std::arch::asm!("mrs {}, tpidr_el0", out(reg) pointer)
    };
    pointer
}

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
#[test]
fn a_child_sharing_our_memory_has_no_thread_pointer() {
    use std::os::unix::process::ExitStatusExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    /// What the child saw, written through the argument (raw calls only, no thread-local).
    extern "C" fn report(seen: *mut libc::c_void) -> libc::c_int {
        // SAFETY: the parent's atomic, alive until the child is reaped.
        let seen = unsafe { &*seen.cast::<AtomicUsize>() };
        seen.store(thread_pointer(), Ordering::Release);
        0
    }
    assert_ne!(thread_pointer(), 0, "this thread has one");
    let seen = AtomicUsize::new(usize::MAX);
    let stack = stack::Stack::take().unwrap();
    let arg = (&raw const seen).cast_mut().cast();
    // SAFETY: the child runs `report` on its own stack and the atomic, both kept until it is
    // reaped below; it makes raw calls only.
    let cloned =
        unsafe { crate::sys::raw::clone(libc::CLONE_VM | libc::SIGCHLD, stack.top(), report, arg) };
    let status = wait(cloned.unwrap() as u32).unwrap();
    assert_eq!((status.code(), status.signal()), (Some(0), None));
    assert_eq!(
        seen.load(Ordering::Acquire),
        0,
        "a thread-local access in it would fault, not reach this thread's"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_subreaper_killed_while_it_starts_the_handler_fails_the_start_and_frees_nothing_in_use() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
    // A megabyte of environment: the handler's execve copies it from the plan, which keeps it
    // between its clone and the point where its subreaper is released, for long enough to be
    // caught there.
    let mut bulky = spec("true", &[]);
    for n in 0..8 {
        bulky.env.push(format!("BULK{n}"), "x".repeat(120_000));
    }
    let children = |tid: i32, pid: i32| -> Vec<i32> {
        std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    let mut killed_in_clone = 0;
    for _ in 0..200 {
        let done = Arc::new(AtomicBool::new(false));
        // The task's subreaper, once the spawn has said which (0 before).
        let target = Arc::new(AtomicI32::new(0));
        let killed = Arc::new(AtomicI32::new(0));
        let watcher = {
            let (done, target, killed) = (done.clone(), target.clone(), killed.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Acquire) {
                    let subreaper = target.load(Ordering::Acquire);
                    // Its handler, once cloned, is its child.
                    if subreaper > 0 && !children(subreaper, subreaper).is_empty() {
                        // An unreaped child of ours: the pid names nothing else.
                        let _ = crate::sys::raw::kill(subreaper, libc::SIGKILL);
                        killed.store(subreaper, Ordering::Release);
                        return;
                    }
                }
            })
        };
        // The spawn returns before the handler's start, which the reap then reports.
        let mut spawned = spawn_plain(&bulky).unwrap();
        target.store(spawned.shim.pid() as i32, Ordering::Release);
        let reaped = spawned.shim.reap();
        done.store(true, Ordering::Release);
        watcher.join().unwrap();
        match reaped {
            Err(err)
                if err.to_string() == "its subreaper was killed while it started the handler" =>
            {
                killed_in_clone += 1;
            }
            // Killed before or after the handler's clone: no status, or its own.
            Err(err) => assert_ne!(killed.load(Ordering::Acquire), 0, "{err}"),
            Ok(_) => {}
        }
        if killed_in_clone >= 3 {
            break;
        }
    }
    assert!(
        killed_in_clone > 0,
        "no kill landed inside the handler's clone in 200 tries"
    );
    // The frames and stacks those handlers may have used are leaked; spawning goes on.
    let mut child = spawn_plain(&spec("true", &[])).unwrap();
    assert_eq!(child.shim.reap().unwrap().code(), Some(0));
}

/// A program still open for writing when its handler starts (ETXTBSY: just written, its
/// writer's descriptor not yet closed) is started again until it is not: the subreaper tries
/// again, the handler's stdin kept whole for it; one that stays busy fails its start, saying so.
#[cfg(target_os = "linux")]
#[test]
fn a_handler_whose_program_is_busy_being_written_is_started_once_it_is_not() {
    let dir = crate::scratch::Scratch::new("spawn-busy");
    let script = dir.join("handler");
    let mut writer = std::fs::File::create(&script).unwrap();
    writer
        .write_all(b"#!/bin/sh\nread -r line; echo \"got $line\"\n")
        .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let program = script.to_str().unwrap();
    let mut child = spawn_plain(&spec(program, &[])).unwrap();
    child.stdin.write_all(b"hi\n").unwrap();
    drop(child.stdin);
    std::thread::sleep(std::time::Duration::from_millis(50));
    drop(writer);
    let mut out = String::new();
    child.stdout.read_to_string(&mut out).unwrap();
    assert_eq!(child.shim.reap().unwrap().code(), Some(0));
    assert_eq!(out, "got hi\n");
    // Busy for longer than the retries last: the start fails, with the exec's own error.
    let _writer = std::fs::OpenOptions::new()
        .append(true)
        .open(&script)
        .unwrap();
    let err = run_plain(&spec(program, &[])).err().unwrap();
    assert_eq!(err.raw_os_error(), Some(libc::ETXTBSY), "{err}");
}
