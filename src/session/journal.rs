//! A named session's task store on disk (`mur run --name NAME`): `~/.murmur/store/NAME/journal`,
//! an append-only journal of every task's start and end, read back when a session starts again
//! under the same name, so `tasks/get`, `GetTask`, `ListTasks` and a resubscribe find every task
//! from before the restart (`format` is its bytes).
//!
//! Invariants:
//! - **One writer.** Only the holder of the name's claim (`running::names`, a `flock`) opens the
//!   journal, after claiming it: two sessions never append to one file.
//! - **Nothing a client saw is lost to a crash of the session.** An ended task's entry is
//!   written (`write(2)`, whole, under the appender's lock: a leaf) by whoever ended it, once
//!   the engine lock is released and *before* its waiters are woken (`tasks/outbox.rs`): once a
//!   client has read `completed`, the answer is in the kernel's hands, and a SIGKILL cannot take
//!   it. `fdatasync` is the writer thread's, in groups — every entry appended while the last
//!   one ran, or in the `SYNC_INTERVAL` since it began, goes in the next — so no door worker
//!   or task thread ever waits for the disk; a crash of the *machine* loses at most the last
//!   group's entries.
//! - **Bounded**, as the store of finished tasks is: rewritten (compacted) to the newest
//!   [`KEPT_TASKS`] ended tasks within [`BUDGET`] bytes, and the tasks still running, whenever
//!   it holds `COMPACT_AT` (four) times as many ended tasks or twice as many bytes; at every
//!   start too. A rewrite is written beside it, synced, and renamed over it: a crash leaves the old
//!   journal or the new. While the session runs it copies the entries it keeps byte for byte,
//!   where the appender's index says they lie (`compact`).
//! - **Not another's.** The store is one capsule's (its `capsule` file): another capsule
//!   started under the name is refused. A journal not ours or not 0600 is left unread.
//! - **Never silent, never in the way.** A torn tail is cut off with a warning; a journal that
//!   does not read is moved aside (`journal.corrupt-<time>`) and said, and what read before the
//!   damage is kept. No fault of the store stops a start: without a usable store the session
//!   runs with its tasks in memory only, and says so.
//! - 0700 directories, a 0600 file, opened through directory descriptors, following no link.

mod compact;
pub mod format;

use std::fs::File;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::store::{BUDGET, KEPT_TASKS, Summary};
use crate::a2a::task::{State, Task};
use crate::sys::dir::Dir;
use crate::sys::fs::ReadRefusal;
use compact::Slot;
use format::{Entry, Header, Kind};

/// The journal's file name in its name's directory.
const JOURNAL: &str = "journal";
/// Where a rewrite is written before it is renamed over the journal.
const REWRITE: &str = "journal.new";
/// A rewrite is due once the journal holds this many times [`KEPT_TASKS`] ended tasks. Each
/// rewrite copies up to the kept thousand, so the copying a task costs is a third of its own
/// bytes at four (it was all of them at two: 4% of an echo session's time, `perf`, in the
/// store bench); four thousand small entries still read back in milliseconds at a start.
const COMPACT_AT: usize = 4;
/// The largest journal read back: it is rewritten before it holds twice the store's budget.
const MAX_FILE: u64 = (3 * BUDGET + format::MAX_ENTRY) as u64;
/// The shortest time between two syncs: entries appended meanwhile wait for the next, so a
/// crash of the machine loses at most this much more.
const SYNC_INTERVAL: std::time::Duration = std::time::Duration::from_millis(10);
/// What a task that was running when its session died says, ended `failed` at the next start.
pub const INTERRUPTED: &str = "the session ended while this task ran (it was not finished)";

/// One entry due to be written, as the engine leaves it once its lock is released.
pub enum Pending {
    /// A task as it stands, not ended: `Kind::Started` when a turn is taken (a new task or a
    /// continuation), so that a crash before its end is known at the next start;
    /// `Kind::Waiting` when it asks for input, so that it waits again after a restart.
    Live {
        kind: Kind,
        task: Task,
        owner: String,
        seq: u64,
        turn: u32,
    },
    /// A task ended, and the bytes the store of finished tasks keeps.
    Ended {
        id: String,
        summary: Summary,
        body: Arc<[u8]>,
    },
}

