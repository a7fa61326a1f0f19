//! The murmur home, `$MURMUR_HOME` or else `$HOME/.murmur`, and the directories `mur` keeps in it.
//!
//! Invariants (DESIGN.md §3):
//! - **No link is followed.** `~/.murmur` is opened `O_NOFOLLOW|O_DIRECTORY` and each directory
//!   under it through its parent's descriptor, the same way ([`crate::sys::dir::Dir`]); a link in
//!   the place of one is refused with a message naming it. Everything inside is then read,
//!   written, renamed and removed through the directory's descriptor, so a directory swapped for
//!   a link mid-run redirects nothing.
//! - **Only a home the effective uid owns is trusted** (as ssh's `StrictModes`). A directory
//!   owned by another uid is refused with a message naming the path, its owner and the fix, and
//!   never re-moded. The directories mur makes and names (`~/.murmur`, and `running`, `tasks`…
//!   inside any home) are held at `0700`: re-moded (`fchmod`) when found anything else, which
//!   also takes away group and other write. A `$MURMUR_HOME` mur did not create is the user's
//!   own directory, perhaps a shared one (`/tmp`): it is never re-moded, and refused unless it is
//!   already `0700`.
//! - Readers (`ps`, `stop`, `token`) create nothing: a missing home or running directory is an
//!   empty machine. A running directory that cannot be re-moded (a read-only filesystem) is read
//!   as it is, with a warning.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::sys::dir::{self, Dir};
use crate::sys::fs::PRIVATE_DIR_MODE;

/// The directory of the murmur home that holds the session logs.
pub const LOGS_DIR: &str = "logs";
/// The directory of the murmur home that holds what is kept of ended sessions
/// (`running::ended`).
pub const ENDED_DIR: &str = "ended";
/// The directory of the murmur home that holds each instance name's task store
/// (`store/<NAME>/`, `session::journal`).
pub const STORE_DIR: &str = "store";

/// The log's file name for `session_id` in [`LOGS_DIR`]: named here, beside the home's other
/// names, because the session writes it and the host tools read and prune it.
pub fn log_name(session_id: &str) -> String {
    format!("{session_id}.log")
}

/// The rotated log's file name for `session_id`.
pub fn old_log_name(session_id: &str) -> String {
    format!("{session_id}.log.1")
}

/// The name of session `session`'s private `TMPDIR` in `tasks/`, beside its task directory.
pub fn scratch_name(session: &str) -> String {
    format!("{session}.tmp")
}

/// Why a directory of the murmur home cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HomeError {
    /// It must not be trusted: a link in its place, or owned by another uid. Every applet
    /// refuses to go on (exit 1), `mur run` included.
    Untrusted(String),
    /// It cannot be used (cannot be created, not a directory, cannot be re-moded): a writer that
    /// may run unrecorded (`mur run`) warns and runs on; the others fail.
    Unusable(String),
}

impl From<HomeError> for String {
    fn from(err: HomeError) -> Self {
        match err {
            HomeError::Untrusted(why) | HomeError::Unusable(why) => why,
        }
    }
}

