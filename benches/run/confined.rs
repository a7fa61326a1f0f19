//! The kernel's part of the sandbox's cost: a handler spawned directly from the bench, forked,
//! in what a sandboxed handler of a root session's default gets — a Landlock domain made by the
//! session's own code from the same allow-list ([`mur::session::sandbox::apply`]), and, as root,
//! a uid of its own keeping root's file access ([`mur::sys::user::assume`]) — next to the same
//! fork with nothing entered. Their difference is what the kernel charges that handler for the
//! checks (every file it opens walks the path to the root against the rules) and the change of
//! user, whoever starts it; what the session's sandbox costs beyond it is mur's own.

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
    use mur::sys::user::{Becomes, FILE_ACCESS, Ids, assume};
    use std::io;

    /// A uid of the range mur's sessions draw their handlers' from (61184-65519), as a root
    /// session's default handler runs: which one does not change what the kernel charges.
    const HANDLER_UID: u32 = 65519;

    /// A default sandboxed handler's domain and, as root, its user.
    pub struct Confinement {
        ruleset: Ruleset,
        user: Option<Becomes>,
    }

    impl Confinement {
        /// What a handler of a capsule in `capsule_dir` run in `workdir` with the default
        /// `sandbox` gets; `Err` says why there is none here (no Landlock, say).
        pub fn default_for(workdir: &Path, capsule_dir: &Path) -> Result<Self, String> {
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
            let user = (mur::sys::proc::euid() == 0).then_some(Becomes {
                ids: Ids {
                    uid: HANDLER_UID,
                    gid: HANDLER_UID,
                },
                keeps: FILE_ACCESS,
            });
            Ok(Self { ruleset, user })
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

/// No Landlock here: never made.
#[cfg(not(target_os = "linux"))]
pub enum Confinement {}

#[cfg(not(target_os = "linux"))]
impl Confinement {
    pub fn default_for(_workdir: &Path, _capsule_dir: &Path) -> Result<Self, String> {
        Err("there is no Landlock on this system".into())
    }

    pub fn forked(_this: Option<&Self>, command: &mut Command) {
        // SAFETY: the closure does nothing; it is there so the spawn forks, as its twin does.
        unsafe { command.pre_exec(|| Ok(())) };
    }
}
