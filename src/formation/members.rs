//! The members a launcher started, and their one owner.
//!
//! [`Members`] holds every started member; every return path of the launch and its `Drop` stop
//! them: lifelines closed, up to 25 s each to end, SIGKILL to what is left (a peer's process
//! group; the entry member alone, as it shares the launcher's group), reap. No member is sent
//! SIGTERM. A member is registered with the panic hook from its spawn until it is reaped, so
//! under `panic = "abort"` the hook SIGKILLs exactly the members still unreaped.
//!
//! Lifelines and channels: each member inherits the read ends of two pipes of its own
//! ([`MemberPipes`], `pipe2(O_CLOEXEC)`, all created before the first spawn and cleared of
//! close-on-exec in that one child only), so no member can inherit another's.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use super::admission::Admitted;
use crate::id::FormationId;
use crate::json::contract::env;
use crate::sys::child::{ChildWatch, signal_group};
use crate::sys::panic_kill::{self, Kill};
use crate::sys::pipe;

/// How long a member has, after its lifeline closes, to end in order.
pub const MEMBER_STOP_GRACE: Duration = Duration::from_secs(25);

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
pub struct Members {
    list: Vec<Started>,
}

impl Members {
    /// Spawn `command` as member `name` with the read ends of `pipes` inherited (and named in its
    /// environment), and own it from here on: registered with the panic hook, a peer by its
    /// process group, the entry member (which shares ours) by its pid alone. Its pid and stdout.
    pub fn spawn(
        &mut self,
        name: &str,
        entry: bool,
        mut command: Command,
        pipes: MemberPipes,
    ) -> Result<(u32, Option<ChildStdout>), String> {
        let MemberPipes { lifeline, channel } = pipes;
        command
            .env(env::LIFELINE, lifeline.0.as_raw_fd().to_string())
            .env(env::CHANNEL, channel.0.as_raw_fd().to_string());
        pipe::keep_open_in_child(
            &mut command,
            vec![lifeline.0.as_raw_fd(), channel.0.as_raw_fd()],
        );
        let child = command
            .spawn()
            .map_err(|err| format!("member '{name}' could not be started: {err}"))?;
        // Our copies of the read ends close here: the member holds the only ones.
        let mut started = Started::new(name, entry, child, lifeline.1, channel.1);
        let out = (started.child.id(), started.child.stdout.take());
        self.list.push(started);
        Ok(out)
    }

    /// Close every lifeline, give each member up to the grace to end, SIGKILL what is left,
    /// reap. The members that were still running when this began.
    pub fn stop_all(&mut self) -> Vec<(String, u32)> {
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

    /// Whether member `name` has exited (it is not reaped here).
    pub fn has_exited(&self, name: &str) -> bool {
        self.named(name).watch.wait_exit(Duration::ZERO)
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
        crate::sys::wake::wait(entry.watch.pidfd(), timeout);
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
/// its readiness line on a pipe, no stdin; the launcher's own lifeline and channel (if it is a
/// member itself) not passed down.
pub fn command(
    exe: &Path,
    member: &Admitted,
    workdir: &Path,
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
        .env(env::FORMATION_ID, id.as_str())
        .env_remove(env::LIFELINE)
        .env_remove(env::CHANNEL)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    if let Some(task) = task {
        command.arg("--task").arg(task);
    }
    command
}
