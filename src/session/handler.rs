//! One handler process, from spawn to outcome: the command a task runs, its call socket, the
//! supervision loop (timeout, cancel), the reap, and what its exit means.
//!
//! The handler contract: argv from `run`, cwd the workdir, the task's text on stdin, the
//! session's and the task's `MUR_*` variables and the control values currently set in the
//! environment. Its stdout (up to 4 MiB; one trailing newline dropped) is the answer; exit 0 is
//! `completed`, exit 10 `input-required` (stdout the question), anything else `failed` with the
//! tail of its stderr.
//!
//! Each handler leads its own process group. On timeout or cancel the group gets SIGTERM, then
//! SIGKILL [`KILL_GRACE`] later. The one ordering rule, kept by [`reap`]: once the leader has
//! exited, the group is SIGKILLed and unwatched *before* the leader is reaped — until it is
//! reaped, its pid (the pgid) can name nothing but this handler's group, so no signal can reach
//! a stranger that reused the number.

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::tasks::CallService;
use crate::json::contract::env;
use crate::sys::child::{ChildWatch, GroupReaper, Pump, signal_group};
use crate::sys::spawn::{Spawned, Spec};

/// The most of a handler's stdout kept as its answer.
pub const MAX_ANSWER: usize = 4 << 20;
/// The exit status by which a handler asks for input: its stdout is the question.
pub const INPUT_REQUIRED_EXIT: i32 = 10;
/// How much of a failed handler's stderr is reported.
const STDERR_TAIL: usize = 2048;
/// Between SIGTERM and SIGKILL for a timed-out or canceled handler.
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long a finished handler's pipes are read for after its group is gone: enough for what
/// is already in them; a process that escaped the group and holds them open is not waited for.
const DRAIN_GRACE: Duration = Duration::from_millis(200);
/// How often a running handler's task looks at its cancel flag and deadline.
const WATCH_TICK: Duration = Duration::from_millis(25);

/// How a handler's task ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0: its stdout, less one trailing newline.
    Completed(String),
    /// Exit 10: its stdout (less one trailing newline) is a question for the client.
    InputRequired(String),
    /// Why it failed: its exit and stderr tail, a timeout, or a resource failure here.
    Failed(String),
    Canceled,
}

/// What starts one task's handler: its argv, cwd the workdir, and the session's environment less
/// the session's own inherited formation descriptors, plus `vars`. It leads its own process
/// group and dies with the task thread that starts and waits for it ([`crate::sys::spawn`]), so
/// a SIGKILLed session, which runs no teardown, leaves no handler running.
pub fn spec<'a>(argv: &'a [String], workdir: &'a Path, vars: &[(String, OsString)]) -> Spec<'a> {
    let hidden = [env::LIFELINE, env::CHANNEL, env::CALL_FD, "NOTIFY_SOCKET"];
    let mut environment: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| {
            !hidden.iter().any(|h| k == h) && !vars.iter().any(|(name, _)| k == name.as_str())
        })
        .collect();
    environment.extend(vars.iter().map(|(k, v)| (k.into(), v.clone())));
    Spec {
        program: argv[0].as_ref(),
        args: &argv[1..],
        env: environment,
        cwd: workdir,
        keep: None,
    }
}

/// A handler's call socket (a formation member's calls to its peers): a socket pair whose one
/// end only this handler inherits (both close-on-exec; the flag is cleared on the handler's end
/// in the handler only), named by `MURMUR_CALL_FD`.
pub struct CallSocket {
    service: CallService,
    ours: UnixStream,
    theirs: UnixStream,
}

impl CallSocket {
    /// Make the pair and name the handler's end in `spec`.
    pub fn attach(spec: &mut Spec<'_>, service: &CallService) -> Result<Self, String> {
        let (ours, theirs) =
            UnixStream::pair().map_err(|err| format!("no call socket for the handler: {err}"))?;
        spec.env
            .push((env::CALL_FD.into(), theirs.as_raw_fd().to_string().into()));
        spec.keep = Some(theirs.as_raw_fd());
        Ok(Self {
            service: service.clone(),
            ours,
            theirs,
        })
    }

    /// The handler has been spawned (or failed to be): close our copy of its end and serve
    /// ours on a thread of its own.
    pub fn serve(self) -> Result<Serving, String> {
        drop(self.theirs);
        let closer = self.ours.try_clone().ok();
        let (service, ours) = (self.service, self.ours);
        let thread = std::thread::Builder::new()
            .name("calls".into())
            .spawn(move || service(ours))
            .map_err(|err| format!("no thread to serve the handler's calls: {err}"))?;
        Ok(Serving { thread, closer })
    }
}

