//! The machine-wide map of running capsules: one record per session at
//! `~/.murmur/running/<session_id>.json`.
//!
//! A record is a **hint, never a truth**: a `SIGKILL`ed capsule writes no farewell. So nothing
//! trusts one, and [`verify`] puts three layers between a record and the claim that its session
//! is live, each insufficient alone:
//!
//! 1. **The pid is alive** (and not a zombie). Necessary, nowhere near sufficient.
//! 2. **Its start time matches the recorded one.** Pids are reused; without this a record can
//!    name whatever process holds the number now.
//! 3. **The door answers as that session.** A live pid proves neither that the process is the
//!    capsule nor that it responds, so the card is fetched and its session id compared.
//!
//! Records are pruned only on evidence: layer 1 finding no process, or layer 2 finding another
//! one. A reading that could not be taken is not evidence: a live pid whose start time cannot be
//! read is kept (`unreachable`) and never signalled, and a live process behind a silent door is
//! kept too — it may be suspended or busy, and its record is the only handle to it.
//!
//! The directory is `0700` and each record `0600`: the set of records is a map of reachable
//! capsules, and of the tokens that drive them. A session declaring `control` also holds
//! `<session_id>.control` beside its record (the control token), written before the record and
//! removed with it.
//!
//! Everything here works through the running directory's descriptor ([`Dir`]): a record is
//! named, never a path, so a running directory swapped for a link after it was opened redirects
//! no read, write or removal. And a record is trusted only as ssh's `StrictModes` trusts a file
//! ([`check_trust`]): owned by the effective uid and writable by no one else. An untrusted record
//! is reported, never signalled and never removed — `mur` does not remove what it does not trust.
//! Nor is a record whose `session_id` is not the one its file name says (`check_name`): every
//! act on a record (a signal, a prune, the removal of `tasks/<session_id>/`) is done in the
//! name of the session it holds, so a record must be what its name says before anything is.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::id::SessionId;
use crate::json::ended::End;
use crate::json::record::{MAX_RECORD_BYTES, RunningRecord};
use crate::sys::dir::{Dir, Small};
use crate::sys::fs::{PRIVATE_FILE_MODE, ReadRefusal};

/// Extension of a record file; the only one [`scan`] reads.
const RECORD_EXTENSION: &str = "json";
/// Extension of a control token file beside its record.
const CONTROL_EXTENSION: &str = "control";

/// A kind of record kept one per session as `<session_id>.json`: a running record here, an
/// ended one in `ended/` ([`ended`]). Both are read by the same rules ([`scan`]).
pub trait Record {
    /// Parse a file's bytes; the `Err` says what was wrong.
    fn parse(bytes: &[u8]) -> Result<Self, String>
    where
        Self: Sized;
    /// The session it is the record of, which its file name must say (`check_name`).
    fn session_id(&self) -> &SessionId;
}

impl Record for RunningRecord {
    fn parse(bytes: &[u8]) -> Result<Self, String> {
        Self::from_slice(bytes)
    }
    fn session_id(&self) -> &SessionId {
        &self.session_id
    }
}

/// One record as read from its directory.
#[derive(Debug, Clone)]
pub struct Entry<R = RunningRecord> {
    /// The file it was read from, for messages: pruning removes the entry of that name in the
    /// directory it was read through, whatever the record claims its id is.
    pub path: PathBuf,
    pub record: R,
    dir: Dir,
    name: OsString,
}

/// A `.json` file in the running directory that is not a readable, trusted record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub path: PathBuf,
    pub reason: String,
    /// Whether what was read is evidence the file is not a record (malformed, a link, too large)
    /// as opposed to a read that failed (`EACCES`, `EMFILE`), which proves nothing, or a file
    /// that is not trusted (another owner, writable by others), which is never removed.
    pub invalid: bool,
    name: OsString,
}

/// What one pass over a record directory found. Nothing is created or removed; a trusted
/// record readable by others is re-moded `0600`.
#[derive(Debug)]
pub struct Scan<R = RunningRecord> {
    /// Every trusted record that parses, most recent session first.
    pub entries: Vec<Entry<R>>,
    pub unreadable: Vec<Unreadable>,
}

impl<R> Default for Scan<R> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            unreadable: Vec::new(),
        }
    }
}

