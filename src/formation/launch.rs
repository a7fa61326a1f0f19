//! Launching a formation: every member of an admitted roster as a `mur run` process the launcher
//! owns, peers first and all at once, the entry member last, and every member stopped however
//! the launch or the entry member ends.
//!
//! - **Lifelines.** Each member inherits the read end of a pipe of its own whose write end only
//!   the launcher holds (`pipe2(O_CLOEXEC)`, created before the first spawn, cleared of
//!   close-on-exec in that one child only). A member reading EOF winds down as on SIGTERM. The
//!   launcher ends a formation by closing lifelines; if the launcher dies — SIGKILL, OOM — the
//!   kernel closes them, so no member outlives it.
//! - **Ready** means the readiness line arrived and the door at its URL answers as the session it
//!   named (authenticated doors probed with the operator token from the member's record). One
//!   deadline per member, from its spawn.
//! - **All or nothing.** A peer that exits, prints garbage, names another formation or misses
//!   its deadline refuses the launch; every started member is stopped and reaped before the
//!   refusal, which names each failed member and why, is returned. The entry is never started.
//! - **One owner.** [`Members`] holds every started member; every return path and its `Drop`
//!   stop them: lifelines closed, up to 25 s each to end, SIGKILL to what is left (a peer's
//!   process group; the entry member alone, as it shares our group), reap. No member is sent
//!   SIGTERM. Under `panic = "abort"` the panic hook SIGKILLs every registered member instead.
//! - SIGINT, SIGTERM and SIGHUP to the launcher become a flag every wait polls, so a signalled
//!   launcher stops its members before it exits (130, 143, 129).

use std::io::{BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::admission::{Admitted, Formation};
use super::channel::{self, Address, Addresses, CHANNEL_ENV, Call, FORMATION_ENV, Hello};
use super::dirs;
use crate::id::{FormationId, SessionId};
use crate::json::record::ProcessIdentity;
use crate::secret::Secret;
use crate::session::LIFELINE_ENV;
use crate::sys::child::{ChildWatch, signal_group};
use crate::sys::panic_kill::{self, Kill};
use crate::sys::{pipe, signal};
use crate::token::{self, Key};

/// How long a member has, after its lifeline closes, to end in order.
pub const MEMBER_STOP_GRACE: Duration = Duration::from_secs(25);
/// Default time a member has from its spawn to be ready.
pub const MEMBER_READY_TIMEOUT: Duration = Duration::from_secs(180);
/// How often readiness waits look at the launcher's signal flag and the peers' exits.
const TICK: Duration = Duration::from_millis(10);
/// The longest the launcher sleeps while the entry member runs (it is woken at once by the
/// entry's exit where the kernel has pidfds, by a signal, and by the entry's readiness line).
const ENTRY_WAIT: Duration = Duration::from_millis(20);
/// Domain of a member's door key derived from the formation's master key.
const DOOR_KEY_DOMAIN: &str = "murmur-formation-door-v1";

pub struct Options {
    pub roster: PathBuf,
    pub task: Option<String>,
    pub json: bool,
    pub ready_timeout: Duration,
}

/// One member process the launcher started.
struct Started {
    name: String,
    entry: bool,
    child: Child,
    watch: ChildWatch,
    /// The write end of its lifeline; dropping it is how the member is told to end.
    lifeline: Option<OwnedFd>,
    /// The write end of its channel.
    channel: Option<OwnedFd>,
    slot: Option<usize>,
    reaped: bool,
}

impl Started {
    /// A member just spawned, registered with the panic hook: a peer by its process group, the
    /// entry member (which shares ours) by its pid alone.
    fn new(name: &str, entry: bool, child: Child, lifeline: OwnedFd, channel: OwnedFd) -> Self {
        let kill = if entry {
            Kill::Process(child.id())
        } else {
            Kill::Group(child.id())
        };
        Self {
            name: name.to_string(),
            entry,
            watch: ChildWatch::new(child.id()),
            slot: panic_kill::register(kill),
            child,
            lifeline: Some(lifeline),
            channel: Some(channel),
            reaped: false,
        }
    }
}

impl Started {
    /// Wait for the member's process, and forget it in the panic registry.
    fn reap(&mut self) -> std::io::Result<std::process::ExitStatus> {
        let status = self.child.wait();
        self.reaped = true;
        if let Some(slot) = self.slot.take() {
            panic_kill::unregister(slot);
        }
        status
    }

    /// If the member has exited: reap it, forget it in the panic registry, and give its exit
    /// code (128 + the signal that killed it).
    fn reap_if_exited(&mut self) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        if !self.watch.wait_exit(Duration::ZERO) {
            return None;
        }
        Some(match self.reap() {
            Ok(s) => s
                .code()
                .or_else(|| s.signal().map(|sig| 128 + sig))
                .unwrap_or(1),
            Err(_) => 1,
        })
    }
}

