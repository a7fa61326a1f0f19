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

use std::path::{Path, PathBuf};
use std::thread;

use crate::door_client;
use crate::json::record::{MAX_RECORD_BYTES, RunningRecord};
use crate::process::{self, NotSignallable};
use crate::sys::fs::{self, ReadRefusal};

/// Extension of a record file; the only one [`scan`] reads.
const RECORD_EXTENSION: &str = "json";
/// Extension of a control token file beside its record.
const CONTROL_EXTENSION: &str = "control";

/// The most door probes in flight at once. Wide enough that 200 silent doors cost one probe
/// timeout, not several; bounded so 10,000 silent doors do not mean 10,000 threads.
pub const MAX_CONCURRENT_PROBES: usize = 1024;

/// One record as read from the running directory.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The file it was read from: what pruning removes, whatever the record claims its id is.
    pub path: PathBuf,
    pub record: RunningRecord,
}

/// A `.json` file in the running directory that is not a readable record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub path: PathBuf,
    pub reason: String,
    /// Whether what was read is evidence the file is not a record (malformed, a link, too large)
    /// as opposed to a read that failed (`EACCES`, `EMFILE`), which proves nothing.
    pub invalid: bool,
}

/// What one pass over a running directory found. Nothing is created, re-moded or removed.
#[derive(Debug, Default)]
pub struct Scan {
    /// Every record that parses, most recent session first.
    pub entries: Vec<Entry>,
    pub unreadable: Vec<Unreadable>,
}

/// Every `.json` entry of `dir`, read and parsed.
///
/// Only `.json` is read: staging files end in `.tmp`, so a record mid-write is neither a record
/// nor unreadable, and `.control` files are not records. A missing `dir` is an empty machine;
/// any other failure to list it (a regular file in its place, no permission) is the `Err`,
/// naming the path.
pub fn scan(dir: &Path) -> Result<Scan, String> {
    let listing = match std::fs::read_dir(dir) {
        Ok(listing) => listing,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Scan::default()),
        Err(err) => return Err(format!("{}: {err}", dir.display())),
    };
    let mut scan = Scan::default();
    for item in listing {
        let item = item.map_err(|err| format!("{}: {err}", dir.display()))?;
        let path = item.path();
        if path.extension().and_then(|e| e.to_str()) != Some(RECORD_EXTENSION) {
            continue;
        }
        let parsed = read_file(&path);
        let (reason, invalid) = match parsed {
            Ok(Ok(record)) => {
                scan.entries.push(Entry { path, record });
                continue;
            }
            Err(ReadRefusal::Vanished) => continue,
            Ok(Err(reason)) | Err(ReadRefusal::Invalid(reason)) => (reason, true),
            Err(ReadRefusal::Io(reason)) => (format!("cannot be read: {reason}"), false),
        };
        scan.unreadable.push(Unreadable {
            path,
            reason,
            invalid,
        });
    }
    scan.entries
        .sort_by(|a, b| b.record.session_id.cmp(&a.record.session_id));
    scan.unreadable.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(scan)
}

/// One record file: the `Ok(Err)` says why what was read is not a record.
fn read_file(path: &Path) -> Result<Result<RunningRecord, String>, ReadRefusal> {
    fs::read_small_regular(path, MAX_RECORD_BYTES).map(|bytes| RunningRecord::from_slice(&bytes))
}

/// The record of `session_id` in `dir`, read and parsed; `None` when there is no such record or
/// it is not one. Verified by nothing: the caller checks what it relies on.
pub fn read(dir: &Path, session_id: &str) -> Option<RunningRecord> {
    read_file(&record_path(dir, session_id)).ok()?.ok()
}

