//! Whether a process may be signalled, and signalling it: the verdicts over the readings
//! `sys::proc` takes, and the one way `mur` signals a process it did not just spawn.
//!
//! The seed's rule is "re-verify layers 1 and 2, then `kill(2)`", which leaves a window of two
//! adjacent syscalls in which the pid could be reaped and handed to another process. A pidfd closes
//! it: the descriptor names one process for its whole life, never whoever holds the number later.
//! So [`Target::open`] opens the pidfd *first* and verifies the start time *second*; a start time
//! read after the open that matches the record proves the descriptor names the recorded process
//! (a pid is held continuously from fork to reap, and the recorded process started before the
//! open). Every later signal and wait goes through that descriptor.
//!
//! Where `pidfd_open(2)` does not exist (Linux < 5.3, macOS) the fallback is the seed's
//! check-then-kill, re-verified before every signal.
//!
//! And the one way mur ends a process, whatever it is ([`stop`]): asked, SIGTERM, SIGKILL,
//! each rung only while it is still there — for a recorded session, a formation's launcher and
//! a launcher's own members alike.

use std::time::{Duration, Instant};

use crate::sys::pidref::PidRef;
use crate::sys::proc::{self, Holder};
use crate::sys::signal as sys_signal;

/// Why a process may not be signalled, before any signal is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotSignallable {
    /// No process holds the pid, or the one holding it is not the recorded one.
    Gone(String),
    /// The pid is held, perhaps by the recorded process, and mur will not signal it: its start
    /// time could not be read, or the rules of whom mur signals forbid it. Never called gone:
    /// the record is kept.
    Refused(String),
}

/// What one signal did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// Delivered to the recorded process.
    Delivered,
    /// The process had gone by the time of the call; nothing was delivered, nothing needed to be.
    Gone,
    /// The kernel refused (`EPERM` and the like), or the process became unverifiable; the string
    /// says why.
    Refused(String),
}

/// One process, verified to be the one recorded as `pid` started at `start`, that may be
/// signalled and waited on.
pub struct Target {
    /// Pinned by a pidfd when the kernel gave one; without, every signal re-verifies first.
    held: PidRef,
    start: String,
}

/// Layers 1 and 2 as a verdict on signalling: `Ok` only for a live pid whose start time reads as
/// `start`, held by a process mur may signal at all ([`may_signal`]).
///
/// A recorded start of `""` (what a writer that could not read its own start time stores) never
/// matches a token the host reports.
pub fn check(pid: u32, start: &str) -> Result<(), NotSignallable> {
    identify(pid, start)?;
    may_signal(pid).map_err(NotSignallable::Refused)
}

/// Layers 1 and 2 alone: whether `pid` is held by the process that started at `start`, with no
/// word on whether mur may signal it ([`check`] adds that).
pub fn identify(pid: u32, start: &str) -> Result<(), NotSignallable> {
    match proc::holder(pid) {
        Holder::Gone => Err(NotSignallable::Gone(format!("no process holds pid {pid}"))),
        Holder::Started(token) if token == start => Ok(()),
        Holder::Started(_) => Err(NotSignallable::Gone(format!(
            "pid {pid} is held by a process that started at another time"
        ))),
        Holder::Unreadable => Err(NotSignallable::Refused(format!(
            "pid {pid}'s start time could not be read"
        ))),
    }
}

/// Whom mur may signal, whatever a record says (DESIGN.md §4): only a process whose real uid is
/// our effective uid — a capsule session is always its user's own process, so a record cannot
/// aim root's `mur stop` at another user's process — and never pid 1, a kernel thread, a thread
/// that is not its group's leader (a record naming a thread id would have the whole process
/// signalled), mur itself or one of its ancestors. The `Err` says which rule refused.
pub fn may_signal(pid: u32) -> Result<(), String> {
    if pid == 1 {
        return Err("pid 1 (init) is never signalled".into());
    }
    could_be_a_session(pid)?;
    if proc::self_and_ancestors().contains(&pid) {
        Err(format!("pid {pid} is this mur or one of its ancestors"))
    } else {
        Ok(())
    }
}

