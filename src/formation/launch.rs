//! Launching a formation: every member of an admitted roster as a `mur run` process the launcher
//! owns, peers first and all at once, the entry member last, and every member stopped however
//! the launch or the entry member ends.
//!
//! - **Lifelines.** Each member inherits the read end of a pipe of its own whose write end only
//!   the launcher holds (`pipe2(O_CLOEXEC)`, created before the first spawn, cleared of
//!   close-on-exec in that one child only). A member reading EOF winds down as on SIGTERM. The
//!   launcher ends a formation by closing lifelines; if the launcher dies — SIGKILL, OOM — the
//!   kernel closes them, so no member outlives it.
//! - **Ready** ([`super::readiness`]) means the readiness line arrived and the door at its URL
//!   answers as the session it named. One deadline per member, from its spawn.
//! - **All or nothing.** A peer that exits, prints garbage, names another formation or misses
//!   its deadline refuses the launch; every started member is stopped and reaped before the
//!   refusal, which names each failed member and why, is returned. The entry is never started.
//! - **One owner.** [`Members`] holds every started member; every return path and its `Drop`
//!   stop them (lifelines closed, a grace, SIGKILL, reap). Under `panic = "abort"` the panic
//!   hook SIGKILLs every registered member instead.
//! - SIGINT, SIGTERM and SIGHUP to the launcher become a flag every wait polls, so a signalled
//!   launcher stops its members before it exits (130, 143, 129).

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::admission::{Admitted, Formation};
use super::dirs;
use super::material::Material;
use super::members::{self, MemberPipes, Members};
use super::readiness::{self, PeersReady, Pending, Ready, Reports};
use crate::id::FormationId;
use crate::json::channel::{self, Address, Addresses, Hello};
use crate::json::record::ProcessIdentity;
use crate::sys::{panic_kill, signal};

/// Default time a member has from its spawn to be ready.
pub const MEMBER_READY_TIMEOUT: Duration = Duration::from_secs(180);
/// The longest the launcher sleeps while the entry member runs (it is woken at once by the
/// entry's exit where the kernel has pidfds, by a signal, and by the entry's readiness line).
const ENTRY_WAIT: Duration = Duration::from_millis(20);

pub struct Options {
    pub roster: PathBuf,
    pub task: Option<String>,
    pub json: bool,
    pub ready_timeout: Duration,
}

