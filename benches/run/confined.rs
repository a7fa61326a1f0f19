//! The kernel's part of the sandbox's cost: a handler spawned directly from the bench, forked,
//! in what a sandboxed handler of the session gets — a Landlock domain made by the session's own
//! code from the same default allow-list ([`mur::session::sandbox::apply`]), and the user its
//! record says its handlers run as, if any ([`mur::sys::user::assume`]) — next to the same fork
//! with nothing entered. Their difference is what the kernel charges that handler for the checks
//! (every file it opens walks the path to the root against the rules) and the change of user,
//! whoever starts it; what the session's sandbox costs beyond it is mur's own.
//!
//! Not quite the session's domain: it lacks the task's directory and the session's `TMPDIR`, two
//! rules of its dozen-odd (a rule costs the domain's making a little, and a path walk nothing
//! unless it is on the way), and its hidden places are the bench's (`~/.murmur` of the bench's
//! `HOME`), none of which is inside the workdir or the capsule directory either way.
//!
//! `unsafe`: the one `pre_exec` below (benches may provoke the kernel directly; `run.rs` says
//! so at its top).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

#[cfg(target_os = "linux")]
pub use linux::Confinement;

#[cfg(target_os = "linux")]
mod linux {
    use super::*;
    use mur::json::sandbox::Sandbox;
    use mur::sys::landlock::Ruleset;
    use mur::sys::user::{Becomes, assume};
    use std::io;

    /// A default sandboxed handler's domain and, as root, its user.
    pub struct Confinement {
        ruleset: Ruleset,
        user: Option<Becomes>,
    }

    impl Confinement {
        /// What a handler of a capsule in `capsule_dir` run in `workdir` with the default
        /// `sandbox` gets, run as `handler_user` (a record's, [`user_of`]); `Err` says why there
        /// is none here (no Landlock, say).
        pub fn default_for(
            workdir: &Path,
            capsule_dir: &Path,
            handler_user: Option<&str>,
        ) -> Result<Self, String> {
            let (policy, unsandboxed) = mur::session::sandbox::apply(
                workdir,
                &Sandbox::default(),
                Some(capsule_dir),
                None,
                None,
            )?;
            let policy = policy.ok_or_else(|| unsandboxed.unwrap_or_default())?;
            let ruleset = policy
                .ruleset(None)
                .map_err(|err| format!("no ruleset: {err}"))?;
            let user = handler_user.map(user_of).transpose()?;
            Ok(Self { ruleset, user })
        }

        /// Whether a user is entered besides the domain.
        pub fn changes_user(&self) -> bool {
            self.user.is_some()
        }

        /// `command` forked, entering this confinement between its fork and its exec (or, when
        /// `None`, nothing: forked all the same, so the two differ by the confinement alone).
        pub fn forked(this: Option<&Self>, command: &mut Command) {
            let enter = this.map(|c| (c.ruleset.raw_fd(), c.user));
            // SAFETY: the closure runs in the forked child before its exec and makes raw system
            // calls only (no allocation, no lock): `assume` and `restrict` are written for
            // exactly this place, between a handler's clone and its exec.
            unsafe {
                command.pre_exec(move || {
                    let Some((ruleset, user)) = enter else {
                        return Ok(());
                    };
                    if let Some(becomes) = user {
                        assume(becomes).map_err(io::Error::from_raw_os_error)?;
                    }
                    mur::sys::landlock::restrict(ruleset).map_err(io::Error::from_raw_os_error)
                });
            }
        }
    }
}

/// Whom a record's `handler_user` names: `dynamic uid N`, keeping root's file access when it adds
/// ` (file access as root)` (a root session's default); `Err` for a user named otherwise.
#[cfg(target_os = "linux")]
fn user_of(shown: &str) -> Result<mur::sys::user::Becomes, String> {
    use mur::sys::user::{Becomes, FILE_ACCESS, Ids};
    let (uid, keeps) = match shown.strip_suffix(" (file access as root)") {
        Some(uid) => (uid, FILE_ACCESS),
        None => (shown, 0),
    };
    let uid = uid
        .strip_prefix("dynamic uid ")
        .and_then(|uid| uid.parse().ok())
        .ok_or_else(|| format!("handlers run as {shown:?}, not a dynamic uid"))?;
    Ok(Becomes {
        ids: Ids { uid, gid: uid },
        keeps,
    })
}

/// No Landlock here: never made.
#[cfg(not(target_os = "linux"))]
pub enum Confinement {}

#[cfg(not(target_os = "linux"))]
impl Confinement {
    pub fn default_for(
        _workdir: &Path,
        _capsule_dir: &Path,
        _handler_user: Option<&str>,
    ) -> Result<Self, String> {
        Err("there is no Landlock on this system".into())
    }

    pub fn changes_user(&self) -> bool {
        match *self {}
    }

    pub fn forked(_this: Option<&Self>, command: &mut Command) {
        // SAFETY: the closure does nothing; it is there so the spawn forks, as its twin does.
        unsafe { command.pre_exec(|| Ok(())) };
    }
}
