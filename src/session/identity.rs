//! Whom a session's handlers run as. Landlock keeps a handler from the files it was not granted,
//! but a root handler still reads every root process's `/proc/PID/environ` and `maps` (ptrace's
//! rules let a uid read its own); so a session mur runs as root may give its handlers a uid of
//! their own (manifest `sandbox.user`):
//!
//! - `"dynamic"`: a uid no user of the system's database has, from systemd's range
//!   for dynamic users (61184-65519), claimed for as long as the session runs by an exclusive
//!   `flock` on `/run/mur/uids/<uid>` — the kernel drops it however the session ends, so a claim
//!   never goes stale, and no two running sessions share a uid: one session's handlers cannot
//!   read another's. Its group is the same number.
//! - a user's name: that user and its primary group (the operator's choice to share one).
//! - `"root"`: as mur.
//! - no `user` (the default): a dynamic uid as above that keeps root's access to files by their
//!   modes (`CAP_DAC_OVERRIDE`, `CAP_DAC_READ_SEARCH`, ambient) and nothing else of root's.
//!
//! Why the default keeps root's file access: a handler that is not root could neither enter a
//! workdir under `/root` nor write in one root owns, and a formation member's workdir is inside
//! the murmur home; a default that broke every such capsule run as root would be turned off, not
//! kept. Which files it reaches is Landlock's to say, as it was for a root handler; what the uid
//! takes away is every other process (signals, ptrace, `/proc/PID/environ`) and every other
//! capability (modules, mounts, raw sockets, owners and modes of files not its own). Where that
//! cannot be had (no `/run/mur`, a uid this user namespace does not map, no `CAP_SETUID`) the
//! default says why at the start and runs handlers as mur; a declared user stops the start instead.
//!
//! A declared handler's user cannot pass the murmur home (`0700`, root's), so the session's task
//! directories and `TMPDIR` then live under `/run/mur/<session>/` (`0711`: a handler finds its
//! own task directory by name, lists nothing), each handed to the handler's user while its task
//! runs ([`crate::session::taskdir`]). Before the first task a thread of the session becomes that
//! user and checks it can reach the workdir and run the handler (`check_reach`): what it cannot is
//! named at the start, with the fix, not found by the first task.
//!
//! Not root: handlers run as mur; a declared `sandbox.user` is said once at the start and ignored.
//! `"sandbox": false`: handlers run as mur, as with every other part of the sandbox.

use std::fs::File;
use std::path::Path;

use crate::json::sandbox::{Mode, Sandbox};
use crate::sys::dir::Dir;
use crate::sys::user::{Becomes, Ids};

/// Where the task directories of handlers that are not mur's user live: `/run/mur`.
const RUNTIME: &str = "/run/mur";
/// The uids handed out dynamically, as systemd's `DynamicUser=` does.
const DYNAMIC: std::ops::RangeInclusive<u32> = 61184..=65519;

/// The user a session's handlers run as, and what keeps it the session's.
pub struct HandlerUser {
    /// Its ids, and the capabilities it keeps ([`crate::sys::user::FILE_ACCESS`] by default).
    pub becomes: Becomes,
    /// As `ps -v` and the start show it: `dynamic uid 61234` or the user's name.
    pub shown: String,
    /// `/run/mur`, held: where the session's task directories go.
    pub runtime: Dir,
    /// The claim on a dynamic uid, held while the session runs (`None` for a named user).
    _claim: Option<File>,
}

impl std::fmt::Debug for HandlerUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerUser")
            .field("becomes", &self.becomes)
            .field("shown", &self.shown)
            .finish_non_exhaustive()
    }
}

impl HandlerUser {
    /// Whether its task directories are handed to it (and so live in `/run/mur`): a user that
    /// keeps root's file access reaches them in the murmur home as mur does.
    pub fn takes_task_dirs(&self) -> bool {
        self.becomes.keeps == 0
    }
}