/// What a session started again finds: the ended tasks kept (oldest first), each as the store
/// keeps it; the tasks that were running when the last session died, to run again
/// (`lifecycle.retry_interrupted`), as they were taken, by arrival, with their turn; the tasks
/// that were waiting for input, likewise; and how many were running.
pub struct Restored {
    pub tasks: Vec<(String, Summary, Arc<[u8]>)>,
    pub retried: Vec<(Task, Summary, u32)>,
    pub waiting: Vec<(Task, Summary, u32)>,
    pub interrupted: usize,
}

/// The open journal and its writer thread.
pub struct Journal {
    shared: Arc<Shared>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    dir: Dir,
    /// The store's instance name, for what is said about it.
    name: String,
    appender: Mutex<Appender>,
    /// Notified when entries were appended and wait for their sync, or the journal closes.
    written: Condvar,
}

/// The journal's file and what it holds, under the appender's lock.
struct Appender {
    file: Arc<File>,
    bytes: u64,
    /// Where each entry lies and whose it is, in file order — what a rewrite keeps is chosen
    /// from this and copied byte for byte, never read back and parsed. While a rewrite runs it
    /// holds only the entries appended since the rewrite began.
    index: Vec<Slot>,
    /// Ended tasks in the file: a rewrite is due at [`COMPACT_AT`] times [`KEPT_TASKS`].
    ended: usize,
    unsynced: bool,
    /// The writer waits for entries (and must be woken for them).
    waiting: bool,
    closed: bool,
    /// A write failed (said once): the next ones are still tried.
    failed: bool,
    /// `ended` and `bytes` when a rewrite last failed: the next is due only once the journal has
    /// grown as much again past them (never by moving `bytes`, the file's true length).
    failed_at: (usize, u64),
}

/// Say `message` about the store of `name` on the session's stderr.
fn warn(name: &str, message: &str) {
    crate::cli::warn("run", &format!("the task store of '{name}': {message}"));
}

/// Open (creating it if missing) the task store of instance name `name`, kept for `capsule`,
/// read what it holds and start its writer; `Ok(None)`, said, when there is no usable store. A
/// task that was running when the last session died is ended `failed` ([`INTERRUPTED`]), or,
/// when `retry`, kept started and handed back to run again; one waiting for input waits again.
/// The `Err`: the store is another capsule's (the start stops).
pub fn open(name: &str, capsule: &str, retry: bool) -> Result<Option<(Journal, Restored)>, String> {
    let Some(dir) = store_dir(name) else {
        return Ok(None);
    };
    if !owned_by(&dir, name, capsule)? {
        return Ok(None);
    }
    let Some(bytes) = read_trusted(&dir, name) else {
        return Ok(None);
    };
    let (entries, damage) = format::read(&bytes);
    match damage {
        Some(format::Damage::Torn { valid }) => warn(
            name,
            &format!(
                "its last entry was torn ({} bytes at byte {valid}, a write cut short): cut off",
                bytes.len() - valid
            ),
        ),
        Some(format::Damage::Corrupt { why, .. }) => set_aside(&dir, name, &why, entries.len()),
        None => {}
    }
    drop(bytes);
    let reduced = format::reduce(entries);
    let mut restored = Restored {
        tasks: Vec::new(),
        retried: Vec::new(),
        waiting: Vec::new(),
        interrupted: 0,
    };
    // What the new journal holds: the ended tasks, then the tasks not ended, as they will be.
    let mut kept = reduced.ended;
    for entry in reduced.unended {
        if entry.header.kind == Kind::Waiting {
            if let Some(task) = live(&entry) {
                restored.waiting.push(task);
                kept.push(entry);
            }
        } else if retry {
            restored.interrupted += 1;
            if let Some(task) = live(&entry) {
                restored.retried.push(task);
                kept.push(entry);
            }
        } else {
            restored.interrupted += 1;
            kept.extend(interrupt(entry));
        }
    }
    let (file, index) = match rewrite(&dir, &kept) {
        Ok(opened) => opened,
        Err(err) => {
            warn(
                name,
                &format!("{err}; tasks are kept in memory only (is the disk full?)"),
            );
            return Ok(None);
        }
    };
    let Some(journal) = Journal::start(dir, name, file, index) else {
        return Ok(None);
    };
    // The tasks failed here are ended ones from now on; the others are handed back live.
    kept.retain(|e| e.header.kind == Kind::Ended);
    restored.tasks = kept
        .into_iter()
        .map(|e| (e.header.id, e.header.summary, e.body))
        .collect();
    Ok(Some((journal, restored)))
}