/// Whether `pid` could be a capsule session of ours at all: a process (not a kernel thread, not
/// a thread of another), whose real uid is our effective uid. What [`may_signal`] adds — never
/// pid 1, never this mur or an ancestor — is a rule about signalling, not about what the pid
/// is: pid 1 of a container, or the session whose handler runs this `mur`, is a live session.
pub fn could_be_a_session(pid: u32) -> Result<(), String> {
    let kind =
        proc::kind(pid).ok_or_else(|| format!("pid {pid}'s owner and kind could not be read"))?;
    let me = proc::euid();
    if kind.kernel_thread {
        Err(format!("pid {pid} is a kernel thread"))
    } else if kind.tgid != pid {
        Err(format!(
            "pid {pid} is a thread of process {}, not a process",
            kind.tgid
        ))
    } else if kind.ruid != me {
        Err(format!(
            "pid {pid} belongs to uid {}, not to uid {me}; mur signals only its own user's processes",
            kind.ruid
        ))
    } else {
        Ok(())
    }
}

impl Target {
    /// Pin the process recorded as (`pid`, `start`): open a pidfd where possible, then verify.
    pub fn open(pid: u32, start: &str) -> Result<Self, NotSignallable> {
        let held = match PidRef::open(pid) {
            Ok(held) => held,
            Err(err) if err.raw_os_error() == Some(libc::ESRCH) => {
                return Err(NotSignallable::Gone(format!("no process holds pid {pid}")));
            }
            // ENOENT (a thread id, not a process), EMFILE and the like: never a fall-back to
            // kill(2), which would reach whatever else the number names. The check says why
            // where it can (a thread is named as one).
            Err(err) => {
                check(pid, start)?;
                return Err(NotSignallable::Refused(format!(
                    "pid {pid} cannot be pinned (pidfd_open: {err})"
                )));
            }
        };
        check(pid, start)?;
        Ok(Self {
            held,
            start: start.to_string(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.held.pid()
    }

    fn gone(&self) -> bool {
        check(self.pid(), &self.start).is_err_and(|e| matches!(e, NotSignallable::Gone(_)))
    }
}

impl Stoppable for Target {
    /// Send `signal` to this process and no other: never its group, never a later holder of
    /// its pid.
    fn signal(&self, signal: libc::c_int) -> Sent {
        let result = match self.held.signal(signal) {
            Err(err) if err.raw_os_error() == Some(libc::ENOSYS) => {
                // Check-then-kill: the seed's window of two adjacent syscalls.
                match check(self.pid(), &self.start) {
                    Ok(()) => {}
                    Err(NotSignallable::Gone(_)) => return Sent::Gone,
                    Err(NotSignallable::Refused(why)) => return Sent::Refused(why),
                }
                sys_signal::kill(self.pid() as libc::pid_t, signal)
            }
            sent => sent,
        };
        sent(result)
    }

    /// Whether the process has exited (or become a zombie), waiting at most `timeout`.
    fn wait_gone(&self, timeout: Duration) -> bool {
        self.held.wait_exit(timeout, || self.gone())
    }
}

/// What a signal's result means for the one who sent it.
pub fn sent(result: std::io::Result<()>) -> Sent {
    match result {
        Ok(()) => Sent::Delivered,
        Err(err) if err.raw_os_error() == Some(libc::ESRCH) => Sent::Gone,
        Err(err) => Sent::Refused(err.to_string()),
    }
}

/// What [`stop`] does to a process: signal it (that process, or its own group, and nothing
/// else) and see it go.
pub trait Stoppable {
    fn signal(&self, signal: libc::c_int) -> Sent;
    /// Whether it has gone, waiting at most `timeout`.
    fn wait_gone(&self, timeout: Duration) -> bool;
}

/// How long a process has to go after SIGKILL before [`stop`] gives up on it (one in the
/// kernel's uninterruptible sleep can take a while).
pub const KILL_WAIT: Duration = Duration::from_secs(5);

/// The rung of [`stop`] that ended a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It went on the request made before (a door's `session/stop`, a closed lifeline).
    Asked,
    Term,
    Kill,
}

impl Ended {
    /// How it is said: `asked`, `SIGTERM`, `SIGKILL`.
    pub fn name(self) -> &'static str {
        match self {
            Ended::Asked => "asked",
            Ended::Term => "SIGTERM",
            Ended::Kill => "SIGKILL",
        }
    }
}

/// The stop ladder, the one way mur ends a process (DESIGN.md §4, §6). A request to end may
/// already have been made (a door's `session/stop`, a lifeline closed): the process then has
/// until `asked_until` to honour it. Then SIGTERM, when `term`, and until `deadline`; then
/// SIGKILL, and [`KILL_WAIT`]. Each rung is climbed only while the process is still there; each
/// signal goes through `target`, which reaches that process (or its own group) and nothing else.
/// The `Err` says which signal was refused and why, or that it did not go even after SIGKILL.
pub fn stop(
    target: &dyn Stoppable,
    asked_until: Option<Instant>,
    term: bool,
    deadline: Instant,
) -> Result<Ended, String> {
    let left = |until: Instant| until.saturating_duration_since(Instant::now());
    if let Some(until) = asked_until
        && target.wait_gone(left(until))
    {
        return Ok(Ended::Asked);
    }
    let mut rungs = vec![(libc::SIGKILL, Ended::Kill, KILL_WAIT)];
    if term {
        rungs.insert(0, (libc::SIGTERM, Ended::Term, left(deadline)));
    }
    for (signal, rung, wait) in rungs {
        match target.signal(signal) {
            Sent::Gone => return Ok(rung),
            Sent::Refused(why) => return Err(format!("{} refused: {why}", rung.name())),
            Sent::Delivered if target.wait_gone(wait) => return Ok(rung),
            Sent::Delivered => {}
        }
    }
    Err("did not exit after SIGKILL".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn sleeper() -> std::process::Child {
        std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap()
    }

    #[test]
    fn a_verified_child_is_signalled_and_seen_to_go() {
        let mut child = sleeper();
        let pid = child.id();
        let start = proc::process_start_token(pid).unwrap();
        let target = Target::open(pid, &start).unwrap();
        let target: &dyn Stoppable = &target;
        assert!(!target.wait_gone(Duration::from_millis(50)));
        assert_eq!(target.signal(libc::SIGTERM), Sent::Delivered);
        assert!(target.wait_gone(Duration::from_secs(10)));
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGTERM));
    }

