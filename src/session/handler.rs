//! One handler process, from spawn to outcome: the command a task runs, its call socket, the
//! supervision loop (timeout, cancel), the reap, and what its exit means.
//!
//! The handler contract: argv from `run`, cwd the workdir, the task's text on stdin ([`stdin`]:
//! ending in one newline), the
//! session's and the task's `MUR_*` variables and the control values currently set in the
//! environment. Its stdout (up to 4 MiB; one trailing newline dropped) is the answer; exit 0 is
//! `completed`, exit 10 `input-required` (stdout the question), anything else `failed` with a
//! short reason (the exit code or signal). Its stderr goes, as it arrives, to whoever runs it
//! (the session's log, [`super::log`]) and never into the answer: a traceback names paths and
//! internals that a caller of a public door has no business reading.
//!
//! Each handler leads its own process group, under a subreaper of its own
//! ([`crate::sys::spawn::Shim`]) that everything it orphans is reparented to. On timeout or cancel the
//! handler's group and the task's orphans get SIGTERM, then the whole tree SIGKILL [`KILL_GRACE`]
//! later. When the handler exits, whatever it left running is killed, at any depth; the task
//! ends once all of it is gone.

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::pump::Pump;
use crate::json::channel::env;
use crate::sys::spawn::{Ended, Environment, Inherited, Spawned, Spec};

/// What serves a handler's call socket (a formation member's calls to its peers), when the
/// session has one: each handler then inherits its own end as `MURMUR_CALL_FD`.
pub type CallService = std::sync::Arc<dyn Fn(UnixStream) + Send + Sync>;

/// The most of a handler's stdout kept as its answer.
pub const MAX_ANSWER: usize = 4 << 20;
/// The exit status by which a handler asks for input: its stdout is the question.
pub const INPUT_REQUIRED_EXIT: i32 = 10;
/// Between SIGTERM and SIGKILL for a timed-out or canceled handler.
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long a finished handler's pipes are read for after its group is gone: enough for what
/// is already in them; a process that escaped the group and holds them open is not waited for.
const DRAIN_GRACE: Duration = Duration::from_millis(200);
/// How often a running handler's task looks at its cancel flag and deadline.
const WATCH_TICK: Duration = Duration::from_millis(25);

/// How a handler's task ended.
#[derive(Debug, PartialEq, Eq)]
pub enum TurnOutcome {
    /// Exit 0: its stdout, less one trailing newline.
    Completed(String),
    /// Exit 10: its stdout (less one trailing newline) is a question for the client.
    InputRequired(String),
    /// Why it failed: its exit code or signal, a timeout, or a resource failure here.
    Failed(String),
    Canceled,
}

/// What starts one task's handler: its argv, cwd the workdir, and the session's environment less
/// the session's own inherited formation descriptors, plus `vars`. It leads its own process
/// group under its own subreaper ([`crate::sys::spawn`]), which kills its whole tree when the
/// session is gone, so a SIGKILLed session, which runs no teardown, leaves nothing running.
pub fn spec<'a>(argv: &'a [String], workdir: &'a Path, vars: &[(String, OsString)]) -> Spec<'a> {
    let own = vars.iter().map(|(k, v)| (k.into(), v.clone())).collect();
    Spec {
        program: argv[0].as_ref(),
        args: argv[1..].iter().map(OsString::from).collect(),
        env: Environment::inheriting(inherited(), own),
        cwd: workdir,
        keep: Vec::new(),
        user: None,
    }
}