/// `~/.murmur/store/NAME/`, created if missing and held; `None`, said, when it cannot be.
fn store_dir(name: &str) -> Option<Dir> {
    crate::home::private_dir(crate::home::STORE_DIR)
        .and_then(|store| crate::home::create_held(&store, name))
        .map_err(|err| {
            warn(
                name,
                &format!("{}; tasks are kept in memory only", String::from(err)),
            )
        })
        .ok()
}

/// The file in a store's directory naming the capsule whose tasks it keeps.
const CAPSULE: &str = "capsule";

/// Whether the store in `dir` is `capsule`'s: it is when it says so, or says nothing yet (then
/// it is claimed for it now). `Err` when another capsule's: one name's tasks are one capsule's,
/// and another's answers must not be served as this one's. `Ok(false)`, said, when its capsule
/// file cannot be read or written (the session keeps its tasks in memory only).
fn owned_by(dir: &Dir, name: &str, capsule: &str) -> Result<bool, String> {
    let path = dir.join(CAPSULE);
    let unusable = |why: String| {
        warn(
            name,
            &format!(
                "{why}; tasks are kept in memory only (remove {} to start the store afresh)",
                dir.path().display()
            ),
        );
        Ok(false)
    };
    match dir.read_small(CAPSULE, 4096) {
        Ok(small) => {
            if let Err(why) = trusted(&small.meta) {
                return unusable(format!("{} {why}: left unread", path.display()));
            }
            let held = String::from_utf8_lossy(&small.bytes).trim_end().to_string();
            if held == capsule {
                return Ok(true);
            }
            Err(format!(
                "the name '{name}' keeps the tasks of capsule '{held}' ({}), not of '{capsule}': \
                 run '{capsule}' under another --name, or remove {} to give the name to \
                 '{capsule}' (the tasks stored there are lost)",
                path.display(),
                dir.path().display()
            ))
        }
        Err(ReadRefusal::Vanished) => {
            match dir.write_private_synced(CAPSULE, format!("{capsule}\n").as_bytes()) {
                Ok(()) => Ok(true),
                Err(why) => unusable(why),
            }
        }
        Err(ReadRefusal::Invalid(why) | ReadRefusal::Io(why)) => {
            unusable(format!("{}: {why}", path.display()))
        }
    }
}

/// Why a file of the store, as `meta` describes it, is not to be trusted: not ours, or open to
/// others (anyone who could write it could plant answers a client would take for ours).
fn trusted(meta: &std::fs::Metadata) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let euid = crate::sys::proc::euid();
    if meta.uid() != euid {
        return Err(format!(
            "is owned by uid {}, not by uid {euid} who runs this session",
            meta.uid()
        ));
    }
    match meta.mode() & 0o7777 {
        0o600 => Ok(()),
        mode => Err(format!("has mode {mode:04o}, not 0600")),
    }
}

/// The journal's bytes (none yet when it is missing); `None`, said, when it is not to be read:
/// not ours or open to others (left as it is), or unreadable. One that does not read as a file
/// is set aside.
fn read_trusted(dir: &Dir, name: &str) -> Option<Vec<u8>> {
    let path = dir.join(JOURNAL);
    match dir.read_small(JOURNAL, MAX_FILE) {
        Ok(small) => match trusted(&small.meta) {
            Ok(()) => Some(small.bytes),
            Err(why) => {
                warn(
                    name,
                    &format!(
                        "{} {why}: left unread, and tasks are kept in memory only (if it is \
                         yours, chmod 0600 it; else remove {})",
                        path.display(),
                        dir.path().display()
                    ),
                );
                None
            }
        },
        Err(ReadRefusal::Vanished) => Some(Vec::new()),
        Err(ReadRefusal::Invalid(why)) => {
            set_aside(dir, name, &why, 0);
            Some(Vec::new())
        }
        Err(ReadRefusal::Io(why)) => {
            warn(
                name,
                &format!(
                    "{} cannot be read: {why}; tasks are kept in memory only",
                    path.display()
                ),
            );
            None
        }
    }
}

