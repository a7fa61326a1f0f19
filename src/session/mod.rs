//! One capsule session: a door on loopback, tasks run by the capsule, a running record for
//! exactly as long as it lives, and an orderly end.
//!
//! Ending: the first SIGTERM/SIGINT/SIGHUP, `session/stop`, or EOF on the formation lifeline
//! stops the door taking tasks, cancels live ones, closes the door, removes the record and
//! control file, and exits 143 (130 for SIGINT). A second signal, or 20 s, ends it at once:
//! every handler group is SIGKILLed first, so nothing outlives the session either way.

pub mod auth;
pub mod budget;
mod confinement;
pub mod control;
pub mod door;
pub mod feed;
pub mod handler;
mod hidden;
pub mod identity;
pub mod journal;
mod launched;
mod listen;
pub mod log;
pub mod member;
mod notify;
pub mod one_shot;
mod parking;
pub mod pump;
pub mod push;
pub mod sandbox;
pub mod store;
pub mod supervisor;
pub mod taskdir;
pub mod tasks;
mod tokens;
pub mod watch;

use std::ffi::OsString;
use std::net::{IpAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::id::SessionId;
use crate::json::channel::env;
use crate::json::ended::{End, EndedRecord};
use crate::json::manifest::{Lifecycle, Manifest};
use crate::json::record::RunningRecord;
use crate::running::{ControlGuard, RecordGuard, ended, names};
use crate::sys::signal;
use taskdir::SessionTasks;
use tasks::{Capsule, Engine};
use tokens::Tokens;

/// The longest the main loop sleeps without looking for a reason to stop. Every reason also
/// wakes it at once (`sys::wake`); this bounds only a lost wake-up.
const WATCH_INTERVAL: Duration = Duration::from_millis(500);
/// How often an orderly end looks for a second signal while tasks wind down.
const SHUTDOWN_TICK: Duration = Duration::from_millis(20);
/// How long an orderly end may take before it becomes an immediate one.
const STOP_GRACE: Duration = Duration::from_secs(20);
/// How long an immediate end waits for SIGKILLed handlers to be reaped.
const KILL_WAIT: Duration = Duration::from_secs(2);
/// How long the session's queued stderr lines may take to go out as it ends (a stderr nobody
/// reads keeps them: they are dropped).
const STDERR_DRAIN: Duration = Duration::from_millis(500);

/// Which capsule to run.
pub enum Source {
    /// The embedded `echo` capsule.
    Embedded,
    /// A manifest file or a directory holding `murmur.json`.
    Manifest(PathBuf),
}

/// What `mur run` was asked for.
pub struct Options {
    pub source: Source,
    pub task: Option<String>,
    pub bind: IpAddr,
    pub port: u16,
    pub workdir: PathBuf,
    pub json: bool,
    pub capsule_sha256: Option<String>,
    /// `--advertise-url`: the URL the card advertises (the record keeps the bind address).
    pub advertise_url: Option<String>,
    /// `--detach`: whether this process is the session started in the background.
    pub detach: bool,
    /// `--formation-dir`: a formation member's mounted joining material (else
    /// `MURMUR_FORMATION_DIR`, else none).
    pub formation_dir: Option<PathBuf>,
    /// `--out DIR`: where a `--task`'s answer files are written.
    pub out: Option<PathBuf>,
    /// `--listen-fd N`: serve the listening socket inherited as descriptor N.
    pub listen_fd: Option<i32>,
    /// `--name`: the instance name claimed for as long as the session runs.
    pub name: Option<String>,
}

/// What a capsule declares, whichever way it came.
struct Declared {
    name: String,
    version: String,
    capsule: Capsule,
    lifecycle: Lifecycle,
    credentials: Option<Vec<(String, Vec<String>)>>,
    control: Option<(Vec<String>, Vec<String>)>,
    /// `network.cors`: the origins the door answers CORS for.
    cors: Vec<String>,
    /// `--advertise-url`, else `network.advertise_url`.
    advertise: Option<String>,
    /// `network.push`: off for the embedded echo.
    push: crate::json::manifest::Push,
    /// The manifest's directory (`MUR_CAPSULE_DIR`); none for the embedded echo.
    capsule_dir: Option<PathBuf>,
    sandbox: crate::json::sandbox::Sandbox,
}

fn declare(options: &Options) -> Result<Declared, String> {
    let path = match &options.source {
        Source::Embedded => {
            return Ok(Declared {
                name: "echo".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                capsule: Capsule::Echo,
                lifecycle: Lifecycle::default(),
                credentials: None,
                control: None,
                cors: Vec::new(),
                advertise: options.advertise_url.clone(),
                push: Default::default(),
                capsule_dir: None,
                sandbox: Default::default(),
            });
        }
        Source::Manifest(path) => path,
    };
    let loaded = Manifest::load(path)?;
    if let Some(expected) = &options.capsule_sha256
        && !expected.eq_ignore_ascii_case(&loaded.sha256)
    {
        return Err(format!(
            "{}: its sha256 is {}, not the {} it was admitted with; the manifest changed since",
            loaded.path.display(),
            loaded.sha256,
            expected
        ));
    }
    let m = loaded.manifest;
    Ok(Declared {
        name: m.name,
        version: m.version,
        capsule: Capsule::Handler {
            argv: loaded.handler,
            workdir: options.workdir.clone(),
            sandbox: None,
        },
        lifecycle: m.lifecycle,
        cors: m.network.cors,
        push: m.network.push,
        advertise: options.advertise_url.clone().or(m.network.advertise_url),
        credentials: m.network.authentication.map(|a| {
            a.credentials
                .into_iter()
                .map(|c| (c.name, c.scopes))
                .collect()
        }),
        control: m.control.map(|c| (c.settings, c.secrets)),
        capsule_dir: Some(loaded.dir),
        sandbox: m.sandbox,
    })
}

/// Why the session is ending.
enum Ending {
    Signal(i32),
    Stop,
    Lifeline,
    TaskDone(bool),
}

/// Run one session until it ends; its exit code. Three stages: start (the capsule declared,
/// tokens minted, handlers prepared, the door open, the record written), serve (until a
/// signal, a stop, the lifeline or a `--task` ends it: `serve`), wind down (tasks ended, the
/// door closed, the record removed).
pub fn run(options: &Options) -> Result<i32, String> {
    // No thread of a session waits on its stderr ([`crate::cli::queue_stderr`]).
    crate::cli::queue_stderr();
    let ran = session(options);
    // What the session queued goes out before anything the applet says last.
    crate::cli::drain_stderr(STDERR_DRAIN);
    ran
}

fn session(options: &Options) -> Result<i32, String> {
    signal::catch_termination()?;
    crate::sys::proc::protect_memory();
    let mut declared = declare(options)?;
    let running = running_dir()?;
    let lifeline = launched::inherited_lifeline()?;
    let member = launched::inherited_membership(options, &declared)?;
    let session_id = SessionId::mint()?;
    // A start that fails leaves nothing behind: what can fail is done before the log and the
    // task directories exist (the port first: the commonest failure), or removes them.
    let (listener, addr) = listen::listen(options)?;
    let name_guard = names::claim_in(running.as_ref(), options.name.as_deref(), &session_id)?;
    let mut tokens = Tokens::mint(&declared, &session_id, member.as_deref())?;
    let formation_dir = crate::mounted::named(options.formation_dir.as_deref());
    let (dirs, unsandboxed) =
        confinement::prepare(&mut declared, &session_id, formation_dir.as_deref())?;
    let handler_user = dirs
        .as_ref()
        .and_then(SessionTasks::user)
        .map(|u| u.shown.clone());
    let engine = engine(&declared, &session_id, &tokens, member.as_ref(), dirs);
    let undo = || engine.finish();
    restore_and_push(options, &declared, &addr, &engine).inspect_err(|_| undo())?;
    open_log(options, &session_id, lifeline.is_some()).inspect_err(|_| undo())?;
    let door = door(&declared, &session_id, &addr, &engine, &mut tokens);
    let (server, stop_door) = start_door(listener, &door).inspect_err(|_| {
        undo();
        log::discard();
    })?;

    let pid = std::process::id();
    let mut record = RunningRecord {
        session_id,
        url: addr,
        pid,
        process_start: crate::sys::proc::process_start_token(pid).unwrap_or_default(),
        capsule_name: declared.name.clone(),
        capsule_version: declared.version.clone(),
        workdir: options.workdir.clone(),
        outlives_launcher: options.detach || !crate::sys::tty::has_controlling_terminal(),
        started_at: crate::time::format_rfc3339(crate::time::unix_now()),
        door_token: tokens.operator,
        credentials: tokens.credentials,
        formation_id: member.as_ref().map(|m| m.formation_id.clone()),
        formation_lifeline: lifeline.is_some(),
        formation_launcher: member.as_ref().and_then(|m| m.launcher.clone()),
        spawned_by: None,
        records_dir: Some(options.workdir.clone()),
        sandbox: unsandboxed,
        log_lines_dropped: 0,
        handler_user,
        name: options.name.clone(),
        member: member.as_ref().map(|m| m.name.clone()),
    };
    // The control token is written before the record; failing to write either never fails the
    // session: it runs on, unaddressable (the seed's rule), and says so.
    let (control_guard, record_guard) =
        write_files(running.as_ref(), &record, tokens.control_token.as_ref());
    // A `--task`'s `--json` is its one result object, at the end ([`one_shot`]) — except for a
    // launched formation entry, whose launcher reads the readiness line and relays the answer
    // as it streams (the channel's contract, `json::channel`).
    let launched = lifeline.is_some();
    let result_object = options.json && options.task.is_some() && !launched;
    let lifeline_closed = lifeline.map(launched::watch_lifeline).transpose()?;
    let mut notifier = notify::Notifier::from_env();
    announce(
        options.json && !result_object,
        options.task.is_some(),
        &record,
        notifier.as_ref(),
    );
    let one_shot = options
        .task
        .clone()
        .map(|text| {
            let output = one_shot::Output {
                json: result_object,
                out: options.out.clone(),
            };
            one_shot::start(&engine, text, output)
        })
        .transpose()?;

    let ending = serve(
        &door,
        &engine,
        lifeline_closed.as_deref(),
        one_shot.as_ref(),
        (record_guard.as_ref(), &mut record),
        notifier.as_mut(),
    );

    if let Some(notifier) = notifier.as_mut() {
        notifier.stopping();
    }
    door.stop_requested.store(true, Ordering::Release);
    wind_down(&engine);
    stop_door.stop();
    log::close();
    // Kept as ended before the record goes: whoever finds the process gone finds its word.
    ended::keep(&EndedRecord::of(
        &record,
        End::Exited,
        Some(ending.exit_code()),
    ));
    drop((record_guard, control_guard, name_guard));
    if std::process::id() == 1 {
        await_witnesses();
    }
    server.join();
    Ok(ending.exit_code())
}

/// How long pid 1 waits for the other `mur` commands of its namespace before it exits.
const WITNESS_GRACE: Duration = Duration::from_secs(1);

/// As pid 1 of a container: once the record is gone, wait (up to [`WITNESS_GRACE`]) for the
/// other `mur` commands running there to end before exiting. When pid 1 exits the kernel kills
/// everything left in its pid namespace: a `podman exec CTR mur stop @1` waiting to see the
/// record go would die unreported (exit 137) instead of saying so and exiting 0.
fn await_witnesses() {
    let until = Instant::now() + WITNESS_GRACE;
    while Instant::now() < until && !crate::sys::proc::others_running_this_program().is_empty() {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What the engine takes before the door opens: a named session's stored tasks (refused when
/// the store is another capsule's), then push notifications when they are on.
fn restore_and_push(
    options: &Options,
    declared: &Declared,
    addr: &str,
    engine: &Arc<Engine>,
) -> Result<(), String> {
    engine.restore_named(options.name.as_deref(), &declared.name)?;
    start_push(declared, addr, engine)
}

/// Push notifications, when the manifest declares `network.push`: the delivery thread started
/// and the engine told, before the door takes its first request.
fn start_push(declared: &Declared, addr: &str, engine: &Engine) -> Result<(), String> {
    if declared.push.on {
        let door = crate::net::client::parse_door_addr(addr)?;
        engine.enable_push(push::Push::start(
            &declared.push.allow,
            door,
            engine.budget(),
        )?);
    }
    Ok(())
}

/// The session's door: what it answers with, and the door's keys taken from `tokens` (the
/// operator's and the credentials' tokens stay there for the record).
fn door(
    declared: &Declared,
    session_id: &SessionId,
    addr: &str,
    engine: &Arc<Engine>,
    tokens: &mut Tokens,
) -> Arc<door::Door> {
    Arc::new(door::Door {
        session_id: session_id.clone(),
        name: declared.name.clone(),
        version: declared.version.clone(),
        addr: addr.to_string(),
        engine: engine.clone(),
        guests: budget::Budget::guests(engine.budget()),
        auth: tokens.auth.take(),
        control: tokens.control.take(),
        cors: declared.cors.clone(),
        advertise: declared.advertise.clone(),
        stop_requested: Arc::new(AtomicBool::new(false)),
        streams: Arc::default(),
        public_card: std::sync::OnceLock::new(),
    })
}

/// Serve `door` on `listener` from the door's own threads; them, and what stops them.
fn start_door(
    listener: TcpListener,
    door: &Arc<door::Door>,
) -> Result<
    (
        crate::net::server::Serving,
        Arc<crate::net::server::Stopper>,
    ),
    String,
> {
    let stop_door = crate::net::server::Stopper::new()?;
    let serving = crate::net::server::start(listener, door.clone(), stop_door.clone())?;
    Ok((serving, stop_door))
}

/// The main thread's watch while the door serves: what ends the session, looked for every
/// [`WATCH_INTERVAL`] (or sooner, when a signal wakes it), with the engine's input timeouts
/// expired, exited strangers reaped and the record's count of dropped stderr lines brought up
/// to date on each round.
fn serve(
    door: &door::Door,
    engine: &Engine,
    lifeline_closed: Option<&AtomicBool>,
    one_shot: Option<&std::sync::mpsc::Receiver<one_shot::TaskEnd>>,
    (guard, record): (Option<&RecordGuard>, &mut RunningRecord),
    mut notifier: Option<&mut notify::Notifier>,
) -> Ending {
    loop {
        if let Some(notifier) = notifier.as_deref_mut() {
            notifier.status(engine.tally().to_string());
        }
        if let Some(caught) = signal::caught_termination() {
            return Ending::Signal(caught);
        }
        if door.stop_requested.load(Ordering::Acquire) {
            return Ending::Stop;
        }
        if lifeline_closed.is_some_and(|closed| closed.load(Ordering::Acquire)) {
            return Ending::Lifeline;
        }
        if let Some(Ok(ended)) = one_shot.map(|rx| rx.try_recv()) {
            return Ending::TaskDone(one_shot::report(&ended));
        }
        crate::sys::wake::wait(None, WATCH_INTERVAL);
        engine.expire();
        // A child this session did not start (a wrapper's sidecar, an orphan adopted as pid 1)
        // is reaped once it has exited, never signalled.
        crate::sys::child::reap_strangers();
        let dropped = crate::cli::stderr_dropped();
        if let Some(guard) = guard.filter(|_| dropped != record.log_lines_dropped) {
            record.log_lines_dropped = dropped;
            // Best effort: the count is `mur ps -v`'s, never a reason to stop.
            let _ = guard.rewrite(record);
        }
    }
}

impl Ending {
    /// The session's exit code: 130 for SIGINT, 143 for any other ending asked from outside,
    /// a `--task`'s 0 or 1.
    fn exit_code(&self) -> i32 {
        match *self {
            Ending::Signal(libc::SIGINT) => 130,
            Ending::Signal(_) | Ending::Stop | Ending::Lifeline => 143,
            Ending::TaskDone(completed) => i32::from(!completed),
        }
    }
}

/// Begin the session's log. Its task events go to stderr too for a serving session, whose
/// stderr is a journal or a container's log; not for a one-shot task or a launched formation
/// member, whose stderr is a terminal or a cron mail (their log has them).
fn open_log(options: &Options, session_id: &SessionId, launched: bool) -> Result<(), String> {
    log::open(session_id.as_str(), options.task.is_none() && !launched)
}

/// The task engine for this session: the handler's environment, its control values, and (for
/// a member that may call peers) the call service behind `MURMUR_CALL_FD`.
fn engine(
    declared: &Declared,
    session_id: &SessionId,
    tokens: &Tokens,
    member: Option<&Arc<member::Member>>,
    dirs: Option<SessionTasks>,
) -> Arc<Engine> {
    let mut base_env: Vec<(String, OsString)> = vec![
        (env::SESSION_ID.into(), session_id.to_string().into()),
        (
            env::CAPSULE.into(),
            format!("{}@{}", declared.name, declared.version).into(),
        ),
    ];
    if let Some(dir) = &declared.capsule_dir {
        base_env.push((env::CAPSULE_DIR.into(), dir.clone().into()));
    }
    // So a handler can run `"$MUR" formation call …` without mur on its PATH.
    if let Ok(exe) = std::env::current_exe() {
        base_env.push((env::MUR.into(), exe.into()));
    }
    if let Capsule::Handler {
        sandbox: Some(policy),
        ..
    } = &declared.capsule
    {
        base_env.extend(policy.env());
    }
    let control = tokens.control.clone();
    let calls: Option<handler::CallService> = member.filter(|m| m.calls_anyone()).map(|m| {
        let m = m.clone();
        Arc::new(move |socket| m.serve_calls(socket)) as handler::CallService
    });
    Engine::new(
        declared.capsule.clone(),
        declared.lifecycle.clone(),
        base_env,
        Arc::new(move || control.as_ref().map(|c| c.env()).unwrap_or_default()),
        calls,
        dirs,
    )
}

/// Stop taking tasks and cancel live ones, waiting for them to end; a second signal, or
/// [`STOP_GRACE`], makes it immediate (every handler's tree killed). The task directories go
/// once no handler runs; then push notifications get their last chance ([`push::Push::finish`]).
fn wind_down(engine: &Engine) {
    engine.begin_shutdown();
    let signals_at_stop = signal::termination_count();
    let give_up = Instant::now() + STOP_GRACE;
    while !engine.wait_idle(SHUTDOWN_TICK) {
        // Any signal after the one (if any) that began the end means "now".
        let second_signal = signal::termination_count() > signals_at_stop;
        if second_signal || Instant::now() >= give_up {
            engine.kill_all();
            // Each subreaper kills its tree and exits; its task thread reaps it.
            engine.wait_idle(KILL_WAIT);
            break;
        }
    }
    // A handler stuck past KILL_WAIT (in the kernel) keeps its directory: its subreaper, which
    // holds its tree, ends it when this process exits (its control socket closes).
    if engine.wait_idle(Duration::ZERO) {
        engine.finish();
    }
    // The tasks' last updates are queued: their webhooks' last chance, before the log closes.
    if let Some(push) = engine.push() {
        push.finish(push::FINISH_GRACE);
    }
}

/// The running directory this session records itself in. A murmur home that must not be trusted
/// (a link in the place of a directory, another uid's) is the `Err`: the session does not start.
/// One that merely cannot be used (a read-only or full disk) is `None`, with a warning: the
/// session runs on, unaddressable.
fn running_dir() -> Result<Option<crate::sys::dir::Dir>, String> {
    match crate::home::running_dir() {
        Ok(dir) => Ok(Some(dir)),
        Err(crate::home::HomeError::Untrusted(why)) => Err(why),
        Err(crate::home::HomeError::Unusable(why)) => {
            crate::cli::warn("run", &format!("{why}; running without a record"));
            Ok(None)
        }
    }
}

fn write_files(
    dir: Option<&crate::sys::dir::Dir>,
    record: &RunningRecord,
    control_token: Option<&crate::secret::Secret>,
) -> (Option<ControlGuard>, Option<RecordGuard>) {
    let Some(dir) = dir else {
        return (None, None);
    };
    let control = control_token.and_then(|token| {
        ControlGuard::write(dir, record.session_id.as_str(), token)
            .map_err(|why| crate::cli::warn("run", &format!("{why}; control token not written")))
            .ok()
    });
    let guard = RecordGuard::write(dir, record)
        .map_err(|why| crate::cli::warn("run", &format!("{why}; running without a record")))
        .ok();
    (control, guard)
}

/// The readiness line: one JSON line on stdout when `line`, else a human line on stderr unless
/// the session runs a `task`; and `READY=1` to the service manager where it asks for it. Never a
/// token.
fn announce(line: bool, task: bool, record: &RunningRecord, notifier: Option<&notify::Notifier>) {
    use std::io::Write;
    if line {
        let mut line = json!({
            "session_id": record.session_id,
            "url": record.url,
            "pid": record.pid,
            "name": record.capsule_name,
            "version": record.capsule_version,
            "workdir": record.workdir,
        });
        if let Some(formation) = &record.formation_id {
            line["formation_id"] = json!(formation);
        }
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    } else if !task {
        crate::cli::warn(
            "run",
            &format!(
                "{} {} serving at http://{}/ (stop: mur stop {} or ^C)",
                record.capsule(),
                record.session_id,
                record.url,
                record.session_id
            ),
        );
    }
    if let Some(notifier) = notifier {
        notifier.ready();
    }
}