/// The one owner of every started member.
#[derive(Default)]
struct Members {
    list: Vec<Started>,
}

impl Members {
    /// Close every lifeline, give each member up to the grace to end, SIGKILL what is left,
    /// reap. The members that were still running when this began.
    fn stop_all(&mut self) -> Vec<(String, u32)> {
        let was_running: Vec<(String, u32)> = self
            .list
            .iter()
            .filter(|m| !m.reaped && !m.watch.wait_exit(Duration::ZERO))
            .map(|m| (m.name.clone(), m.child.id()))
            .collect();
        for member in &mut self.list {
            member.lifeline = None;
            member.channel = None;
        }
        let deadline = Instant::now() + MEMBER_STOP_GRACE;
        for member in &mut self.list {
            if member.reaped {
                continue;
            }
            let exited = member
                .watch
                .wait_exit(deadline.saturating_duration_since(Instant::now()));
            // Unreaped, so its pid (and, for a peer, its pgid) still names only it.
            if member.entry {
                if !exited {
                    let _ = member.child.kill();
                }
            } else {
                let _ = signal_group(member.child.id(), libc::SIGKILL);
            }
            let _ = member.reap();
        }
        was_running
    }
}

impl Members {
    /// The started member called `name` (admission made names unique).
    fn named(&self, name: &str) -> &Started {
        self.list
            .iter()
            .find(|m| m.name == name)
            .expect("every awaited member was started")
    }
}