/// A call socket being served.
pub struct Serving {
    thread: JoinHandle<()>,
    closer: Option<UnixStream>,
}

impl Serving {
    /// The handler has ended: shut the socket (a process that escaped the group may hold the
    /// handler's end open) and wait for the service to return.
    pub fn close(self) {
        if let Some(closer) = self.closer {
            let _ = closer.shutdown(std::net::Shutdown::Both);
        }
        let _ = self.thread.join();
    }
}

/// Why supervision stopped the handler, if it did.
#[derive(Clone, Copy)]
pub enum Stopped {
    Canceled,
    TimedOut,
}

/// Feed `stdin` to the handler and collect its output until its leader exits, stopping its
/// group when `canceled()` says so or `timeout` passes (SIGTERM, then SIGKILL after
/// [`KILL_GRACE`]). Each piece of stdout goes to `on_output` as it arrives (within the answer's
/// bound). The leader is left unreaped: [`reap`] is next. The `Err` is a handler whose pipes
/// could not be set up; its group has been SIGKILLed.
pub fn supervise(
    child: Spawned,
    stdin: Vec<u8>,
    timeout: Duration,
    canceled: impl Fn() -> bool,
    on_output: &mut dyn FnMut(&[u8]),
) -> Result<(Pump, Option<Stopped>), String> {
    let pgid = child.pid;
    let watch = ChildWatch::new(pgid);
    let pipes = [child.stdin, child.stdout, child.stderr];
    let mut pump = Pump::new(pipes, stdin, MAX_ANSWER, STDERR_TAIL).map_err(|err| {
        let _ = signal_group(pgid, libc::SIGKILL);
        format!("the handler's pipes could not be set up: {err}")
    })?;
    let deadline = Instant::now() + timeout;
    let mut term_sent: Option<Instant> = None;
    let mut stopped = None;
    let mut seen = 0;
    loop {
        let exited = pump.step(&watch, WATCH_TICK);
        if pump.out.len() > seen {
            on_output(&pump.out[seen..]);
            seen = pump.out.len();
        }
        if exited {
            break;
        }
        if term_sent.is_none() {
            let why = if canceled() {
                Some(Stopped::Canceled)
            } else if Instant::now() >= deadline {
                Some(Stopped::TimedOut)
            } else {
                None
            };
            if why.is_some() {
                stopped = why;
                let _ = signal_group(pgid, libc::SIGTERM);
                term_sent = Some(Instant::now());
            }
        }
        if term_sent.is_some_and(|at| at.elapsed() >= KILL_GRACE) {
            let _ = signal_group(pgid, libc::SIGKILL);
        }
    }
    Ok((pump, stopped))
}

/// The leader `pgid` has exited: SIGKILL what is left of its group and stop the reaper watching
/// it — both while the unreaped leader still holds the pgid — then reap it.
pub fn reap(pgid: u32, reaper: Option<&GroupReaper>) -> std::io::Result<ExitStatus> {
    let _ = signal_group(pgid, libc::SIGKILL);
    if let Some(reaper) = reaper {
        reaper.unwatch(pgid);
    }
    crate::sys::spawn::wait(pgid)
}

/// What the handler's end means, once its pipes are drained.
pub fn outcome(
    mut pump: Pump,
    stopped: Option<Stopped>,
    status: std::io::Result<ExitStatus>,
    timeout: Duration,
) -> Outcome {
    pump.drain(DRAIN_GRACE);
    match stopped {
        Some(Stopped::Canceled) => return Outcome::Canceled,
        Some(Stopped::TimedOut) => {
            return Outcome::Failed(format!("timed out after {}s", timeout.as_secs()));
        }
        None => {}
    }
    let status = match status {
        Ok(status) => status,
        Err(err) => return Outcome::Failed(format!("the handler could not be waited on: {err}")),
    };
    if matches!(status.code(), Some(0 | INPUT_REQUIRED_EXIT)) {
        let mut answer = String::from_utf8_lossy(&pump.out).into_owned();
        if answer.ends_with('\n') {
            answer.pop();
        }
        return match status.code() {
            Some(0) => Outcome::Completed(answer),
            _ => Outcome::InputRequired(answer),
        };
    }
    let how = match (status.code(), status.signal()) {
        (Some(code), _) => format!("the handler exited with code {code}"),
        (_, Some(signal)) => format!("the handler was killed by signal {signal}"),
        _ => "the handler failed".into(),
    };
    let tail = String::from_utf8_lossy(&pump.err_tail);
    let tail = tail.trim_end();
    Outcome::Failed(if tail.is_empty() {
        how
    } else {
        format!("{how}: {tail}")
    })
}