/// Whom `declared` has the session's handlers run as: `None` is as mur (`"root"` declared, not
/// root, no sandbox, or the default where it cannot be had). The `Err` stops the start: an
/// unknown user, no `/run` to hold the task directories, no uid left to claim.
pub fn choose(declared: &Sandbox, session_id: &str) -> Result<Option<HandlerUser>, String> {
    // Elsewhere than Linux handlers are started by the standard library, as mur.
    if declared.mode == Mode::Off || !cfg!(target_os = "linux") {
        return Ok(None);
    }
    let declared_user = match declared.user.as_deref() {
        Some("root") => return Ok(None),
        None => return Ok(by_default(session_id)),
        Some(user) => user,
    };
    let named = Some(declared_user).filter(|u| *u != "dynamic");
    let me = crate::sys::proc::euid();
    if me != 0 {
        crate::cli::warn(
            "run",
            &format!(
                "sandbox.user: handlers run as {declared_user} only when mur runs as root; they \
                 run as you (uid {me})"
            ),
        );
        return Ok(None);
    }
    let runtime = runtime_dir()?;
    match named {
        Some(name) => {
            let ids = crate::sys::user::ids_of(name.as_ref()).ok_or_else(|| {
                format!(
                    "sandbox.user: there is no user {name} in this system's user database; \
                     name one that exists, or \"dynamic\" for a uid of the session's own"
                )
            })?;
            Ok((ids.uid != 0).then(|| HandlerUser {
                becomes: Becomes { ids, keeps: 0 },
                shown: name.to_string(),
                runtime,
                _claim: None,
            }))
        }
        None => claim(runtime, session_id, 0).map(Some),
    }
}

/// The default of a session mur runs as root: a dynamic uid keeping root's file access, or
/// `None` (handlers as mur, said at the start) where one cannot be had or become.
fn by_default(session_id: &str) -> Option<HandlerUser> {
    if crate::sys::proc::euid() != 0 {
        return None;
    }
    let user = runtime_dir()
        .and_then(|runtime| claim(runtime, session_id, crate::sys::user::FILE_ACCESS))
        .and_then(
            |user| match crate::sys::user::first_unreachable(user.becomes, &[]) {
                Ok(_) => Ok(user),
                Err(err) => Err(format!("cannot become {}: {err}", user.shown)),
            },
        );
    user.inspect_err(|why| {
        crate::cli::warn(
            "run",
            &format!(
                "handlers run as root, not as a uid of their own: {why} (declare \"sandbox\": \
                 {{\"user\": \"root\"}} to say so and silence this)"
            ),
        );
    })
    .ok()
}

/// `/run/mur`, created `0711` if missing; refused if it, or `/run`, is not root's or others may
/// write there (a link in its place included).
fn runtime_dir() -> Result<Dir, String> {
    let fix = "or declare \"sandbox\": {\"user\": \"root\"} to run handlers as root";
    let run = Dir::open(Path::new("/run")).map_err(|err| {
        format!(
            "sandbox.user: a uid of the handlers' own is claimed (and a declared user's task \
             directories kept) in {RUNTIME}, but /run cannot be used ({err}): create it \
             (mkdir -m 755 /run), {fix}"
        )
    })?;
    owned_by_root(&run, 0o022)?;
    let runtime = run
        .create_child("mur")
        .map_err(|err| format!("sandbox.user: {RUNTIME}: {err}; {fix}"))?;
    owned_by_root(&runtime, 0o066)?;
    runtime
        .set_mode(0o711)
        .map_err(|err| format!("sandbox.user: {RUNTIME}: cannot set mode 0711: {err}"))?;
    Ok(runtime)
}