/// [`scan`], then remove every file that is evidently not a record: nothing could ever verify it,
/// and the directory exists to be read. The returned scan's `unreadable` holds what was removed
/// (`invalid`) and what was kept (not `invalid`): files that could not be read, and files that
/// are not records but could not be removed.
pub fn list(dir: &Path) -> Result<Scan, String> {
    let mut scan = scan(dir)?;
    for file in &mut scan.unreadable {
        if file.invalid
            && let Err(err) = fs::remove_if_present(&file.path)
        {
            file.invalid = false;
            file.reason = format!("{}, and it cannot be removed: {err}", file.reason);
        }
    }
    Ok(scan)
}

/// What all three layers say about a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// The recorded process holds the pid and its door answers as the recorded session.
    Live,
    /// The process is there (or could not be checked), but its door did not answer as the session.
    /// The record is kept; the string says why.
    Unreachable(String),
    /// The recorded process is gone; the record may be pruned.
    Gone(String),
}

/// Layers 1 and 2 alone: local and cheap, no network. `None` means the process is the recorded
/// one and only the door probe can say more.
pub fn process_liveness(record: &RunningRecord) -> Option<Liveness> {
    match process::check(record.pid, &record.process_start) {
        Ok(()) => None,
        Err(NotSignallable::Gone(why)) => Some(Liveness::Gone(why)),
        Err(NotSignallable::Refused(why)) => Some(Liveness::Unreachable(why)),
    }
}

/// All three layers, door probe included (blocking, bounded by the probe's deadlines).
pub fn verify(record: &RunningRecord) -> Liveness {
    process_liveness(record).unwrap_or_else(|| layer_3(record))
}

/// Layer 3 alone: the door answers as the record's session. For a record that passed 1 and 2.
fn layer_3(record: &RunningRecord) -> Liveness {
    match door_client::probe_session_id(&record.url, record.door_token.as_ref()) {
        Ok(id) if id == record.session_id.as_str() => Liveness::Live,
        Ok(other) => Liveness::Unreachable(format!(
            "the door at {} answers for session {}",
            record.url,
            other.escape_debug()
        )),
        Err(why) => Liveness::Unreachable(why),
    }
}

