//! The members a launcher started, and their one owner.
//!
//! [`Members`] holds every started member; every return path of the launch and its `Drop` stop
//! them: lifelines closed, up to 25 s each to end, SIGKILL to what is left (a peer's process
//! group; the entry member alone, as it shares the launcher's group), reap. No member is sent
//! SIGTERM. A member is registered with the panic hook from its spawn until it has exited, and
//! only then reaped ([`Registered::reap`], the one way to reap it), so under `panic = "abort"`
//! the hook SIGKILLs exactly the members still running, and never a number already handed on.
//!
//! Lifelines and channels: each member inherits the read ends of two pipes of its own
//! ([`MemberPipes`], `pipe2(O_CLOEXEC)`, all created before the first spawn and cleared of
//! close-on-exec in that one child only), so no member can inherit another's.

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::admission::Admitted;
use crate::id::FormationId;
use crate::json::channel::env;
use crate::process::{self, Sent, Stoppable};
use crate::sys::child::signal_group;
use crate::sys::panic_kill::{Kill, Registered};
use crate::sys::pidref::PidRef;
use crate::sys::pipe;
use crate::sys::spawn::{self, Environment, Inherited, Spec};

/// How long a member has, after its lifeline closes, to end in order.
pub const MEMBER_STOP_GRACE: Duration = Duration::from_secs(25);

/// One member process the launcher started.
struct Started {
    name: String,
    entry: bool,
    /// Its handle, registered with the panic hook until it is reaped (which only this does).
    process: Registered,
    /// The write end of its lifeline; dropping it is how the member is told to end.
    lifeline: Option<OwnedFd>,
    /// The write end of its channel.
    channel: Option<OwnedFd>,
    reaped: bool,
}

impl Started {
    /// A member just spawned, registered with the panic hook: a peer by its process group, the
    /// entry member (which shares ours) by its pid alone.
    fn new(name: &str, entry: bool, held: PidRef, lifeline: OwnedFd, channel: OwnedFd) -> Self {
        let kill = if entry {
            Kill::Process(held.pid())
        } else {
            Kill::Group(held.pid())
        };
        Self {
            name: name.to_string(),
            entry,
            process: Registered::new(held, kill),
            lifeline: Some(lifeline),
            channel: Some(channel),
            reaped: false,
        }
    }

    fn exited(&self) -> bool {
        self.process.held().wait_child_exit(Duration::ZERO)
    }

    /// Wait for the member's process to exit, forget it in the panic registry, reap it (in
    /// that order: [`Registered::reap`]).
    fn reap(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.reaped = true;
        self.process.reap()
    }

