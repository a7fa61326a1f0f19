//! Instance names (`mur run --name NAME`): at most one running session of a home holds a name.
//!
//! The claim is `running/<NAME>.name`, a `0600` file holding the holder's session id, on which
//! the holder keeps an exclusive `flock` for as long as it runs. Why a lock rather than the
//! file's existence: the kernel drops a lock when its process ends however it ends, so a
//! SIGKILLed session leaves no stale claim to judge, and two sessions claiming one name at once
//! cannot both win (the lock is the test and the claim in one call). The file is opened through
//! the running directory's descriptor, following no link, and only when it is a regular file of
//! ours with one link ([`Dir::append_private`]); its contents are read only to name the holder
//! in a refusal, and trusted only as a record is ([`super::check_trust`]).

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt;

use crate::id::SessionId;
use crate::sys::dir::Dir;

/// Extension of a name's claim file in the running directory.
const NAME_EXTENSION: &str = "name";
/// How often a claim is tried again when its file was replaced between opening and locking.
const CLAIM_TRIES: usize = 3;
/// How long a claimant that lost waits for the holder's id to appear in the claim file: the
/// holder writes it at once, so this is only ever spent on a machine too loaded to schedule it.
const HOLDER_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// One session's claim on its name, released (and its file removed) when dropped.
pub struct NameGuard {
    dir: Dir,
    file_name: OsString,
    /// Holds the lock: it goes when this file is closed.
    _lock: File,
}

/// Claim `name` for `session_id` in the running directory `dir`. The `Err` says why not: the
/// name is not a valid one, another running session holds it (named), or its claim file is not
/// one mur may trust or write.
fn claim(dir: &Dir, name: &str, session_id: &SessionId) -> Result<NameGuard, String> {
    check(name)?;
    let file_name = OsString::from(format!("{name}.{NAME_EXTENSION}"));
    let path = dir.join(&file_name);
    for _ in 0..CLAIM_TRIES {
        let file = dir.append_private(&file_name).map_err(|err| {
            format!(
                "cannot claim the name '{name}': {}: {err} (it must be a regular file of yours; \
                 remove it if it is not mur's)",
                path.display()
            )
        })?;
        let locked = crate::sys::fs::try_lock_exclusive(&file)
            .map_err(|err| format!("cannot claim the name '{name}': {err}"))?;
        if !locked {
            return Err(taken(dir, name, &file_name));
        }
        // The holder before us may have removed the file between our open and our lock: the
        // lock then guards a file no one else will find, so claim the one the name holds now.
        let same = dir
            .open_read(&file_name)
            .and_then(|now| Ok((now.metadata()?, file.metadata()?)))
            .is_ok_and(|(now, ours)| now.ino() == ours.ino() && now.dev() == ours.dev());
        if !same {
            continue;
        }
        let mut file = file;
        file.set_len(0)
            .and_then(|()| file.write_all(session_id.as_str().as_bytes()))
            .map_err(|err| format!("cannot claim the name '{name}': {err}"))?;
        return Ok(NameGuard {
            dir: dir.clone(),
            file_name,
            _lock: file,
        });
    }
    Err(format!(
        "cannot claim the name '{name}': its claim file kept being replaced; try again"
    ))
}

/// `claim` `name`, if one was asked for, in `dir`, the running directory when the home has a
/// usable one: a name cannot be held without one, so that is the `Err` too.
pub fn claim_in(
    dir: Option<&Dir>,
    name: Option<&str>,
    session_id: &SessionId,
) -> Result<Option<NameGuard>, String> {
    let Some(name) = name else {
        return Ok(None);
    };
    let dir = dir.ok_or_else(|| {
        format!("cannot claim the name '{name}': the murmur home has no usable running directory")
    })?;
    claim(dir, name, session_id).map(Some)
}

/// An instance name is what a capsule's name may be (a lowercase letter, then up to 31 of a-z,
/// 0-9, `-`): it can never be read as `@N`, an id, or a path.
pub fn check(name: &str) -> Result<(), String> {
    if crate::json::manifest::is_valid_name(name) {
        Ok(())
    } else {
        Err(format!(
            "'{}' is not a valid name (a lowercase letter, then up to 31 of a-z, 0-9, -)",
            name.escape_debug()
        ))
    }
}

/// The refusal of a name another session holds, naming it when its claim file says who.
///
/// The holder writes its id right after taking the lock, so a claimant that lost the lock by a
/// hair can find the file still empty: it reads again for up to [`HOLDER_WAIT`] before saying
/// only that a session is starting (a holder that died meanwhile released the lock with it).
fn taken(dir: &Dir, name: &str, file_name: &OsString) -> String {
    let read_holder = || {
        dir.read_small(file_name, 64)
            .ok()
            .filter(|small| super::check_trust(small, &dir.join(file_name)).is_ok())
            .and_then(|small| String::from_utf8(small.bytes).ok())
            .and_then(|text| SessionId::parse(&text).ok())
    };
    let waited_until = std::time::Instant::now() + HOLDER_WAIT;
    let mut holder = read_holder();
    while holder.is_none() && std::time::Instant::now() < waited_until {
        std::thread::sleep(std::time::Duration::from_millis(5));
        holder = read_holder();
    }
    match holder {
        Some(id) => format!(
            "the name '{name}' is taken by running session {id}; choose another --name, or \
             end it first (mur stop {name})"
        ),
        None => {
            format!("the name '{name}' is taken by a session starting now; choose another --name")
        }
    }
}

impl Drop for NameGuard {
    fn drop(&mut self) {
        // Removed while still locked, so a claimant that opened it meanwhile finds, once it holds
        // the lock, that the name no longer holds this file, and claims afresh.
        let _ = self.dir.unlink(&self.file_name);
    }
}