/// Every `.json` entry of `dir`, read (through its descriptor), checked for trust and parsed.
///
/// Only `.json` is read: staging files end in `.tmp`, so a record mid-write is neither a record
/// nor unreadable, and `.control` files are not records. A failure to list `dir` is the `Err`,
/// naming the path.
pub fn scan<R: Record>(dir: &Dir) -> Result<Scan<R>, String> {
    let names = dir
        .names()
        .map_err(|err| format!("{}: {err}", dir.path().display()))?;
    let mut scan = Scan::<R>::default();
    for name in names {
        if Path::new(&name).extension().and_then(|e| e.to_str()) != Some(RECORD_EXTENSION) {
            continue;
        }
        let path = dir.join(&name);
        let (reason, invalid) = match read_file(dir, &name) {
            Ok(Ok(record)) => {
                scan.entries.push(Entry {
                    path,
                    record,
                    dir: dir.clone(),
                    name,
                });
                continue;
            }
            Err(ReadRefusal::Vanished) => continue,
            Ok(Err(Refused::NotARecord(reason))) | Err(ReadRefusal::Invalid(reason)) => {
                (reason, true)
            }
            Ok(Err(Refused::Untrusted(reason))) => (reason, false),
            Err(ReadRefusal::Io(reason)) => (format!("cannot be read: {reason}"), false),
        };
        scan.unreadable.push(Unreadable {
            path,
            reason,
            invalid,
            name,
        });
    }
    scan.entries
        .sort_by(|a, b| b.record.session_id().cmp(a.record.session_id()));
    scan.unreadable.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(scan)
}

/// Why a file that could be read is not taken as a record.
enum Refused {
    /// What was read is not a record: evidence enough to remove it.
    NotARecord(String),
    /// It is not trusted ([`check_trust`]): kept, never signalled, never removed.
    Untrusted(String),
}

/// One record file, read through `dir` and checked for trust before it is parsed, then checked
/// against its name (`check_name`).
fn read_file<R: Record>(dir: &Dir, name: &OsString) -> Result<Result<R, Refused>, ReadRefusal> {
    let small = dir.read_small(name, MAX_RECORD_BYTES)?;
    let path = dir.join(name);
    if let Err(why) = check_trust(&small, &path) {
        return Ok(Err(Refused::Untrusted(why)));
    }
    let record = match R::parse(&small.bytes) {
        Ok(record) => record,
        Err(why) => return Ok(Err(Refused::NotARecord(why))),
    };
    Ok(check_name(&record, name, &path)
        .map(|()| record)
        .map_err(Refused::Untrusted))
}

/// A record is what its name says: `<session_id>.json` holds the record of `session_id`, or the
/// `Err` says it does not, and what to do.
///
/// Why a mismatch is not trusted rather than pruned or believed: everything done *for* a record
/// is done in the name of the session it holds — its pid signalled, `tasks/<session_id>/`
/// removed when it is pruned as gone. A copy of a live session's record under another name
/// (a backup put back, a stale file from another tool) with a pid that has since died would
/// otherwise be pruned as gone, taking the *live* session's task directories with it. Nothing
/// proves which of the two names is right, so neither is acted on: the file is reported and
/// kept (DESIGN.md §5: "a record that disagrees is reported, never acted on"), like any
/// untrusted file — `mur` does not remove what it does not trust, and removing it would be
/// acting on it. Its owner removes it; the record under the right name is unaffected.
fn check_name<R: Record>(record: &R, name: &OsString, path: &Path) -> Result<(), String> {
    if *name == record_name(record.session_id().as_str()) {
        return Ok(());
    }
    Err(format!(
        "holds the record of session {}, which its file name does not say: not trusted, so \
         never signalled nor removed, and nothing it names is touched; fix: remove {} if it is \
         a stale copy",
        record.session_id(),
        path.display()
    ))
}

/// The trust rule for a file in the running directory (DESIGN.md §3, as ssh's `StrictModes`):
/// it must be owned by the effective uid and writable by no one else, or the `Err` says why and
/// what fixes it. Nothing is re-moded then. One that is ours and merely readable by others is
/// re-moded `0600` (through the descriptor it was read from).
pub fn check_trust(file: &Small, path: &Path) -> Result<(), String> {
    let (owner, mode, me) = (
        file.meta.uid(),
        file.meta.mode() & 0o7777,
        crate::sys::proc::euid(),
    );
    let path = path.display();
    if owner != me {
        return Err(format!(
            "owned by uid {owner}, not uid {me} (you): not trusted, so never signalled nor \
             removed; fix: chown {me} {path} if it is yours, else remove it"
        ));
    }
    if mode & 0o022 != 0 {
        return Err(format!(
            "mode {mode:04o} lets others write it: not trusted, so never signalled nor removed; \
             fix: chmod 600 {path} if it is yours, else remove it"
        ));
    }
    if mode != PRIVATE_FILE_MODE {
        // Best effort: on a read-only filesystem it stays as it is, and is still ours.
        let _ = file.set_mode(PRIVATE_FILE_MODE);
    }
    Ok(())
}

