//! Ended sessions, kept and bounded: `~/.murmur/ended/<session_id>.json` (an [`EndedRecord`],
//! never a token) beside the session's log in `logs/`, for `mur ps -a`, `mur logs`, `mur rm` and
//! `mur prune`.
//!
//! Invariants:
//! - **Kept however the session ended.** A session that ends itself keeps its own record (its
//!   exit code) before its running record goes ([`keep`]); one found gone — SIGKILLed, crashed —
//!   is kept by whoever prunes its running record (`keep_found`, from `running::prune`),
//!   marked `killed` or `gone`, with a line saying so appended to its log. A found one never
//!   replaces a record the session kept itself: a session's process is gone only after it kept
//!   its record, so a record there is the session's own word.
//! - **Bounded.** Every keeper trims (`trim`): the most recently ended sessions are kept while
//!   there are at most [`Bounds::sessions`] of them and their logs hold at most
//!   [`Bounds::log_bytes`], whichever bound is reached first; older ones go, record and log.
//!   `MURMUR_KEEP_ENDED=0` keeps none: a log then goes with its session, as before there was
//!   this.
//! - **Trusted as running records are.** The directory is held `0700` inside a home we own,
//!   each file `0600`, written staged and renamed, read and removed through the directory's
//!   descriptor following no link, and a record is believed only when it is ours, writable by no
//!   one else and what its name says ([`super::scan`]).
//! - **Only into the home it came from.** A record found gone is kept only when the directory it
//!   was read from is this home's running directory, so a record read elsewhere (a copy, a test)
//!   never writes into the home.

use std::io::Write;
use std::os::unix::fs::MetadataExt;

use super::{Entry, Record, Scan, record_name, scan_pruning};
use crate::home::{ENDED_DIR, LOGS_DIR, log_name, old_log_name};
use crate::json::ended::{End, EndedRecord};
use crate::json::record::RunningRecord;
use crate::sys::dir::Dir;

/// One ended session's record as read from `ended/`.
pub type Ended = Entry<EndedRecord>;

/// An ended record is read as a running one is ([`super::scan`]).
impl Record for EndedRecord {
    fn parse(bytes: &[u8]) -> Result<Self, String> {
        Self::from_slice(bytes)
    }
    fn session_id(&self) -> &crate::id::SessionId {
        &self.session_id
    }
}

/// The environment variable bounding how many ended sessions are kept.
pub const KEEP_ENDED: &str = "MURMUR_KEEP_ENDED";
/// The environment variable bounding the MiB of log the kept sessions hold.
pub const KEEP_ENDED_MIB: &str = "MURMUR_KEEP_ENDED_MIB";

/// How much is kept of ended sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The most ended sessions kept.
    pub sessions: usize,
    /// The most bytes their logs hold together.
    pub log_bytes: u64,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            sessions: 100,
            log_bytes: 64 << 20,
        }
    }
}