impl Drop for Members {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// What the readiness line and the door probe proved about one member.
#[derive(Debug, Clone)]
struct Ready {
    session_id: SessionId,
    url: String,
    pid: u32,
}

/// Launch the formation `options.roster` describes; its exit code (the entry member's, or
/// 128 + the signal that ended the launcher). A refusal is the `Err`.
pub fn launch(options: &Options) -> Result<i32, String> {
    let formation = super::admission::admit(&options.roster)?;
    signal::catch_termination();
    crate::sys::proc::protect_memory();
    panic_kill::install_hook();

    let launch = Launch::prepare(&formation)?;
    // Every lifeline and channel exists before the first spawn, so no member can inherit another's.
    let mut pipes = formation
        .members
        .iter()
        .map(|_| MemberPipes::new())
        .collect::<Result<Vec<_>, _>>()?;

    let mut members = Members::default();
    let waits = launch.spawn_peers(&formation, &mut pipes, &mut members, options.ready_timeout)?;
    let ready = match await_peers(waits, &mut members, options.ready_timeout) {
        PeersReady::All(ready) => ready,
        PeersReady::Signalled(caught) => {
            report_stopped(&mut members, &launch.id);
            return Ok(128 + caught);
        }
        PeersReady::Failed(failures) => {
            members.stop_all();
            return Err(format!(
                "the formation was not launched: {}",
                failures.join("; ")
            ));
        }
    };

    // Tell each peer that calls others where they are.
    for member in formation.peers().filter(|m| !m.callees.is_empty()) {
        let started = members.named(&member.name);
        let channel = started.channel.as_ref().expect("open until teardown");
        write_line(channel, &channel::line(&addresses(member, &ready)))?;
    }

    let entry_out = launch.spawn_entry(&formation, &mut pipes, &mut members, &ready, options)?;
    let (ready_tx, ready_rx) = mpsc::channel();
    let relay = std::thread::spawn(move || relay_entry(entry_out, ready_tx));

    let mut announced = false;
    let code = loop {
        if !announced && let Ok(line) = ready_rx.try_recv() {
            announce(options, &launch.id, &formation, &ready, line);
            announced = true;
        }
        if let Some(caught) = signal::caught_termination() {
            break 128 + caught;
        }
        let entry = members.list.last_mut().expect("the entry was pushed last");
        // Woken at once by the entry's exit (its pidfd), a signal, or its readiness line.
        crate::sys::wake::wait(entry.watch.pidfd(), ENTRY_WAIT);
        if let Some(code) = entry.reap_if_exited() {
            break code;
        }
    };
    report_stopped(&mut members, &launch.id);
    let _ = relay.join();
    Ok(code)
}

/// What every member's spawn needs: the formation's identity, its master key, its directory,
/// the launcher's identity, the `mur` binary.
struct Launch {
    id: FormationId,
    master: Key,
    launcher: ProcessIdentity,
    dir: PathBuf,
    exe: PathBuf,
}

/// One member's lifeline and channel, both ends, until its spawn hands the read ends over.
struct MemberPipes {
    lifeline: (OwnedFd, OwnedFd),
    channel: (OwnedFd, OwnedFd),
}

impl MemberPipes {
    fn new() -> Result<Option<Self>, String> {
        Ok(Some(Self {
            lifeline: pipe::pipe()?,
            channel: pipe::pipe()?,
        }))
    }
}

/// What each peer's readiness thread reports: its name, and how its readiness went.
type Reports = mpsc::Receiver<(String, Result<Ready, String>)>;

/// A peer whose readiness is awaited: its name and deadline, counted from its spawn.
struct Pending {
    name: String,
    deadline: Instant,
}

/// How waiting for the peers ended.
enum PeersReady {
    All(Vec<(String, Ready)>),
    Failed(Vec<String>),
    Signalled(i32),
}

impl Launch {
    /// Mint the formation's id and master key, prune this project's ended formations, and make
    /// this one's directory and marker.
    fn prepare(formation: &Formation) -> Result<Self, String> {
        let id = FormationId::mint()?;
        let master = Key::generate()?;
        let launcher = ProcessIdentity::of_this_process().ok_or(
            "cannot read this process's own start time, so members could not verify their launcher",
        )?;
        let formations = dirs::formations_dir()?;
        dirs::prune_ended(&formations, &formation.project_dir);
        let dir = dirs::create(
            &formations,
            &id,
            &dirs::Marker {
                project_dir: formation.project_dir.clone(),
                launcher_pid: launcher.pid,
                launcher_start: launcher.process_start.clone(),
            },
        )?;
        let exe =
            std::env::current_exe().map_err(|err| format!("cannot find the mur binary: {err}"))?;
        Ok(Self {
            id,
            master,
            launcher,
            dir,
            exe,
        })
    }

    /// Spawn every peer at once, each in its own process group with its first channel line
    /// already written; a thread per peer reads its readiness line and probes its door, and
    /// reports on the returned receiver.
    fn spawn_peers(
        &self,
        formation: &Formation,
        pipes: &mut [Option<MemberPipes>],
        members: &mut Members,
        ready_timeout: Duration,
    ) -> Result<(Vec<Pending>, Reports), String> {
        let (tx, rx) = mpsc::channel();
        let mut pending = Vec::new();
        for (member, pipes) in formation.members.iter().zip(pipes.iter_mut()) {
            if member.entry {
                continue;
            }
            let workdir = self.dir.join(&member.name);
            crate::sys::fs::ensure_private_dir(&workdir)?;
            let MemberPipes { lifeline, channel } = pipes.take().expect("one set per member");
            write_line(&channel.1, &channel::line(&self.hello(member)))?;
            let mut command = member_command(&self.exe, member, &workdir, &self.id, None);
            command.process_group(0);
            let child = spawn(command, &lifeline.0, &channel.0, &member.name)?;
            let mut started = Started::new(&member.name, false, child, lifeline.1, channel.1);
            let stdout = started.child.stdout.take();
            let deadline = Instant::now() + ready_timeout;
            pending.push(Pending {
                name: member.name.clone(),
                deadline,
            });
            let (tx, name, id, pid) = (
                tx.clone(),
                member.name.clone(),
                self.id.clone(),
                started.child.id(),
            );
            std::thread::spawn(move || {
                let _ = tx.send((name, await_ready(stdout, &id, pid, deadline)));
            });
            members.list.push(started);
        }
        Ok((pending, rx))
    }