/// Move a journal that does not read aside, saying so: the entries before the damage
/// (`kept`) are what the session keeps of it. Only the newest [`CORRUPT_KEPT`] set aside are
/// kept: a store that keeps breaking must not fill the disk.
fn set_aside(dir: &Dir, name: &str, why: &str, kept: usize) {
    // In nanoseconds: two set aside within a second keep a name each.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let aside = format!("{JOURNAL}.corrupt-{nanos}");
    let moved = dir.rename(JOURNAL.as_ref(), aside.as_ref());
    let whither = match moved {
        Ok(()) => format!("moved aside to {}", dir.join(&aside).display()),
        Err(err) => format!("could not be moved aside ({err}) and is replaced"),
    };
    warn(
        name,
        &format!(
            "{} is corrupt ({why}): {whither}; {kept} task entries read before it are kept",
            dir.join(JOURNAL).display()
        ),
    );
    prune_set_aside(dir);
}

/// Journals set aside kept, at most: the newest.
const CORRUPT_KEPT: usize = 3;

/// Remove all but the newest [`CORRUPT_KEPT`] journals set aside (their names end in their
/// time, so the newest sort last).
fn prune_set_aside(dir: &Dir) {
    let prefix = format!("{JOURNAL}.corrupt-");
    let Ok(names) = dir.names() else {
        return;
    };
    let mut aside: Vec<(u128, std::ffi::OsString)> = names
        .into_iter()
        .filter_map(|n| {
            let time = n.to_str()?.strip_prefix(&prefix)?.parse().ok()?;
            Some((time, n))
        })
        .collect();
    aside.sort_unstable();
    let extra = aside.len().saturating_sub(CORRUPT_KEPT);
    for (_, old) in aside.drain(..extra) {
        let _ = dir.unlink(&old);
    }
}

/// The task a live entry names, as it stands, its summary and its turn.
fn live(entry: &Entry) -> Option<(Task, Summary, u32)> {
    let task = serde_json::from_slice(&entry.body).ok()?;
    Some((task, entry.header.summary.clone(), entry.header.turn.max(1)))
}

/// The task a started entry names, ended `failed` as one whose session died while it ran.
fn interrupt(started: Entry) -> Option<Entry> {
    let mut task: Task = serde_json::from_slice(&started.body).ok()?;
    task.state = State::Failed;
    task.note = Some(INTERRUPTED.into());
    task.updated = crate::time::unix_now();
    let mut header = started.header;
    header.kind = Kind::Ended;
    header.summary.state = task.state;
    header.summary.updated = task.updated;
    let body = serde_json::to_vec(&task).ok()?.into();
    Some(Entry { header, body })
}

/// Write `entries` as a whole new journal (beside it, synced, renamed over it, the directory
/// synced); the new journal open to append to, and where each entry lies in it.
fn rewrite(dir: &Dir, entries: &[Entry]) -> Result<(File, Vec<Slot>), String> {
    let mut bytes = format::MAGIC.to_vec();
    let mut index = Vec::with_capacity(entries.len());
    for entry in entries {
        let at = bytes.len() as u64;
        let len = format::encode(&mut bytes, &entry.header, &entry.body);
        index.push(Slot::of(&entry.header, at, len, entry.body.len()));
    }
    dir.write_private_synced(JOURNAL, &bytes)?;
    let file = dir
        .append_private(JOURNAL)
        .and_then(|file| dir.sync().map(|()| file))
        .map_err(|err| format!("cannot open {}: {err}", dir.join(JOURNAL).display()))?;
    Ok((file, index))
}

impl Journal {
    /// Start the writer of the journal `file` of store `name`, whose entries lie where `index`
    /// says; `None`, said, when no thread can be had.
    fn start(dir: Dir, name: &str, file: File, index: Vec<Slot>) -> Option<Self> {
        let ended = index.iter().filter(|s| s.kind == Kind::Ended).count();
        let shared = Arc::new(Shared {
            dir,
            name: name.to_string(),
            appender: Mutex::new(Appender {
                bytes: file.metadata().map_or(0, |m| m.len()),
                file: Arc::new(file),
                index,
                ended,
                unsynced: false,
                waiting: false,
                closed: false,
                failed: false,
                failed_at: (0, 0),
            }),
            written: Condvar::new(),
        });
        let writer = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("journal".into())
            .spawn(move || writer.sync_behind());
        match spawned {
            Ok(writer) => Some(Self {
                shared,
                writer: Mutex::new(Some(writer)),
            }),
            Err(err) => {
                warn(
                    name,
                    &format!("no writer thread: {err}; tasks are kept in memory only"),
                );
                None
            }
        }
    }