/// The record of `session_id` in `dir`, read, checked for trust and parsed; `None` when there is
/// no such record, it is not trusted or not one. Verified by nothing: the caller checks what it
/// relies on.
pub fn read(dir: &Dir, session_id: &str) -> Option<RunningRecord> {
    read_file(dir, &record_name(session_id)).ok()?.ok()
}

/// [`scan`], then remove every file that is evidently not a record: nothing could ever verify it,
/// and the directory exists to be read. The returned scan's `unreadable` holds what was removed
/// (`invalid`) and what was kept (not `invalid`): files that could not be read or are not
/// trusted, and files that are not records but could not be removed.
pub fn scan_pruning<R: Record>(dir: &Dir) -> Result<Scan<R>, String> {
    let mut scan = scan(dir)?;
    for file in &mut scan.unreadable {
        if file.invalid
            && let Err(err) = dir.unlink(&file.name)
        {
            file.invalid = false;
            file.reason = format!("{}, and it cannot be removed: {err}", file.reason);
        }
    }
    Ok(scan)
}

/// A record that survived a sweep.
#[derive(Debug)]
pub struct Kept {
    pub entry: Entry,
    /// `Some(why)` when the session is unreachable; `None` when it was verified (or, for a sweep
    /// without probes, passed layers 1 and 2).
    pub unreachable: Option<String>,
}

/// A record a sweep removed, and why.
#[derive(Debug)]
pub struct Pruned {
    pub path: PathBuf,
    pub reason: String,
}

/// What a sweep of the running directory found and did.
#[derive(Debug, Default)]
pub struct Sweep {
    /// Records kept, most recent first.
    pub kept: Vec<Kept>,
    /// Records removed: gone processes, and files that are not records.
    pub pruned: Vec<Pruned>,
    /// Files that could not be read, left in place.
    pub unreadable: Vec<Unreadable>,
}

/// How far a sweep checks each record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// All three layers: the door probed too (`mur ps`, whose listing says `unreachable`).
    Door,
    /// Layers 1 and 2 only: the process (`mur stop`, `mur token`, which reach the door
    /// themselves when they need it).
    Process,
}

/// Read every record in `dir`, check it as deep as `depth` says, and prune what is evidently
/// stale; `in_flight` holds, while it runs, the door probes not yet answered. The `Err` is the
/// directory being unreadable.
pub fn sweep(dir: &Dir, depth: Depth, in_flight: &InFlight) -> Result<Sweep, String> {
    let scan: Scan = scan_pruning(dir)?;
    let mut sweep = Sweep::default();
    for file in scan.unreadable {
        if file.invalid {
            sweep.pruned.push(Pruned {
                path: file.path,
                reason: file.reason,
            });
        } else {
            sweep.unreadable.push(file);
        }
    }
    let liveness: Vec<Option<Liveness>> = if depth == Depth::Door {
        let records: Vec<&RunningRecord> = scan.entries.iter().map(|e| &e.record).collect();
        verify_all(&records, in_flight)
            .into_iter()
            .map(Some)
            .collect()
    } else {
        scan.entries
            .iter()
            .map(|e| process_liveness(&e.record))
            .collect()
    };
    for (entry, liveness) in scan.entries.into_iter().zip(liveness) {
        match liveness {
            Some(Liveness::Gone(reason)) => match prune(&entry, End::Gone) {
                Ok(()) => sweep.pruned.push(Pruned {
                    path: entry.path,
                    reason,
                }),
                // Stale, and still there: say so rather than claim a prune, and list nothing.
                Err(why) => sweep.unreadable.push(Unreadable {
                    path: entry.path,
                    reason: format!("stale ({reason}) but cannot be removed: {why}"),
                    invalid: false,
                    name: entry.name,
                }),
            },
            Some(Liveness::Unreachable(why)) => sweep.kept.push(Kept {
                entry,
                unreachable: Some(why),
            }),
            Some(Liveness::Live) | None => sweep.kept.push(Kept {
                entry,
                unreachable: None,
            }),
        }
    }
    Ok(sweep)
}

/// Remove one record and its control token file, through the directory it was read from, and
/// the session's task directories if it left any; keep it as ended (`ended::keep_found`: its
/// log stays, marked, unless the session kept its own ended record already). For a
/// [`Liveness::Gone`] reading only; `end` says how it ended as far as the caller knows. The
/// `Err` is the OS error that kept the record in place (a read-only filesystem, say), or an
/// entry whose name is not its record's (`check_name`): then nothing is removed, whoever
/// built the entry — [`scan`] never yields one, and [`Entry::new`] is public.
pub fn prune(entry: &Entry, end: End) -> Result<(), std::io::Error> {
    check_name(&entry.record, &entry.name, &entry.path)
        .map_err(|why| std::io::Error::new(std::io::ErrorKind::InvalidData, why))?;
    let removed = entry.dir.unlink(&entry.name);
    let _ = entry.dir.unlink(entry.control_name());
    if removed.is_ok() {
        crate::home::remove_task_dirs(&entry.record.session_id);
        crate::session::identity::remove_task_dirs(entry.record.session_id.as_str());
        ended::keep_found(&entry.record, end, &entry.dir);
    }
    removed
}