/// The murmur home, resolved without touching the filesystem: `$MURMUR_HOME` when set, else
/// `$HOME/.murmur`. `MURMUR_HOME` exists for cron jobs, services and minimal containers, where
/// `HOME` is unset or shared; the same trust rules apply to it as to `~/.murmur`.
///
/// The `Err` is `MURMUR_HOME` set but relative (or empty), or, without it, `HOME` unset, empty or
/// relative: a relative home would put records wherever the current directory happens to be,
/// where no other `mur` would look.
pub fn location() -> Result<PathBuf, String> {
    resolve(
        std::env::var_os("MURMUR_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
    )
}

/// [`location`] over the two variables' values, so the rules are testable without touching
/// the process environment.
fn resolve(
    murmur_home: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
) -> Result<PathBuf, String> {
    if let Some(murmur_home) = murmur_home {
        let path = Path::new(murmur_home);
        return if path.is_absolute() {
            Ok(path.to_path_buf())
        } else {
            Err(format!(
                "MURMUR_HOME is '{}', not an absolute path; set it to an absolute directory \
                 (or unset it to use $HOME/.murmur)",
                path.display()
            ))
        };
    }
    match home {
        Some(home) if Path::new(home).is_absolute() => Ok(Path::new(home).join(".murmur")),
        Some(home) if !home.is_empty() => Err(format!(
            "HOME is '{}', not an absolute path, and MURMUR_HOME is not set; mur keeps its state \
             in $MURMUR_HOME, else $HOME/.murmur: set either to an absolute path",
            Path::new(home).display()
        )),
        _ => Err(
            "neither MURMUR_HOME nor HOME is set; mur keeps its state in $MURMUR_HOME, \
                  else $HOME/.murmur: set either to an absolute path"
                .to_string(),
        ),
    }
}

/// Open `path` through `open`: a link in its place is [`HomeError::Untrusted`], any other
/// failure but absence [`HomeError::Unusable`]; `Ok(None)` when it is missing.
fn opened(
    path: &Path,
    open: impl FnOnce() -> std::io::Result<Dir>,
) -> Result<Option<Dir>, HomeError> {
    match open() {
        Ok(dir) => Ok(Some(dir)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) if err.raw_os_error() == Some(libc::ELOOP) => {
            Err(HomeError::Untrusted(dir::explain(path, &err)))
        }
        Err(err) => Err(HomeError::Unusable(dir::explain(path, &err))),
    }
}

/// The trust check of one directory of the home: owned by the effective uid, else
/// [`HomeError::Untrusted`] (and nothing re-moded); held at `0700`, re-moded if it is not,
/// else [`HomeError::Unusable`] (the re-mode failed).
pub fn hold(dir: &Dir) -> Result<(), HomeError> {
    let mode = trust(dir)?;
    if mode != PRIVATE_DIR_MODE {
        dir.set_mode(PRIVATE_DIR_MODE).map_err(|err| {
            HomeError::Unusable(format!(
                "{}: cannot set mode 0700: {err}",
                dir.path().display()
            ))
        })?;
    }
    Ok(())
}

/// The owner half of [`hold`], changing nothing: the directory's mode when the effective uid
/// owns it, else [`HomeError::Untrusted`] naming the path, the owner and the fix.
pub fn trust(dir: &Dir) -> Result<u32, HomeError> {
    let path = dir.path().display();
    let meta = dir
        .stat()
        .map_err(|err| HomeError::Unusable(format!("{path}: {err}")))?;
    let me = crate::sys::proc::euid();
    if meta.uid() != me {
        return Err(HomeError::Untrusted(format!(
            "{path} is owned by uid {}, not uid {me} (you): mur trusts only a murmur home you own; \
             fix: chown -R {me} {path}, or point MURMUR_HOME (or HOME) elsewhere",
            meta.uid()
        )));
    }
    Ok(meta.mode() & 0o7777)
}

/// [`hold`] for a reader: a directory that cannot be re-moded is read as it is, with a warning
/// from `applet` (none when `applet` is `None`).
fn hold_for_reader(dir: &Dir, applet: Option<&str>) -> Result<(), HomeError> {
    match hold(dir) {
        Err(HomeError::Unusable(why)) => {
            if let Some(applet) = applet {
                crate::cli::warn(applet, &format!("{why}; reading it as it is"));
            }
            Ok(())
        }
        held => held,
    }
}

/// `~/.murmur`, opened without following a link; created first when `create` (else `Ok(None)`
/// when missing). A `$MURMUR_HOME` mur did not create here must already be private: one owned by
/// another uid is refused by [`trust`], and one of any mode but `0700` is refused too, never
/// re-moded ([`private_as_found`]). Callers then [`hold`] (or [`trust`]) it: `~/.murmur`, whose
/// name is mur's, and a `$MURMUR_HOME` just made are held at `0700`.
fn murmur(create: bool) -> Result<Option<Dir>, HomeError> {
    let path = location().map_err(HomeError::Unusable)?;
    let mut made = false;
    if create {
        // Created 0700 (less the umask); `hold` then sets exactly 0700.
        match std::fs::DirBuilder::new()
            .mode(PRIVATE_DIR_MODE)
            .create(&path)
        {
            Ok(()) => made = true,
            Err(err) if err.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(HomeError::Unusable(format!(
                    "{}: cannot create: {err}",
                    path.display()
                )));
            }
            Err(_) => {}
        }
    }
    let home = opened(&path, || Dir::open(&path))?;
    if let Some(home) = &home
        && !made
        && std::env::var_os("MURMUR_HOME").is_some()
    {
        private_as_found(home)?;
    }
    Ok(home)
}

/// A `$MURMUR_HOME` found in place: owned by the effective uid ([`trust`]) and exactly `0700`,
/// else [`HomeError::Untrusted`] saying what to do. It may be a directory others share
/// (`MURMUR_HOME=/tmp`): taking their access away (as [`hold`] would) is not mur's to do, and
/// keeping tokens where they may look is not either.
fn private_as_found(home: &Dir) -> Result<(), HomeError> {
    let mode = trust(home)?;
    if mode == PRIVATE_DIR_MODE {
        return Ok(());
    }
    let path = home.path().display();
    Err(HomeError::Untrusted(format!(
        "MURMUR_HOME is {path}, mode {mode:04o}, not 0700: mur keeps tokens only in a private \
         directory and never changes the mode of one it did not create; set MURMUR_HOME to a \
         directory mur may create (e.g. {path}/mur-{uid}), or, if {path} is yours alone, \
         chmod 700 {path}",
        uid = crate::sys::proc::euid(),
    )))
}

/// `~/.murmur/<name>` (`running`, `formations`, `tasks`…), created if missing, opened through
/// `~/.murmur`'s descriptor without following a link, both held by [`hold`]: for anything that
/// writes or removes there.
pub fn private_dir(name: &str) -> Result<Dir, HomeError> {
    let vanished = |path: PathBuf| {
        HomeError::Unusable(format!("{}: vanished while being opened", path.display()))
    };
    let home = murmur(true)?.ok_or_else(|| vanished(location().unwrap_or_default()))?;
    hold(&home)?;
    create_held(&home, name)
}