/// What every handler inherits: mur's environment less the session's own descriptors
/// (lifeline, channel, call socket), its formation directory and systemd's notify socket;
/// rendered at the first handler's start and shared by every later one.
fn inherited() -> Arc<Inherited> {
    static INHERITED: OnceLock<Arc<Inherited>> = OnceLock::new();
    let hidden = [
        env::LIFELINE,
        env::CHANNEL,
        env::FORMATION_DIR,
        env::CALL_FD,
        "NOTIFY_SOCKET",
    ];
    INHERITED
        .get_or_init(|| Arc::new(Inherited::from_process(&hidden)))
        .clone()
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
        spec.env.push(env::CALL_FD, theirs.as_raw_fd().to_string());
        spec.keep.push(theirs.as_raw_fd());
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
enum Stopped {
    Canceled,
    TimedOut,
}

/// A handler's stdin for the task text `text`: the text, ending in a newline — one is added
/// unless it already ends in one; an empty text stays empty (no line at all). A shell's `read`
/// and most line tools see no line without its newline (`read -r n` fails on `hi`); and since
/// one trailing newline is dropped from the answer, a handler that echoes its input (`cat`)
/// still answers with exactly the text.
pub fn stdin(mut text: String) -> Vec<u8> {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.into_bytes()
}

/// Feed `stdin` to the handler and collect its output until it and everything it started are
/// gone, stopping them when `canceled()` says so or `timeout` passes (SIGTERM, then SIGKILL
/// after [`KILL_GRACE`]); then reap it and say how it ended — or, the `Err`, why it never ran
/// (its start is not waited for: its stdin is written meanwhile). Each piece of stdout goes to
/// `on_output` as it arrives (within the answer's bound), each piece of stderr to `on_stderr`.
pub fn run(
    spawned: Spawned,
    stdin: Vec<u8>,
    timeout: Duration,
    canceled: impl Fn() -> bool,
    on_output: &mut dyn FnMut(&[u8]),
    on_stderr: &mut dyn FnMut(&[u8]),
) -> std::io::Result<TurnOutcome> {
    let Spawned {
        mut shim,
        stdin: input,
        stdout,
        stderr,
    } = spawned;
    let remote = shim.remote();
    let mut pump = match Pump::new([input, stdout, stderr], stdin, MAX_ANSWER, 0) {
        Ok(pump) => pump,
        Err(err) => {
            remote.kill();
            let _ = shim.end();
            let why = format!("the handler's pipes could not be set up: {err}");
            return Ok(TurnOutcome::Failed(why));
        }
    };
    let deadline = Instant::now() + timeout;
    let mut term_sent: Option<Instant> = None;
    let mut kill_sent = false;
    let mut stopped = None;
    let mut seen = 0;
    loop {
        let exit_ready = pump.step(shim.exit_fd(), WATCH_TICK);
        // The turn's start line, queued for later, is said by now if the turn runs on.
        crate::cli::flush_stderr(WATCH_TICK);
        super::log::flush(WATCH_TICK);
        if pump.out.len() > seen {
            on_output(&pump.out[seen..]);
            seen = pump.out.len();
        }
        let err = pump.take_err();
        if !err.is_empty() {
            on_stderr(&err);
        }
        // Where the end has a descriptor, the step's wait said whether it is readable.
        let exited = match shim.exit_fd() {
            Some(_) => exit_ready,
            None => shim.wait_exit(Duration::ZERO),
        };
        if exited {
            break;
        }
        if term_sent.is_none() {
            stopped = if canceled() {
                Some(Stopped::Canceled)
            } else if Instant::now() >= deadline {
                Some(Stopped::TimedOut)
            } else {
                None
            };
            if stopped.is_some() {
                remote.terminate();
                term_sent = Some(Instant::now());
            }
        }
        if !kill_sent && term_sent.is_some_and(|at| at.elapsed() >= KILL_GRACE) {
            remote.kill();
            kill_sent = true;
        }
    }
    let status = match shim.end() {
        Ok(Ended::NotStarted(err)) => return Err(err),
        Ok(Ended::Exited(status)) => Ok(status),
        Err(err) => Err(err),
    };
    pump.drain(DRAIN_GRACE);
    let err = pump.take_err();
    if !err.is_empty() {
        on_stderr(&err);
    }
    Ok(outcome(&pump, stopped, status, timeout))
}

/// What the handler's end means, once its pipes are drained.
fn outcome(
    pump: &Pump,
    stopped: Option<Stopped>,
    status: std::io::Result<ExitStatus>,
    timeout: Duration,
) -> TurnOutcome {
    match stopped {
        Some(Stopped::Canceled) => return TurnOutcome::Canceled,
        Some(Stopped::TimedOut) => {
            return TurnOutcome::Failed(format!("timed out after {}s", timeout.as_secs()));
        }
        None => {}
    }
    let status = match status {
        Ok(status) => status,
        Err(err) => {
            return TurnOutcome::Failed(format!("the handler could not be waited on: {err}"));
        }
    };
    if matches!(status.code(), Some(0 | INPUT_REQUIRED_EXIT)) {
        let mut answer = String::from_utf8_lossy(&pump.out).into_owned();
        if answer.ends_with('\n') {
            answer.pop();
        }
        return match status.code() {
            Some(0) => TurnOutcome::Completed(answer),
            _ => TurnOutcome::InputRequired(answer),
        };
    }
    TurnOutcome::Failed(match (status.code(), status.signal()) {
        (Some(code), _) => format!("the handler exited with code {code}"),
        (_, Some(signal)) => format!("the handler was killed by signal {signal}"),
        _ => "the handler failed".into(),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn stdin_ends_in_exactly_the_newline_the_text_lacked() {
        for (text, fed) in [
            ("hi", "hi\n"),
            ("hi\n", "hi\n"),
            ("a\nb", "a\nb\n"),
            ("a\n\n", "a\n\n"),
            ("", ""),
        ] {
            assert_eq!(super::stdin(text.into()), fed.as_bytes(), "{text:?}");
        }
    }
}