    #[test]
    fn a_mismatched_start_time_is_never_opened() {
        let mut child = sleeper();
        let pid = child.id();
        let refused = Target::open(pid, "not-this-process").err().unwrap();
        assert!(matches!(refused, NotSignallable::Gone(ref why) if why.contains("another time")));
        assert!(Target::open(pid, "").is_err());
        // Still alive: nothing was sent.
        assert!(proc::pid_is_alive(pid));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn the_ladder_stops_at_the_rung_that_ended_the_process() {
        let rung = |script: &str, asked: bool, term: bool| {
            let mut child = std::process::Command::new("sh")
                .args(["-c", script])
                .spawn()
                .unwrap();
            let pid = child.id();
            // Started: its start time is readable once the shell has run its first line.
            std::thread::sleep(Duration::from_millis(50));
            let target = Target::open(pid, &proc::process_start_token(pid).unwrap()).unwrap();
            let asked_until = Instant::now() + Duration::from_millis(300);
            let deadline = asked_until + Duration::from_millis(300);
            let ended = stop(&target, asked.then_some(asked_until), term, deadline);
            child.wait().unwrap();
            ended
        };
        assert_eq!(rung("sleep 0.1", true, true), Ok(Ended::Asked));
        assert_eq!(rung("exec sleep 30", true, true), Ok(Ended::Term));
        // `exec`: an ignored signal stays ignored across it, and no orphan `sleep` outlives
        // the test.
        assert_eq!(
            rung("trap '' TERM; exec sleep 30", false, true),
            Ok(Ended::Kill)
        );
        assert_eq!(rung("exec sleep 30", false, false), Ok(Ended::Kill));
    }

    #[test]
    fn pid_zero_and_out_of_range_are_gone() {
        assert!(matches!(Target::open(0, "1"), Err(NotSignallable::Gone(_))));
        assert!(matches!(
            Target::open(u32::MAX, "1"),
            Err(NotSignallable::Gone(_))
        ));
    }
}
