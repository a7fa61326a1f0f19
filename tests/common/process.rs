//! Processes: `/proc` readers, liveness and zombie checks, processes the test owns, handler
//! scripts that record their process group, and the formation lifeline pipe.

use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::run::{still_running, wait_child};
use super::wait::{WAIT, wait_for};

// ---------------------------------------------------------------------------------------------
// /proc readers
// ---------------------------------------------------------------------------------------------

/// `/proc/<pid>/stat` split after the last `)`: `[state, ppid, …]` (field 3 onwards).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Field 22 of `/proc/<pid>/stat` (the start time in clock ticks), as `mur` reads it.
pub fn start_token(pid: u32) -> Option<String> {
    stat_fields(pid)?.get(22 - 3).cloned()
}

/// The state letter of `/proc/<pid>/stat` (field 3), `None` when there is no such process.
pub fn proc_state(pid: u32) -> Option<char> {
    stat_fields(pid)?.first()?.chars().next()
}

/// `/proc/<pid>/comm`, without its newline.
pub fn comm(pid: u32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|c| c.trim_end().to_string())
}

/// A field of `/proc/<pid>/status` in kB (`VmHWM`, `VmRSS`) or as a count (`Threads`).
pub fn status_field(pid: u32, name: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

pub fn environ(pid: u32) -> Vec<u8> {
    fs::read(format!("/proc/{pid}/environ")).unwrap_or_default()
}

pub fn cmdline(pid: u32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

fn all_pids() -> Vec<u32> {
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Live processes (not this one) whose environment holds the entry `needle` (`KEY=value`).
pub fn processes_with_env(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    all_pids()
        .into_iter()
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            environ(pid)
                .split(|&b| b == 0)
                .any(|entry| entry == needle.as_bytes())
        })
        .filter(|&pid| alive(pid))
        .collect()
}

/// The children of `pid` (by the parent field of their stat).
pub fn children_of(pid: u32) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|&p| stat_fields(p).is_some_and(|f| f.get(1) == Some(&pid.to_string())))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Liveness
// ---------------------------------------------------------------------------------------------

/// Whether `pid` names a process that has not yet exited: `kill(pid, 0)` finds it and it is
/// not a zombie (nor dead).
pub fn alive(pid: u32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks; no pointers.
    let sent = unsafe { libc::kill(pid as libc::pid_t, 0) };
    let found = sent == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    found && !matches!(proc_state(pid), None | Some('Z') | Some('X'))
}

/// Make this test process a child subreaper: orphans of the processes it starts are reparented
/// to it, so a test can see them, time their exits and reap them.
///
/// The flag holds for the whole process and is never cleared, so only a test running in a
/// process of its own may set it ([`super::alone::own_process`]): in the shared process, every
/// other test's orphans would become this process's zombies, and a test reaping its orphans
/// could reap another test's child before that test waits on it.
pub fn become_subreaper() {
    assert!(
        super::alone::in_own_process(),
        "become_subreaper changes the whole test process: run the test alone::own_process first"
    );
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with integer arguments only.
        let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        assert_eq!(rc, 0, "cannot become a child subreaper");
    }
    #[cfg(not(target_os = "linux"))]
    panic!("no child subreaper on this system");
}

/// Gone: no such process, or a zombie nobody has reaped yet.
pub fn pid_dead(pid: u32) -> bool {
    !alive(pid)
}