impl Bounds {
    /// [`KEEP_ENDED`] and [`KEEP_ENDED_MIB`] as this process's environment sets them, each a
    /// whole number, else its default. The `Err` names a value that is not one: keepers use the
    /// defaults then (keeping what ended is never a reason to fail a session), and `mur ps` and
    /// `mur prune` say so.
    pub fn from_env() -> Result<Self, String> {
        let mut bounds = Self::default();
        let read = |var: &str| -> Result<Option<u64>, String> {
            match std::env::var(var) {
                Err(_) => Ok(None),
                Ok(text) => text.trim().parse().map(Some).map_err(|_| {
                    format!("{var}={text:?} is not a whole number; the default is used")
                }),
            }
        };
        if let Some(n) = read(KEEP_ENDED)? {
            bounds.sessions = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(mib) = read(KEEP_ENDED_MIB)? {
            bounds.log_bytes = mib.saturating_mul(1 << 20);
        }
        Ok(bounds)
    }
}

/// Keep `record`, the session's own word on its end, in this home (replacing nothing but a
/// record of the same session), then trim. When nothing may be kept (`MURMUR_KEEP_ENDED=0`, or
/// `ended/` cannot be used) the session's log goes instead, so no log outlives its record.
pub fn keep(record: &EndedRecord) {
    let bounds = Bounds::from_env().unwrap_or_default();
    let kept = bounds.sessions > 0
        && crate::home::private_dir(ENDED_DIR).is_ok_and(|dir| {
            let written =
                dir.write_private(record_name(record.session_id.as_str()), &record.to_bytes());
            if written.is_ok() {
                trim(&dir, bounds);
            }
            written.is_ok()
        });
    if !kept {
        crate::home::remove_logs(&record.session_id);
    }
}

/// Keep the session of `running`, found gone, as ended `end` — unless it kept its own record
/// (see the module's invariants) — when `from` is this home's running directory; its log gets
/// a last line saying how it ended.
pub(super) fn keep_found(running: &RunningRecord, end: End, from: &Dir) {
    let Ok(Some(home_running)) = crate::home::running_dir_if_present(None) else {
        return;
    };
    let same = match (from.stat(), home_running.stat()) {
        (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
        _ => false,
    };
    if !same {
        return;
    }
    let name = record_name(running.session_id.as_str());
    if crate::home::existing_dir(ENDED_DIR)
        .ok()
        .flatten()
        .is_some_and(|dir| dir.open_read(&name).is_ok())
    {
        return;
    }
    mark_log(running, end);
    keep(&EndedRecord::of(running, end, None));
}

/// Append the line saying how the session ended to its log, when it ended without a word.
fn mark_log(running: &RunningRecord, end: End) {
    let how = match end {
        End::Exited => return,
        End::Killed => "the session was SIGKILLed by mur stop: nothing after this was logged",
        End::Gone => {
            "the session was found gone (SIGKILLed or crashed; its exit status is unknown): \
             nothing after this was logged"
        }
    };
    if let Ok(Some(logs)) = crate::home::existing_dir(LOGS_DIR)
        && let Ok(mut file) = logs.append_private(log_name(running.session_id.as_str()))
    {
        let stamp = crate::time::format_rfc3339(crate::time::unix_now());
        let _ = writeln!(file, "{stamp} - mur: {how}");
    }
}

/// Every ended session of this home, most recently ended first, with what could not be read
/// (files that are not records are removed on the way, as `ps` does in `running/`). Creates
/// nothing: no `ended/` is no ended session.
pub fn list() -> Result<Scan<EndedRecord>, String> {
    let Some(dir) = crate::home::existing_dir(ENDED_DIR).map_err(String::from)? else {
        return Ok(Scan::default());
    };
    let mut scan: Scan<EndedRecord> = scan_pruning(&dir)?;
    newest_first(&mut scan.entries);
    Ok(scan)
}

/// Every ended session record of this home that reads, in no order, touching nothing: for a
/// listing that only counts them (plain `mur ps`'s restarts), so what `list` would remove or
/// report is left to `mur ps -a`.
pub fn peek() -> Vec<Ended> {
    let dir = crate::home::existing_dir(ENDED_DIR).ok().flatten();
    dir.and_then(|dir| crate::running::scan::<EndedRecord>(&dir).ok())
        .map_or_else(Vec::new, |scan| scan.entries)
}

fn newest_first(entries: &mut [Ended]) {
    entries.sort_by(|a, b| {
        (&b.record.ended_at, b.record.session_id())
            .cmp(&(&a.record.ended_at, a.record.session_id()))
    });
}

/// Remove one ended session: its record, then its log; the bytes of log that went. The `Err`
/// is the OS error that kept the record (and so the log).
pub fn remove(ended: &Ended) -> std::io::Result<u64> {
    let bytes = log_bytes(&ended.record.session_id);
    ended.dir.unlink(&ended.name)?;
    crate::home::remove_logs(&ended.record.session_id);
    Ok(bytes)
}

/// The bytes of the session's log (both files), as `logs/` holds them now.
pub fn log_bytes(session: &crate::id::SessionId) -> u64 {
    let Ok(Some(logs)) = crate::home::existing_dir(LOGS_DIR) else {
        return 0;
    };
    [log_name(session.as_str()), old_log_name(session.as_str())]
        .iter()
        .filter_map(|name| logs.open_read(name).and_then(|f| f.metadata()).ok())
        .filter(|meta| meta.is_file())
        .map(|meta| meta.len())
        .sum()
}

/// Remove the oldest ended sessions beyond `bounds`.
fn trim(dir: &Dir, bounds: Bounds) {
    let Ok(mut scan) = scan_pruning::<EndedRecord>(dir) else {
        return;
    };
    newest_first(&mut scan.entries);
    let mut bytes = 0u64;
    for (i, ended) in scan.entries.iter().enumerate() {
        bytes = bytes.saturating_add(log_bytes(&ended.record.session_id));
        if i >= bounds.sessions || bytes > bounds.log_bytes {
            let _ = remove(ended);
        }
    }
}