    /// Spawn the entry member in our process group, both its channel lines written first; its
    /// stdout, which the caller relays.
    fn spawn_entry(
        &self,
        formation: &Formation,
        pipes: &mut [Option<MemberPipes>],
        members: &mut Members,
        ready: &[(String, Ready)],
        options: &Options,
    ) -> Result<Option<std::process::ChildStdout>, String> {
        let entry = formation.entry();
        let i = formation
            .members
            .iter()
            .position(|m| m.entry)
            .expect("one entry");
        let MemberPipes { lifeline, channel } = pipes[i].take().expect("one set per member");
        write_line(&channel.1, &channel::line(&self.hello(entry)))?;
        write_line(&channel.1, &channel::line(&addresses(entry, ready)))?;
        let command = member_command(
            &self.exe,
            entry,
            &formation.project_dir,
            &self.id,
            options.task.as_deref(),
        );
        let child = spawn(command, &lifeline.0, &channel.0, &entry.name)?;
        let mut started = Started::new(&entry.name, true, child, lifeline.1, channel.1);
        let stdout = started.child.stdout.take();
        members.list.push(started);
        Ok(stdout)
    }

    /// The first channel line for `member`: its own door key and one token per callee, each
    /// MACed with the callee's door key.
    fn hello(&self, member: &Admitted) -> Hello {
        Hello {
            formation_id: self.id.clone(),
            member: member.name.clone(),
            launcher: self.launcher.clone(),
            door_key: Secret::new(crate::b64::encode(
                door_key(&self.master, &self.id, &member.name).as_bytes(),
            )),
            calls: member
                .callees
                .iter()
                .map(|to| Call {
                    name: to.clone(),
                    token: token::mint(
                        &door_key(&self.master, &self.id, to),
                        token::FORMATION,
                        &json!({"formation": self.id, "from": member.name, "to": to}),
                    ),
                })
                .collect(),
        }
    }
}

/// Wait for every peer, all or nothing: a peer that reports a failure, exits, or passes its
/// deadline fails the launch, as does a signal to the launcher. Every peer that had failed by
/// then is named.
fn await_peers(
    (mut pending, rx): (Vec<Pending>, Reports),
    members: &mut Members,
    ready_timeout: Duration,
) -> PeersReady {
    let mut ready = Vec::new();
    let mut failures = Vec::new();
    while !pending.is_empty() && failures.is_empty() {
        if let Some(caught) = signal::caught_termination() {
            return PeersReady::Signalled(caught);
        }
        match rx.recv_timeout(TICK) {
            Ok((name, outcome)) => {
                pending.retain(|p| p.name != name);
                match outcome {
                    Ok(r) => ready.push((name, r)),
                    Err(why) => failures.push(format!("{name}: {why}")),
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        let now = Instant::now();
        pending.retain(|p| {
            let why = if members.named(&p.name).watch.wait_exit(Duration::ZERO) {
                "exited before it was ready".to_string()
            } else if now >= p.deadline {
                format!("not ready within {}s", ready_timeout.as_secs())
            } else {
                return true;
            };
            failures.push(format!("{}: {why}", p.name));
            false
        });
    }
    if failures.is_empty() {
        PeersReady::All(ready)
    } else {
        PeersReady::Failed(failures)
    }
}

/// Stop every member and say on stderr which were still running; then remove the records that
/// members which could not end in order (a SIGKILLed entry member) left behind.
fn report_stopped(members: &mut Members, id: &FormationId) {
    let stopped = members.stop_all();
    prune_records_of(id);
    let list = if stopped.is_empty() {
        "none".to_string()
    } else {
        stopped
            .iter()
            .map(|(name, pid)| format!("{name} (pid {pid})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    crate::cli::warn("formation", &format!("stopped: {list}"));
}

/// Remove the records of this formation's members whose process is gone (layers 1 and 2; the
/// launcher has reaped every member, so this is evidence, not a guess).
fn prune_records_of(id: &FormationId) {
    let Ok(dir) = crate::home::running_location() else {
        return;
    };
    let Ok(scan) = crate::running::scan(&dir) else {
        return;
    };
    for entry in scan.entries {
        if entry.record.formation_id.as_ref() == Some(id)
            && matches!(
                crate::running::process_liveness(&entry.record),
                Some(crate::running::Liveness::Gone(_))
            )
            && let Err(err) = crate::running::prune(&entry)
        {
            crate::cli::warn(
                "formation",
                &format!("cannot remove {}: {err}", entry.path.display()),
            );
        }
    }
}

/// A member's door key: `HMAC(master, "murmur-formation-door-v1" 0x1f frm_id 0x1f member)`.
fn door_key(master: &Key, id: &FormationId, member: &str) -> Key {
    master.derive(&[DOOR_KEY_DOMAIN, id.as_str(), member])
}

fn addresses(member: &Admitted, ready: &[(String, Ready)]) -> Addresses {
    Addresses {
        addresses: ready
            .iter()
            .filter(|(name, _)| member.callees.contains(name))
            .map(|(name, r)| Address {
                name: name.clone(),
                url: r.url.clone(),
            })
            .collect(),
    }
}

fn member_command(
    exe: &std::path::Path,
    member: &Admitted,
    workdir: &std::path::Path,
    id: &FormationId,
    task: Option<&str>,
) -> Command {
    let mut command = Command::new(exe);
    command
        .arg("run")
        .arg(&member.manifest)
        .args([
            "--json",
            "--bind",
            "127.0.0.1",
            "--capsule-sha256",
            &member.sha256,
        ])
        .arg("--workdir")
        .arg(workdir)
        .env(FORMATION_ENV, id.as_str())
        .env_remove(LIFELINE_ENV)
        .env_remove(CHANNEL_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    if let Some(task) = task {
        command.arg("--task").arg(task);
    }
    command
}

fn spawn(
    mut command: Command,
    lifeline: &OwnedFd,
    channel: &OwnedFd,
    name: &str,
) -> Result<Child, String> {
    command
        .env(LIFELINE_ENV, lifeline.as_raw_fd().to_string())
        .env(CHANNEL_ENV, channel.as_raw_fd().to_string());
    pipe::keep_open_in_child(
        &mut command,
        vec![lifeline.as_raw_fd(), channel.as_raw_fd()],
    );
    command
        .spawn()
        .map_err(|err| format!("member '{name}' could not be started: {err}"))
}

fn write_line(fd: &OwnedFd, line: &[u8]) -> Result<(), String> {
    let mut file = std::fs::File::from(
        fd.try_clone()
            .map_err(|err| format!("the formation channel: {err}"))?,
    );
    file.write_all(line)
        .map_err(|err| format!("the formation channel: {err}"))
}

/// Read a peer's readiness line and probe its door until it answers as that session.
fn await_ready(
    stdout: Option<std::process::ChildStdout>,
    id: &FormationId,
    pid: u32,
    deadline: Instant,
) -> Result<Ready, String> {
    let mut reader = BufReader::new(stdout.ok_or("no stdout to read its readiness from")?);
    let line = channel::read_line(&mut reader)
        .map_err(|_| "its readiness line was malformed".to_string())?
        .ok_or("exited before it was ready")?;
    let ready = parse_ready(&line, id, pid)?;
    let token = operator_token(&ready.session_id);
    let mut last = String::new();
    while Instant::now() < deadline {
        match crate::door_client::probe_session_id(&ready.url, token.as_ref()) {
            Ok(sid) if sid == ready.session_id.as_str() => return Ok(ready),
            Ok(other) => {
                last = format!(
                    "the door at {} answers as {}",
                    ready.url,
                    other.escape_debug()
                )
            }
            Err(why) => last = why,
        }
        std::thread::sleep(TICK);
    }
    Err(format!("its door never answered as its session ({last})"))
}

fn parse_ready(line: &[u8], id: &FormationId, pid: u32) -> Result<Ready, String> {
    let value: Value = serde_json::from_slice(line)
        .map_err(|_| "printed something that is not a readiness line".to_string())?;
    let field = |key: &str| value.get(key).and_then(Value::as_str);
    let session_id = field("session_id")
        .and_then(|s| SessionId::parse(s).ok())
        .ok_or("its readiness line names no session")?;
    if field("formation_id") != Some(id.as_str()) {
        return Err(format!(
            "its readiness line names formation {}, not {id}",
            field("formation_id").unwrap_or("none")
        ));
    }
    if value.get("pid").and_then(Value::as_u64) != Some(u64::from(pid)) {
        return Err("its readiness line names another process".into());
    }
    let url = field("url")
        .ok_or("its readiness line names no door")?
        .to_string();
    Ok(Ready {
        session_id,
        url,
        pid,
    })
}

/// The operator token in a member's record, for probing an authenticated door.
fn operator_token(session: &SessionId) -> Option<Secret> {
    let dir = crate::home::running_location().ok()?;
    let path = crate::running::record_path(&dir, session.as_str());
    let bytes =
        crate::sys::fs::read_small_regular(&path, crate::json::record::MAX_RECORD_BYTES).ok()?;
    crate::json::record::RunningRecord::from_slice(&bytes)
        .ok()?
        .door_token
}

/// Pass the entry member's readiness line to `ready`, then copy the rest of its stdout (the
/// answer of a `--task`) to ours.
fn relay_entry(stdout: Option<std::process::ChildStdout>, ready: mpsc::Sender<Vec<u8>>) {
    let Some(stdout) = stdout else { return };
    let mut reader = BufReader::new(stdout);
    if let Ok(Some(line)) = channel::read_line(&mut reader) {
        let _ = ready.send(line);
        crate::sys::wake::notify();
    }
    let _ = std::io::copy(&mut reader, &mut std::io::stdout());
}

/// The formation's readiness: a JSON line on stdout with `--json`, else a human line on stderr
/// (none with `--task`, whose stdout is the answer).
fn announce(
    options: &Options,
    id: &FormationId,
    formation: &Formation,
    ready: &[(String, Ready)],
    entry_line: Vec<u8>,
) {
    let entry: Value = serde_json::from_slice(&entry_line).unwrap_or(Value::Null);
    let mut listed: Vec<Value> = vec![json!({
        "name": formation.entry().name, "entry": true, "session_id": entry["session_id"],
        "url": entry["url"], "pid": entry["pid"],
    })];
    listed.extend(ready.iter().map(|(name, r)| {
        json!({"name": name, "entry": false, "session_id": r.session_id, "url": r.url, "pid": r.pid})
    }));
    if options.json {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", json!({"formation_id": id, "members": listed}))
            .and_then(|()| out.flush());
    } else if options.task.is_none() {
        let members: Vec<String> = listed
            .iter()
            .map(|m| {
                format!(
                    "{} {}",
                    m["name"].as_str().unwrap_or("?"),
                    m["url"].as_str().unwrap_or("?")
                )
            })
            .collect();
        crate::cli::warn(
            "formation",
            &format!(
                "{id} ready: {} (stop: mur stop {id} or ^C)",
                members.join(", ")
            ),
        );
    }
}