/// Whether `kill(pid, 0)` says there is no such process at all.
pub fn esrch(pid: u32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks; no pointers.
    let found = unsafe { libc::kill(pid as libc::pid_t, 0) };
    found == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Wait until every pid is dead, then assert it (the message names `what` and the survivors).
#[track_caller]
pub fn assert_all_dead(pids: &[u32], within: Duration, what: &str) {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline && !pids.iter().all(|&p| pid_dead(p)) {
        thread::sleep(Duration::from_millis(5));
    }
    let alive: Vec<(u32, Option<char>)> = pids
        .iter()
        .filter(|&&p| !pid_dead(p))
        .map(|&p| (p, proc_state(p)))
        .collect();
    assert!(
        alive.is_empty(),
        "{what}: still alive after {within:?}: {alive:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Processes the test owns
// ---------------------------------------------------------------------------------------------

/// A process the test started; killed and reaped on drop if still there.
pub struct Proc {
    pub child: Child,
    status: Option<ExitStatus>,
}

impl Proc {
    /// Start `program ARGS…` with stdio closed.
    pub fn spawn(program: &str, args: &[&str]) -> Self {
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Self::from_command(command)
    }

    pub fn from_command(mut command: Command) -> Self {
        let child = command.spawn().expect("spawn a test process");
        Self {
            child,
            status: None,
        }
    }

    /// `sleep 1000`.
    pub fn sleeper() -> Self {
        Self::spawn("sleep", &["1000"])
    }

    /// `cat` reading a pipe the test holds: it exits 0 as soon as [`Proc::take_stdin`]'s handle
    /// is dropped.
    pub fn cat_on_pipe() -> Self {
        let mut command = Command::new("cat");
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Self::from_command(command)
    }

    pub fn take_stdin(&mut self) -> ChildStdin {
        self.child.stdin.take().expect("spawned with a piped stdin")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process's start time as `mur` reads it.
    pub fn start(&self) -> String {
        start_token(self.pid()).expect("read the start time of a test process")
    }

    /// Whether the process is still running: not reaped, not a zombie (reaps it if it exited).
    pub fn alive(&mut self) -> bool {
        still_running(&mut self.child, &mut self.status) && proc_state(self.pid()) != Some('Z')
    }

    /// Whether the process has exited (zombie, not reaped yet), without reaping it.
    pub fn is_zombie(&self) -> bool {
        proc_state(self.pid()) == Some('Z')
    }

    /// How it ended, if it has.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        self.alive();
        self.status
    }

    /// Wait for the process to end (under `within`) and reap it.
    #[track_caller]
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        if let Some(status) = self.status {
            return status;
        }
        let status = wait_child(&mut self.child, within)
            .unwrap_or_else(|| panic!("pid {} did not exit within {within:?}", self.pid()));
        self.status = Some(status);
        status
    }

    /// SIGKILL and reap it, unless it has already been reaped.
    pub fn kill(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
    }

    /// Whether the process ignores `signal` (`SigIgn` in `/proc/<pid>/status`).
    pub fn ignores(&self, signal: i32) -> bool {
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|line| line.strip_prefix("SigIgn:"))
            .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
            .is_some_and(|mask| mask & (1 << (signal - 1)) != 0)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A process that has exited and been reaped: its pid names nothing (for now).
pub fn exited_pid() -> (u32, String) {
    let mut p = Proc::sleeper();
    let pid = p.pid();
    let start = p.start();
    p.child.kill().unwrap();
    p.wait_exit(Duration::from_secs(10));
    (pid, start)
}

/// Make a FIFO at `path`.
pub fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

// ---------------------------------------------------------------------------------------------
// Handler process groups
// ---------------------------------------------------------------------------------------------

/// The pids a handler wrote to `path` (one a line) once it holds `count` of them.
pub fn read_pids(path: &Path, count: usize) -> Vec<u32> {
    wait_for(
        WAIT,
        &format!("{} to hold {count} pids", path.display()),
        || {
            let text = fs::read_to_string(path).ok()?;
            let pids: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
            (pids.len() >= count).then_some(pids)
        },
    )
}

/// A handler script that starts two background children and records three pids in
/// `<dir>/pids` (the file appears whole, renamed into place), then waits forever:
/// its own (`$$`, the group leader, which takes 0.5 s to exit after a SIGTERM); a child that
/// ignores SIGTERM, so only a SIGKILL to the group ends it; and a child that, on SIGTERM, writes
/// `<dir>/termed` and exits — proof the whole group was asked to end before it was killed.
pub fn group_script(dir: &Path) -> String {
    format!(
        "#!/bin/sh\n\
         exec < /dev/null\n\
         trap 'sleep 0.5; exit 143' TERM\n\
         echo $$ > '{dir}/pids.tmp'\n\
         sh -c 'trap \"\" TERM; exec sleep 120' &\n\
         echo $! >> '{dir}/pids.tmp'\n\
         sh -c 'trap \"echo term > {dir}/termed; exit 0\" TERM; while :; do sleep 0.05; done' &\n\
         echo $! >> '{dir}/pids.tmp'\n\
         mv '{dir}/pids.tmp' '{dir}/pids'\n\
         wait\n\
         sleep 120\n",
        dir = dir.display()
    )
}

/// Wait for the three pids [`group_script`] records, checking they are all running.
pub fn group_pids(dir: &Path) -> Vec<u32> {
    let pids = read_pids(&dir.join("pids"), 3);
    assert!(
        pids.iter().all(|&p| !pid_dead(p)),
        "the handler and its children run: {pids:?}"
    );
    pids
}

/// After the group of a [`group_script`] handler was ended: it got SIGTERM first (the trapping
/// child said so) and every process in it is gone (the SIGTERM-ignoring one needed a SIGKILL).
pub fn assert_group_ended(dir: &Path, pids: &[u32], what: &str) {
    assert_all_dead(pids, Duration::from_secs(5), what);
    assert!(
        dir.join("termed").exists(),
        "{what}: the group was not sent SIGTERM before SIGKILL"
    );
}

/// A lifeline pipe: the read end is inherited by the next spawn of the command it was attached
/// to (as `MURMUR_FORMATION_LIFELINE`) and by nothing else — both ends are close-on-exec here and
/// the child clears the flag on the read end only, between fork and exec.
pub struct Lifeline {
    read: Option<OwnedFd>,
    write: Option<OwnedFd>,
}

impl Lifeline {
    pub fn attach(command: &mut Command) -> Lifeline {
        let (read, write) = mur::sys::pipe::pipe().expect("lifeline pipe");
        let read_fd = read.as_raw_fd();
        command.env("MURMUR_FORMATION_LIFELINE", read_fd.to_string());
        use std::os::unix::process::CommandExt;
        // SAFETY: runs in the forked child before exec: one async-signal-safe fcntl on an
        // integer, no allocation.
        unsafe {
            command.pre_exec(move || {
                if libc::fcntl(read_fd, libc::F_SETFD, 0) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        Lifeline {
            read: Some(read),
            write: Some(write),
        }
    }

    /// After the spawn: close this process's copy of the read end, so EOF depends on the write
    /// end alone.
    pub fn spawned(&mut self) {
        self.read = None;
    }

    /// Close the write end: EOF on the child's lifeline.
    pub fn cut(&mut self) {
        self.write = None;
    }
}