/// Remove `~/.murmur/tasks/<session_id>/` and its `TMPDIR` beside it (`<session_id>.tmp`), if
/// there are any, in a home this euid owns: the task directories of a session that ended without
/// removing them itself (SIGKILLed), found when its record is pruned as gone. Best effort, through directory descriptors, following no link; a
/// home or `tasks/` that is missing or not trusted is left alone.
///
/// Invariant: `session_id` comes from a record that is what its name says (`running::prune`
/// checks it, and `running::scan` yields no other): the id is the only thing that says whose
/// directories these are, and a stale copy of a live session's record under another name must
/// never take the live session's directories.
pub fn remove_task_dirs(session_id: &crate::id::SessionId) {
    let Ok(Some(home)) = murmur(false) else {
        return;
    };
    if trust(&home).is_err() {
        return;
    }
    if let Ok(tasks) = home.open_child("tasks")
        && trust(&tasks).is_ok()
    {
        let _ = tasks.remove_tree(session_id.as_str());
        let scratch = scratch_name(session_id.as_str());
        let _ = tasks.remove_tree(scratch);
    }
}

/// `~/.murmur/<name>` for a reader (`mur logs`), creating nothing: `Ok(None)` when it or the
/// home is missing; both opened without following a link and trusted only when the effective
/// uid owns them ([`trust`]).
pub fn existing_dir(name: &str) -> Result<Option<Dir>, HomeError> {
    let Some(home) = murmur(false)? else {
        return Ok(None);
    };
    trust(&home)?;
    let path = home.join(name);
    let Some(dir) = opened(&path, || home.open_child(name))? else {
        return Ok(None);
    };
    trust(&dir)?;
    Ok(Some(dir))
}

/// Remove the log of `session_id` (`logs/<session>.log` and its rotated `.1`), an ended session
/// no longer kept: as [`remove_task_dirs`], best effort, only in a home and `logs/` this euid
/// owns.
pub fn remove_logs(session_id: &crate::id::SessionId) {
    if let Ok(Some(logs)) = existing_dir(LOGS_DIR) {
        let _ = logs.unlink(old_log_name(session_id.as_str()));
        let _ = logs.unlink(log_name(session_id.as_str()));
    }
}

/// The subdirectory `name` of a held directory, created if missing, opened without following a
/// link, and held by [`hold`]: `~/.murmur`'s own directories, a formation's directory and its
/// members' workdirs.
pub fn create_held(parent: &Dir, name: &str) -> Result<Dir, HomeError> {
    let path = parent.join(name);
    let child = opened(&path, || parent.create_child(name))?.ok_or_else(|| {
        HomeError::Unusable(format!("{}: vanished while being opened", path.display()))
    })?;
    hold(&child)?;
    Ok(child)
}

/// `~/.murmur/running`, created if missing and held at `0700` inside a `~/.murmur` held at
/// `0700`: for anything that writes or removes there.
pub fn running_dir() -> Result<Dir, HomeError> {
    private_dir("running")
}

/// `~/.murmur/running` for a reader that may prune: checked and held at `0700` (with
/// `~/.murmur`) if it exists, `Ok(None)` — an empty machine, nothing created — if it does not.
///
/// A directory that exists but cannot be re-moded (a read-only filesystem) is still read: only
/// a running directory that cannot be read fails a reader (DESIGN.md §6). `applet` warns so.
/// A link in the place of either directory, or one owned by another uid, is the `Err`.
pub fn running_dir_if_present(applet: Option<&str>) -> Result<Option<Dir>, HomeError> {
    let Some(home) = murmur(false)? else {
        return Ok(None);
    };
    trust(&home)?;
    let path = home.join("running");
    let Some(running) = opened(&path, || home.open_child("running"))? else {
        return Ok(None);
    };
    hold_for_reader(&home, applet)?;
    hold_for_reader(&running, applet)?;
    Ok(Some(running))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn murmur_home_wins_over_home_and_must_be_absolute() {
        let abs = Some(OsStr::new("/srv/mur"));
        let home = Some(OsStr::new("/home/u"));
        assert_eq!(resolve(abs, home), Ok(PathBuf::from("/srv/mur")));
        assert_eq!(resolve(abs, None), Ok(PathBuf::from("/srv/mur")));
        let err = resolve(Some(OsStr::new("rel")), home).unwrap_err();
        assert!(err.contains("MURMUR_HOME") && err.contains("rel"), "{err}");
        assert!(resolve(Some(OsStr::new("")), home).is_err());
    }

    #[test]
    fn without_murmur_home_a_missing_or_relative_home_names_both_variables() {
        assert_eq!(
            resolve(None, Some(OsStr::new("/home/u"))),
            Ok(PathBuf::from("/home/u/.murmur"))
        );
        for home in [None, Some(OsStr::new("")), Some(OsStr::new("rel"))] {
            let err = resolve(None, home).unwrap_err();
            assert!(
                err.contains("MURMUR_HOME") && err.contains("HOME "),
                "{err}"
            );
        }
    }
}