    /// Write `pending` now — whole, in one `write(2)` — its sync left to the writer thread.
    /// Called with no lock held (`tasks/outbox.rs`), before anyone is told of these tasks.
    pub fn append(&self, pending: Vec<Pending>) {
        let mut bytes = Vec::new();
        let mut slots = Vec::with_capacity(pending.len());
        for entry in pending {
            let (header, body) = match entry {
                Pending::Live {
                    kind,
                    task,
                    owner,
                    seq,
                    turn,
                } => {
                    let Ok(body) = serde_json::to_vec(&task) else {
                        continue;
                    };
                    let id = task.id.to_string();
                    let summary = Summary::of(&task, owner, seq);
                    (
                        Header {
                            kind,
                            id,
                            turn,
                            summary,
                        },
                        Arc::from(body),
                    )
                }
                Pending::Ended { id, summary, body } => {
                    let header = Header {
                        kind: Kind::Ended,
                        id,
                        turn: 0,
                        summary,
                    };
                    (header, body)
                }
            };
            let at = bytes.len() as u64;
            let len = format::encode(&mut bytes, &header, &body);
            slots.push(Slot::of(&header, at, len, body.len()));
        }
        let mut appender = self.shared.lock();
        match appender.file.as_ref().write_all(&bytes) {
            Ok(()) => {
                let base = appender.bytes;
                appender.ended += slots.iter().filter(|s| s.kind == Kind::Ended).count();
                appender
                    .index
                    .extend(slots.into_iter().map(|s| s.moved(base)));
                appender.bytes += bytes.len() as u64;
                // Only a writer waiting needs waking: one syncing will look again when done.
                if !std::mem::replace(&mut appender.unsynced, true) && appender.waiting {
                    self.shared.written.notify_one();
                }
            }
            // A write cut short leaves part of an entry: cut back to the last whole one, so
            // later entries do not follow a torn one and read back as damage at the next start.
            Err(err) if !appender.failed => {
                let _ = appender.file.set_len(appender.bytes);
                appender.failed = true;
                drop(appender);
                self.shared.warn(&format!(
                    "cannot be written ({err}); tasks ending now may not survive a restart \
                     (is the disk full?)"
                ));
            }
            Err(_) => {
                let _ = appender.file.set_len(appender.bytes);
            }
        }
    }

    /// Sync what is written and stop the writer: the session ends in order. Once is enough;
    /// dropping the journal does it too.
    pub fn close(&self) {
        self.shared.lock().closed = true;
        self.shared.written.notify_one();
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
    }
}

impl Drop for Journal {
    /// A journal dropped unclosed — one the engine already had, or a start that failed —
    /// ends its writer rather than leave it waiting for entries that cannot come.
    fn drop(&mut self) {
        self.close();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Appender> {
        self.appender.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Say `message` about this store, naming its journal.
    fn warn(&self, message: &str) {
        let path = self.dir.join(JOURNAL);
        warn(&self.name, &format!("{}: {message}", path.display()));
    }

    /// The writer thread: sync what was appended, in groups, until the journal closes; rewrite
    /// it when it has grown past its bounds ([`COMPACT_AT`]).
    fn sync_behind(&self) {
        loop {
            let (file, due) = {
                let mut appender = self.lock();
                while !appender.unsynced && !appender.closed {
                    appender.waiting = true;
                    appender = self
                        .written
                        .wait(appender)
                        .unwrap_or_else(|p| p.into_inner());
                    appender.waiting = false;
                }
                if !appender.unsynced {
                    return;
                }
                appender.unsynced = false;
                let (ended, bytes) = appender.failed_at;
                let due = appender.ended.saturating_sub(ended) > COMPACT_AT * KEPT_TASKS
                    || appender.bytes.saturating_sub(bytes) > 2 * BUDGET as u64;
                (appender.file.clone(), due)
            };
            // Best effort: a failed sync leaves the entries where `write` put them.
            let began = std::time::Instant::now();
            let _ = file.sync_data();
            if due {
                self.compact();
            }
            // One group a SYNC_INTERVAL at most: every sync commits the filesystem's journal
            // too, work the door's requests would otherwise wait behind.
            std::thread::sleep(SYNC_INTERVAL.saturating_sub(began.elapsed()));
        }
    }
}