/// Launch the formation `options.roster` describes; its exit code (the entry member's, or
/// 128 + the signal that ended the launcher). A refusal is the `Err`.
pub fn launch(options: &Options) -> Result<i32, String> {
    let formation = super::admission::admit(&options.roster)?;
    signal::catch_termination()?;
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
    let ready = match readiness::await_peers(waits, &mut members, options.ready_timeout) {
        PeersReady::All(ready) => ready,
        PeersReady::Signalled(caught) => {
            report_stopped(&mut members, &launch.material.id, false);
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
        let line = channel::line(&addresses(member, &ready));
        write_line(members.channel_of(&member.name), &line)?;
    }

    let entry_out = launch.spawn_entry(&formation, &mut pipes, &mut members, &ready, options)?;
    let (ready_tx, ready_rx) = mpsc::channel();
    let relay = std::thread::Builder::new()
        .name("relay".into())
        .spawn(move || readiness::relay_entry(entry_out, ready_tx))
        .map_err(|err| format!("cannot relay the entry member's output: {err}"))?;

    let mut announced = false;
    let code = loop {
        if !announced && let Ok(line) = ready_rx.try_recv() {
            announce(options, &launch.material.id, &formation, &ready, line);
            announced = true;
        }
        if let Some(caught) = signal::caught_termination() {
            break 128 + caught;
        }
        // Woken at once by the entry's exit (its pidfd), a signal, or its readiness line.
        if let Some(code) = members.wait_entry(ENTRY_WAIT) {
            break code;
        }
    };
    // A --task that completed is quiet on stderr (cron mails any output): stopping the peers
    // is then the expected end, not news.
    let quiet = options.task.is_some() && code == 0;
    report_stopped(&mut members, &launch.material.id, quiet);
    let _ = relay.join();
    Ok(code)
}

/// What every member's spawn needs: the formation's identity and master key, its directory,
/// the launcher's identity, the `mur` binary.
struct Launch {
    material: Material,
    launcher: ProcessIdentity,
    dir: crate::sys::dir::Dir,
    exe: PathBuf,
}

impl Launch {
    /// Mint the formation's id and master key, prune this project's ended formations, and make
    /// this one's directory and marker.
    fn prepare(formation: &Formation) -> Result<Self, String> {
        let material = Material::mint()?;
        let launcher = ProcessIdentity::of_this_process().ok_or(
            "cannot read this process's own start time, so members could not verify their launcher",
        )?;
        let formations = dirs::formations_dir()?;
        dirs::prune_ended(&formations, &formation.project_dir);
        let dir = dirs::create(
            &formations,
            &material.id,
            &dirs::Marker {
                project_dir: formation.project_dir.clone(),
                launcher_pid: launcher.pid,
                launcher_start: launcher.process_start.clone(),
            },
        )?;
        let exe =
            std::env::current_exe().map_err(|err| format!("cannot find the mur binary: {err}"))?;
        Ok(Self {
            material,
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
            let workdir = crate::home::create_held(&self.dir, &member.name)?
                .path()
                .to_path_buf();
            let pipes = pipes.take().expect("one set per member");
            write_line(pipes.channel(), &channel::line(&self.hello(member)))?;
            let spec = members::spec(&self.exe, member, &workdir, &self.material.id, None);
            let (pid, stdout) = members.spawn(&member.name, false, spec, pipes)?;
            let deadline = Instant::now() + ready_timeout;
            pending.push(Pending {
                name: member.name.clone(),
                deadline,
            });
            let (tx, name, id) = (tx.clone(), member.name.clone(), self.material.id.clone());
            std::thread::Builder::new()
                .name("readiness".into())
                .spawn(move || {
                    let _ = tx.send((name, readiness::await_ready(stdout, &id, pid, deadline)));
                })
                .map_err(|err| format!("cannot await member '{}': {err}", member.name))?;
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
    ) -> Result<std::fs::File, String> {
        let entry = formation.entry();
        let i = formation
            .members
            .iter()
            .position(|m| m.entry)
            .expect("one entry");
        let pipes = pipes[i].take().expect("one set per member");
        write_line(pipes.channel(), &channel::line(&self.hello(entry)))?;
        write_line(pipes.channel(), &channel::line(&addresses(entry, ready)))?;
        let spec = members::spec(
            &self.exe,
            entry,
            &formation.project_dir,
            &self.material.id,
            options.task.as_deref(),
        );
        Ok(members.spawn(&entry.name, true, spec, pipes)?.1)
    }

    /// The first channel line for `member`: its own door key and one token per callee, each
    /// MACed with the callee's door key.
    fn hello(&self, member: &Admitted) -> Hello {
        Hello {
            formation_id: self.material.id.clone(),
            member: member.name.clone(),
            launcher: self.launcher.clone(),
            door_key: self.material.door_key_text(&member.name),
            calls: self.material.calls(member),
        }
    }
}

/// Stop every member and say on stderr which were still running (unless `quiet`); then remove
/// the records that members which could not end in order (a SIGKILLed entry member) left behind.
fn report_stopped(members: &mut Members, id: &FormationId, quiet: bool) {
    let stopped = members.stop_all();
    prune_records_of(id);
    if quiet {
        return;
    }
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
    let Ok(Some(dir)) = crate::home::running_dir_if_present(Some("formation")) else {
        return;
    };
    let Ok(scan) = crate::running::scan::<crate::json::record::RunningRecord>(&dir) else {
        return;
    };
    for entry in scan.entries {
        if entry.record.formation_id.as_ref() == Some(id)
            && matches!(
                crate::running::process_liveness(&entry.record),
                Some(crate::running::Liveness::Gone(_))
            )
            && let Err(err) = crate::running::prune(&entry, crate::json::ended::End::Gone)
        {
            crate::cli::warn(
                "formation",
                &format!("cannot remove {}: {err}", entry.path.display()),
            );
        }
    }
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

fn write_line(fd: &OwnedFd, line: &[u8]) -> Result<(), String> {
    let mut file = std::fs::File::from(
        fd.try_clone()
            .map_err(|err| format!("the formation channel: {err}"))?,
    );
    file.write_all(line)
        .map_err(|err| format!("the formation channel: {err}"))
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