impl<R> Entry<R> {
    /// An entry for `record`, read from `name` in `dir`.
    pub fn new(dir: &Dir, name: impl Into<OsString>, record: R) -> Self {
        let name = name.into();
        Self {
            path: dir.join(&name),
            record,
            dir: dir.clone(),
            name,
        }
    }
}

impl Entry {
    /// Whether its file is still in the directory it was read through: a session removes its
    /// own as its last act before it exits. Read through the directory's descriptor; a listing
    /// that fails says it still is.
    pub fn still_recorded(&self) -> bool {
        self.dir
            .names()
            .map_or(true, |names| names.contains(&self.name))
    }

    /// The name of the control token file beside this record (whether or not the session
    /// declares one).
    fn control_name(&self) -> OsString {
        Path::new(&self.name)
            .with_extension(CONTROL_EXTENSION)
            .into_os_string()
    }

    /// The control token file beside this record, for messages.
    pub fn control_path(&self) -> PathBuf {
        self.dir.join(self.control_name())
    }

    /// The control token file beside this record, read through the running directory's
    /// descriptor (no link followed, never blocking) and checked by [`check_trust`]: an
    /// untrusted one is an [`ReadRefusal::Invalid`] saying why.
    pub fn read_control(&self, max: u64) -> Result<Vec<u8>, ReadRefusal> {
        let small = self.dir.read_small(self.control_name(), max)?;
        check_trust(&small, &self.control_path()).map_err(ReadRefusal::Invalid)?;
        Ok(small.bytes)
    }
}

/// `<session_id>.json`.
pub fn record_name(session_id: &str) -> OsString {
    format!("{session_id}.{RECORD_EXTENSION}").into()
}

/// `<session_id>.control`: where a session declaring `control` keeps its control token.
pub fn control_name(session_id: &str) -> OsString {
    format!("{session_id}.{CONTROL_EXTENSION}").into()
}

/// One session's record, on disk for exactly as long as this guard lives.
///
/// A guard rather than a removal at each return, because a session that ended without retiring
/// its record would leave an address that resolves to a port nothing holds.
pub struct RecordGuard {
    dir: Dir,
    session_id: String,
}

impl RecordGuard {
    /// Write `record` into `dir` (staged, `0600`, through its descriptor). The `Err` names the
    /// path; failing to record never fails a session — its caller warns and runs on,
    /// unaddressable.
    pub fn write(dir: &Dir, record: &RunningRecord) -> Result<Self, String> {
        let session_id = record.session_id.as_str().to_string();
        dir.write_private(record_name(&session_id), &record.to_bytes())?;
        Ok(Self {
            dir: dir.clone(),
            session_id,
        })
    }
}

impl RecordGuard {
    /// Write `record` again in its place (staged, as at first): a fact of the session's that
    /// changed while it runs (`log_lines_dropped`).
    pub fn rewrite(&self, record: &RunningRecord) -> Result<(), String> {
        self.dir
            .write_private(record_name(&self.session_id), &record.to_bytes())
    }
}

impl Drop for RecordGuard {
    fn drop(&mut self) {
        let _ = self.dir.unlink(record_name(&self.session_id));
        // The control token goes with the record, whichever guard drops first.
        let _ = self.dir.unlink(control_name(&self.session_id));
    }
}

/// One session's control token file, on disk for exactly as long as this guard lives.
///
/// Separate from [`RecordGuard`] because the token is written *before* the record, and a session
/// whose record could not be written still runs and still holds a token.
pub struct ControlGuard {
    dir: Dir,
    session_id: String,
}

impl ControlGuard {
    /// Write `token` to `<dir>/<session_id>.control` at `0600`. The `Err` never carries the token.
    pub fn write(
        dir: &Dir,
        session_id: &str,
        token: &crate::secret::Secret,
    ) -> Result<Self, String> {
        dir.write_private(control_name(session_id), token.expose().as_bytes())?;
        Ok(Self {
            dir: dir.clone(),
            session_id: session_id.to_string(),
        })
    }
}

impl Drop for ControlGuard {
    fn drop(&mut self) {
        let _ = self.dir.unlink(control_name(&self.session_id));
        let _ = self.dir.unlink(record_name(&self.session_id));
    }
}

pub mod ended;
pub mod names;
mod verify;

pub use verify::{InFlight, Liveness, process_liveness, verify, verify_all};

#[cfg(test)]
mod tests;