/// `dir` is root's and none of the `forbidden` mode bits is set.
fn owned_by_root(dir: &Dir, forbidden: u32) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let meta = dir
        .stat()
        .map_err(|err| format!("sandbox.user: {}: {err}", dir.path().display()))?;
    if meta.uid() != 0 || meta.mode() & forbidden != 0 {
        return Err(format!(
            "sandbox.user: {} is owned by uid {} at mode {:o}: handlers' task directories go \
             only where root alone may write",
            dir.path().display(),
            meta.uid(),
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// A dynamic uid no user has and no running session holds, claimed, keeping `keeps`: the search
/// starts at a place the session's id picks, so concurrent starts rarely contend for one.
fn claim(runtime: Dir, session_id: &str, keeps: u64) -> Result<HandlerUser, String> {
    let uids = crate::home::create_held(&runtime, "uids").map_err(String::from)?;
    let span = DYNAMIC.end() - DYNAMIC.start() + 1;
    let start = session_id
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b.into()));
    for step in 0..span {
        let uid = DYNAMIC.start() + (start.wrapping_add(step) % span);
        if crate::sys::user::uid_is_known(uid) {
            continue;
        }
        let name = uid.to_string();
        let file = uids
            .append_private(&name)
            .map_err(|err| format!("sandbox.user: {}: {err}", uids.join(&name).display()))?;
        if crate::sys::fs::try_lock_exclusive(&file).unwrap_or(false) {
            let kept = if keeps == 0 {
                ""
            } else {
                " (file access as root)"
            };
            return Ok(HandlerUser {
                becomes: Becomes {
                    ids: Ids { uid, gid: uid },
                    keeps,
                },
                shown: format!("dynamic uid {uid}{kept}"),
                runtime,
                _claim: Some(file),
            });
        }
    }
    Err(format!(
        "sandbox.user: every dynamic uid ({}-{}) is taken by a running session or a user",
        DYNAMIC.start(),
        DYNAMIC.end()
    ))
}

/// Whether `user` can enter `workdir` and run `program` (its path as the handler's argv gives
/// it; a bare name is found on `PATH`, beyond this check): the `Err` names what it cannot reach
/// and the fix.
pub fn check_reach(user: &HandlerUser, workdir: &Path, program: &str) -> Result<(), String> {
    // As the spawn runs it: a path when it holds a `/` (relative ones from the workdir), else a
    // name found on `PATH`, which this does not check.
    let program = program.contains('/').then(|| workdir.join(program));
    let mut paths = vec![(workdir, libc::X_OK)];
    paths.extend(program.as_deref().map(|path| (path, libc::X_OK)));
    match crate::sys::user::first_unreachable(user.becomes, &paths) {
        Ok(None) => {}
        Ok(Some(at)) => {
            let (path, _) = paths[at];
            return Err(format!(
                "sandbox.user: handlers run as {} (mur runs as root), which cannot reach {}: \
                 let it (chmod o+x on each directory above it, o+rx on the handler), move the \
                 capsule where it can, or declare \"sandbox\": {{\"user\": \"root\"}}",
                user.shown,
                path.display()
            ));
        }
        Err(err) => {
            return Err(format!(
                "sandbox.user: cannot check what {} may reach: {err}",
                user.shown
            ));
        }
    }
    Ok(())
}

/// Remove `/run/mur/<session>/` and its `TMPDIR` beside it, if there are any: a session that
/// ran its handlers as a user of their own and ended without removing them itself (SIGKILLed),
/// found when its record is pruned. As [`crate::home::remove_task_dirs`]: best effort, through
/// descriptors, following no link, only by root and in a `/run/mur` only root may write; and
/// `session_id` must come from a record checked to be what its name says.
pub fn remove_task_dirs(session_id: &str) {
    if crate::sys::proc::euid() != 0 {
        return;
    }
    let Ok(runtime) = Dir::open(Path::new(RUNTIME)) else {
        return;
    };
    if owned_by_root(&runtime, 0o066).is_ok() {
        let _ = runtime.remove_tree(session_id);
        let _ = runtime.remove_tree(crate::home::scratch_name(session_id));
    }
}