    /// If the member has exited: reap it, forget it in the panic registry, and give its exit
    /// code (128 + the signal that killed it).
    fn reap_if_exited(&mut self) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        if !self.exited() {
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

/// An unreaped member: its pid (and, for a peer, its pgid) names only it.
impl Stoppable for Started {
    /// A peer with its whole process group; the entry member, which shares ours, alone.
    fn signal(&self, signal: libc::c_int) -> Sent {
        process::sent(if self.entry {
            self.process.held().signal_child(signal)
        } else {
            signal_group(self.process.held().pid(), signal)
        })
    }

    fn wait_gone(&self, timeout: Duration) -> bool {
        self.process.held().wait_child_exit(timeout)
    }
}

/// The one owner of every started member.
#[derive(Default)]
pub struct Members {
    list: Vec<Started>,
}

impl Members {
    /// Start `member` from `spec` with the read ends of `pipes` inherited (and named in its
    /// environment), and own it from here on: registered with the panic hook, a peer leading its
    /// own process group, the entry member in ours. Its pid and stdout.
    pub fn spawn(
        &mut self,
        name: &str,
        entry: bool,
        mut spec: Spec<'_>,
        pipes: MemberPipes,
    ) -> Result<(u32, File), String> {
        let MemberPipes { lifeline, channel } = pipes;
        let fd = |end: &OwnedFd| OsString::from(end.as_raw_fd().to_string());
        spec.env.push(env::LIFELINE, fd(&lifeline.0));
        spec.env.push(env::CHANNEL, fd(&channel.0));
        spec.keep = vec![lifeline.0.as_raw_fd(), channel.0.as_raw_fd()];
        let child = spawn::spawn_child(&spec, !entry)
            .map_err(|err| format!("member '{name}' could not be started: {err}"))?;
        // Our copies of the read ends close here: the member holds the only ones.
        let pid = child.held.pid();
        self.list
            .push(Started::new(name, entry, child.held, lifeline.1, channel.1));
        Ok((pid, child.stdout))
    }

    /// Close every lifeline, give each member up to the grace to end, SIGKILL what is left,
    /// reap. The members that were still running when this began.
    pub fn stop_all(&mut self) -> Vec<(String, u32)> {
        let was_running: Vec<(String, u32)> = self
            .list
            .iter()
            .filter(|m| !m.reaped && !m.exited())
            .map(|m| (m.name.clone(), m.process.held().pid()))
            .collect();
        for member in &mut self.list {
            member.lifeline = None;
            member.channel = None;
        }
        // Closing the lifelines asked every member at once; each has until the one deadline.
        let deadline = Instant::now() + MEMBER_STOP_GRACE;
        for member in &mut self.list {
            if member.reaped {
                continue;
            }
            // A peer's whole group is SIGKILLed even once its leader has gone: what it left.
            let _ = process::stop(member, Some(deadline), false, deadline);
            if !member.entry {
                let _ = signal_group(member.process.held().pid(), libc::SIGKILL);
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

    /// Whether member `name` has exited (it is not reaped here).
    pub fn has_exited(&self, name: &str) -> bool {
        self.named(name).exited()
    }

    /// The write end of member `name`'s channel, open until teardown.
    pub fn channel_of(&self, name: &str) -> &OwnedFd {
        self.named(name)
            .channel
            .as_ref()
            .expect("open until teardown")
    }

    /// Sleep until the entry member (started last) exits, a wake-up (`sys::wake`) arrives, or
    /// `timeout` passes; once it has exited, reap it and give its exit code.
    pub fn wait_entry(&mut self, timeout: Duration) -> Option<i32> {
        let entry = self.list.last_mut().expect("the entry was started last");
        debug_assert!(entry.entry);
        // Woken at once by the entry's exit where the kernel has pidfds.
        crate::sys::wake::wait(entry.process.held().pidfd(), timeout);
        entry.reap_if_exited()
    }
}

impl Drop for Members {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// One member's lifeline and channel, both ends (read, write), until its spawn hands the read
/// ends over.
pub struct MemberPipes {
    lifeline: (OwnedFd, OwnedFd),
    channel: (OwnedFd, OwnedFd),
}

impl MemberPipes {
    /// `Some`, so a launcher can `take` each set exactly once.
    pub fn new() -> Result<Option<Self>, String> {
        Ok(Some(Self {
            lifeline: pipe::pipe()?,
            channel: pipe::pipe()?,
        }))
    }

    /// The write end of the channel, for the lines a member must find there when it starts.
    pub fn channel(&self) -> &OwnedFd {
        &self.channel.1
    }
}

/// `mur run` for `member`: its manifest bound to the digest it was admitted with, on loopback,
/// its readiness line on a pipe, no stdin; the launcher's own environment passed down, less its
/// own lifeline and channel (if it is a member itself), plus the formation's id.
pub fn spec<'a>(
    exe: &'a Path,
    member: &Admitted,
    workdir: &Path,
    id: &FormationId,
    task: Option<&str>,
) -> Spec<'a> {
    let mut args: Vec<OsString> = ["run".into(), member.manifest.clone().into_os_string()]
        .into_iter()
        .chain(["--json", "--bind", "127.0.0.1", "--capsule-sha256"].map(OsString::from))
        .chain([member.sha256.clone().into(), "--workdir".into()])
        .chain([workdir.as_os_str().to_os_string()])
        .collect();
    if let Some(task) = task {
        args.extend(["--task".into(), task.into()]);
    }
    let hidden = [env::LIFELINE, env::CHANNEL, env::FORMATION_ID];
    let inherited = Arc::new(Inherited::from_process(&hidden));
    let own = vec![(env::FORMATION_ID.into(), id.as_str().into())];
    Spec {
        program: exe.as_os_str(),
        args,
        env: Environment::inheriting(inherited, own),
        cwd: Path::new("."),
        keep: Vec::new(),
        user: None,
    }
}