/// [`verify`] for every record at once, answers in the same order.
///
/// Layers 1 and 2 run inline; only records that pass them are probed, on up to
/// [`MAX_CONCURRENT_PROBES`] threads, so the whole takes about as long as the slowest probe rather
/// than the sum of them.
pub fn verify_all(records: &[&RunningRecord]) -> Vec<Liveness> {
    let mut answers: Vec<Option<Liveness>> = records
        .iter()
        .map(|record| process_liveness(record))
        .collect();
    let to_probe: Vec<usize> = (0..records.len())
        .filter(|&i| answers[i].is_none())
        .collect();
    let width = to_probe.len().min(MAX_CONCURRENT_PROBES);
    if width > 0 {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let probed: Vec<(usize, Liveness)> = thread::scope(|scope| {
            let workers: Vec<_> = (0..width)
                .map(|_| {
                    thread::Builder::new()
                        .stack_size(128 * 1024)
                        .spawn_scoped(scope, || {
                            let mut done = Vec::new();
                            loop {
                                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                let Some(&i) = to_probe.get(n) else {
                                    break done;
                                };
                                done.push((i, layer_3(records[i])));
                            }
                        })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|worker| match worker {
                    Ok(handle) => handle.join().unwrap_or_default(),
                    Err(_) => Vec::new(),
                })
                .collect()
        });
        for (i, liveness) in probed {
            answers[i] = Some(liveness);
        }
    }
    // A worker that could not be spawned leaves its records unanswered: say so, keep them.
    answers
        .into_iter()
        .map(|a| a.unwrap_or_else(|| Liveness::Unreachable("the probe could not run".into())))
        .collect()
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
/// stale. The `Err` is the directory being unreadable.
pub fn sweep(dir: &Path, depth: Depth) -> Result<Sweep, String> {
    let scan = list(dir)?;
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
        verify_all(&records).into_iter().map(Some).collect()
    } else {
        scan.entries
            .iter()
            .map(|e| process_liveness(&e.record))
            .collect()
    };
    for (entry, liveness) in scan.entries.into_iter().zip(liveness) {
        match liveness {
            Some(Liveness::Gone(reason)) => match prune(&entry) {
                Ok(()) => sweep.pruned.push(Pruned {
                    path: entry.path,
                    reason,
                }),
                // Stale, and still there: say so rather than claim a prune, and list nothing.
                Err(why) => sweep.unreadable.push(Unreadable {
                    path: entry.path,
                    reason: format!("stale ({reason}) but cannot be removed: {why}"),
                    invalid: false,
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

/// Remove one record and its control token file. For a [`Liveness::Gone`] reading only. The
/// `Err` is the OS error that kept the record in place (a read-only filesystem, say).
pub fn prune(entry: &Entry) -> Result<(), std::io::Error> {
    let removed = fs::remove_if_present(&entry.path);
    let _ = fs::remove_if_present(&entry.control_path());
    removed
}

impl Entry {
    /// The control token file beside this record (whether or not the session declares one).
    pub fn control_path(&self) -> PathBuf {
        self.path.with_extension(CONTROL_EXTENSION)
    }
}

/// `<dir>/<session_id>.json`.
pub fn record_path(dir: &Path, session_id: &str) -> PathBuf {
    dir.join(format!("{session_id}.{RECORD_EXTENSION}"))
}

/// `<dir>/<session_id>.control`: where a session declaring `control` keeps its control token.
pub fn control_path(dir: &Path, session_id: &str) -> PathBuf {
    dir.join(format!("{session_id}.{CONTROL_EXTENSION}"))
}

/// One session's record, on disk for exactly as long as this guard lives.
///
/// A guard rather than a removal at each return, because a session that ended without retiring
/// its record would leave an address that resolves to a port nothing holds.
pub struct RecordGuard {
    path: PathBuf,
}

impl RecordGuard {
    /// Write `record` into `dir` (staged, `0600`). The `Err` names the path; failing to record
    /// never fails a session — its caller warns and runs on, unaddressable.
    pub fn write(dir: &Path, record: &RunningRecord) -> Result<Self, String> {
        let path = record_path(dir, record.session_id.as_str());
        fs::write_private(&path, &record.to_bytes())?;
        Ok(Self { path })
    }
}

impl Drop for RecordGuard {
    fn drop(&mut self) {
        let _ = fs::remove_if_present(&self.path);
        // The control token goes with the record, whichever guard drops first.
        let _ = fs::remove_if_present(&self.path.with_extension(CONTROL_EXTENSION));
    }
}

/// One session's control token file, on disk for exactly as long as this guard lives.
///
/// Separate from [`RecordGuard`] because the token is written *before* the record, and a session
/// whose record could not be written still runs and still holds a token.
pub struct ControlGuard {
    path: PathBuf,
}

impl ControlGuard {
    /// Write `token` to `<dir>/<session_id>.control` at `0600`. The `Err` never carries the token.
    pub fn write(
        dir: &Path,
        session_id: &str,
        token: &crate::secret::Secret,
    ) -> Result<Self, String> {
        let path = control_path(dir, session_id);
        fs::write_private(&path, token.expose().as_bytes())?;
        Ok(Self { path })
    }
}

impl Drop for ControlGuard {
    fn drop(&mut self) {
        let _ = fs::remove_if_present(&self.path);
        let _ = fs::remove_if_present(&self.path.with_extension(RECORD_EXTENSION));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn dir(tag: &str) -> Dir {
        let path = std::env::temp_dir().join(format!("mur-running-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Dir(path)
    }

    fn record(hex_tail: char) -> RunningRecord {
        let id = format!("ses_0199c4e2f1b7712a9d3e4f506172839{hex_tail}");
        let json = serde_json::json!({
            "session_id": id, "url": "127.0.0.1:1", "pid": std::process::id(),
            "process_start": crate::sys::proc::process_start_token(std::process::id()).unwrap(),
            "capsule_name": "demo", "capsule_version": "0.1.0", "workdir": "/tmp",
            "outlives_launcher": true, "started_at": "2026-01-01T00:00:00Z"});
        RunningRecord::from_slice(json.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn scan_orders_newest_first_and_leaves_staging_control_and_broken_files() {
        let d = dir("scan");
        let (older, newer) = (record('0'), record('1'));
        let _a = RecordGuard::write(&d.0, &older).unwrap();
        let _b = RecordGuard::write(&d.0, &newer).unwrap();
        std::fs::write(d.0.join("broken.json"), "{").unwrap();
        std::fs::write(d.0.join(".x.json.1.2.tmp"), "{").unwrap();
        std::fs::write(control_path(&d.0, older.session_id.as_str()), "ctl1.a.b").unwrap();

        let found = scan(&d.0).unwrap();
        let ids: Vec<_> = found.entries.iter().map(|e| e.record.clone()).collect();
        assert_eq!(ids, vec![newer, older]);
        assert_eq!(found.unreadable.len(), 1);
        assert!(found.unreadable[0].invalid);
        assert!(d.0.join("broken.json").exists(), "scan removes nothing");

        let listed = list(&d.0).unwrap();
        assert_eq!(listed.entries.len(), 2);
        assert!(
            !d.0.join("broken.json").exists(),
            "list prunes what is not a record"
        );
        assert!(d.0.join(".x.json.1.2.tmp").exists());
        assert!(control_path(&d.0, "ses_0199c4e2f1b7712a9d3e4f5061728390").exists());
    }

    #[test]
    fn a_missing_dir_is_empty_and_a_file_in_its_place_is_an_error_naming_it() {
        let d = dir("missing");
        let missing = d.0.join("running");
        assert!(scan(&missing).unwrap().entries.is_empty());
        assert!(!missing.exists());
        std::fs::write(&missing, "").unwrap();
        let err = scan(&missing).unwrap_err();
        assert!(err.starts_with(&missing.display().to_string()), "{err}");
    }

    #[test]
    fn prune_and_either_guard_take_the_record_and_its_control_file() {
        let d = dir("guards");
        let rec = record('2');
        let id = rec.session_id.as_str().to_string();
        let token = Secret::new("ctl1.token.mac".into());

        let control = ControlGuard::write(&d.0, &id, &token).unwrap();
        let guard = RecordGuard::write(&d.0, &rec).unwrap();
        assert_eq!(
            crate::sys::fs::mode_of(&control_path(&d.0, &id)).unwrap(),
            0o600
        );
        assert_eq!(
            crate::sys::fs::mode_of(&record_path(&d.0, &id)).unwrap(),
            0o600
        );
        let entry = scan(&d.0).unwrap().entries.remove(0);
        prune(&entry).unwrap();
        assert!(!record_path(&d.0, &id).exists() && !control_path(&d.0, &id).exists());
        std::mem::forget(control);
        std::mem::forget(guard);

        // The record guard dropping takes the control file too…
        let _control = ControlGuard::write(&d.0, &id, &token).unwrap();
        drop(RecordGuard::write(&d.0, &rec).unwrap());
        assert!(!control_path(&d.0, &id).exists());
        // …and the control guard dropping takes the record.
        let _record = RecordGuard::write(&d.0, &rec).unwrap();
        drop(ControlGuard::write(&d.0, &id, &token).unwrap());
        assert!(!record_path(&d.0, &id).exists());
    }

    #[test]
    fn a_live_process_behind_a_silent_port_is_unreachable_not_gone() {
        let mut rec = record('3');
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        rec.url = listener.local_addr().unwrap().to_string();
        drop(listener);
        assert!(matches!(verify(&rec), Liveness::Unreachable(_)));
        rec.process_start = "not-this-process".into();
        assert!(matches!(verify(&rec), Liveness::Gone(why) if why.contains("another time")));
        rec.pid = 0;
        assert!(matches!(verify(&rec), Liveness::Gone(_)));
    }
}
