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
//!   it holds twice as many ended tasks or twice as many bytes; at every start too. A rewrite is
//!   written beside it, synced, and renamed over it: a crash leaves the old journal or the new.
//! - **Never silent, never in the way.** A torn tail is cut off with a warning; a journal that
//!   does not read is moved aside (`journal.corrupt-<time>`) and said, and what read before the
//!   damage is kept. No fault of the store stops a start: without a usable store the session
//!   runs with its tasks in memory only, and says so.
//! - 0700 directories, a 0600 file, opened through directory descriptors, following no link.

pub mod format;

use std::fs::File;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::store::{BUDGET, KEPT_TASKS, Summary};
use crate::a2a::task::{State, Task};
use crate::sys::dir::Dir;
use crate::sys::fs::ReadRefusal;
use format::{Entry, Header, Kind};

/// The journal's file name in its name's directory.
const JOURNAL: &str = "journal";
/// Where a rewrite is written before it is renamed over the journal.
const REWRITE: &str = "journal.new";
/// The largest journal read back: it is rewritten before it holds twice the store's budget.
const MAX_FILE: u64 = (3 * BUDGET + format::MAX_ENTRY) as u64;
/// The shortest time between two syncs: entries appended meanwhile wait for the next, so a
/// crash of the machine loses at most this much more.
const SYNC_INTERVAL: std::time::Duration = std::time::Duration::from_millis(10);
/// What a task that was running when its session died says, ended `failed` at the next start.
pub const INTERRUPTED: &str = "the session ended while this task ran (it was not finished)";

/// One entry due to be written, as the engine leaves it once its lock is released.
pub enum Pending {
    /// A task taken: written so that a crash before its end is known at the next start.
    Started { task: Task, owner: String, seq: u64 },
    /// A task ended, and the bytes the store of finished tasks keeps.
    Ended {
        id: String,
        summary: Summary,
        body: Arc<[u8]>,
    },
}

/// What a session started again finds: the ended tasks kept (oldest first), each as the store
/// keeps it; the tasks that were running when the last session died, to run again
/// (`lifecycle.retry_interrupted`), as they were taken, by arrival; and how many were running.
pub struct Restored {
    pub tasks: Vec<(String, Summary, Arc<[u8]>)>,
    pub retried: Vec<(Task, Summary)>,
    pub interrupted: usize,
}

/// The open journal and its writer thread.
pub struct Journal {
    shared: Arc<Shared>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    dir: Dir,
    appender: Mutex<Appender>,
    /// Notified when entries were appended and wait for their sync, or the journal closes.
    written: Condvar,
}

/// The journal's file and what it holds, under the appender's lock.
struct Appender {
    file: Arc<File>,
    bytes: u64,
    /// Ended tasks in the file: a rewrite is due at twice [`KEPT_TASKS`].
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

/// Open (creating it if missing) the task store of instance name `name`, read what it holds and
/// start its writer; `None`, said, when there is no usable store. A task that was running when
/// the last session died is ended `failed` ([`INTERRUPTED`]), or, when `retry`, kept started
/// and handed back to run again.
pub fn open(name: &str, retry: bool) -> Option<(Journal, Restored)> {
    let dir = crate::home::private_dir(crate::home::STORE_DIR)
        .and_then(|store| crate::home::create_held(&store, name))
        .map_err(|err| {
            warn(
                name,
                &format!("{}; tasks are kept in memory only", String::from(err)),
            )
        })
        .ok()?;
    let bytes = match dir.read_small(JOURNAL, MAX_FILE) {
        Ok(small) => small.bytes,
        Err(ReadRefusal::Vanished) => Vec::new(),
        Err(ReadRefusal::Invalid(why)) => {
            set_aside(&dir, name, &why, 0);
            Vec::new()
        }
        Err(ReadRefusal::Io(why)) => {
            warn(name, &format!("{why}; tasks are kept in memory only"));
            return None;
        }
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
    let reduced = format::reduce(entries);
    let interrupted = reduced.unended.len();
    let mut ended = reduced.ended;
    let mut retried = Vec::new();
    let mut kept = ended.len();
    if retry {
        retried = reduced.unended.iter().filter_map(started).collect();
        ended.extend(reduced.unended);
    } else {
        ended.extend(reduced.unended.into_iter().filter_map(interrupt));
        kept = ended.len();
    }
    let file = rewrite(&dir, &ended)
        .map_err(|err| {
            warn(
                name,
                &format!("cannot be written: {err}; tasks are kept in memory only"),
            )
        })
        .ok()?;
    let shared = Arc::new(Shared {
        dir,
        appender: Mutex::new(Appender {
            bytes: file.metadata().map_or(0, |m| m.len()),
            file: Arc::new(file),
            ended: ended.len(),
            unsynced: false,
            waiting: false,
            closed: false,
            failed: false,
            failed_at: (0, 0),
        }),
        written: Condvar::new(),
    });
    let writer = shared.clone();
    let writer = std::thread::Builder::new()
        .name("journal".into())
        .spawn(move || writer.sync_behind())
        .map_err(|err| {
            warn(
                name,
                &format!("no writer thread: {err}; tasks are kept in memory only"),
            )
        })
        .ok()?;
    ended.truncate(kept);
    let tasks = ended
        .into_iter()
        .map(|e| (e.header.id, e.header.summary, e.body))
        .collect();
    let journal = Journal {
        shared,
        writer: Mutex::new(Some(writer)),
    };
    let restored = Restored {
        tasks,
        retried,
        interrupted,
    };
    Some((journal, restored))
}

/// Move a journal that does not read aside, saying so: the entries before the damage
/// (`kept`) are what the session keeps of it.
fn set_aside(dir: &Dir, name: &str, why: &str, kept: usize) {
    let aside = format!("{JOURNAL}.corrupt-{}", crate::time::unix_now());
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
}

/// The task a started entry names, as it was taken, and its summary.
fn started(entry: &Entry) -> Option<(Task, Summary)> {
    let task = serde_json::from_slice(&entry.body).ok()?;
    Some((task, entry.header.summary.clone()))
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

/// Write `entries` as a whole new journal beside the journal, synced; open to append to.
fn staged(dir: &Dir, entries: &[Entry]) -> std::io::Result<File> {
    let mut bytes = format::MAGIC.to_vec();
    for entry in entries {
        format::encode(&mut bytes, &entry.header, &entry.body);
    }
    dir.unlink(REWRITE)?;
    let mut file = dir.append_private(REWRITE)?;
    file.write_all(&bytes)?;
    file.sync_data()?;
    Ok(file)
}

/// Write `entries` as a whole new journal: beside it, synced, renamed over it, the directory
/// synced; the new journal, open to append to.
fn rewrite(dir: &Dir, entries: &[Entry]) -> std::io::Result<File> {
    let file = staged(dir, entries)?;
    dir.rename(REWRITE.as_ref(), JOURNAL.as_ref())?;
    dir.sync()?;
    Ok(file)
}

impl Journal {
    /// Write `pending` now — whole, in one `write(2)` — its sync left to the writer thread.
    /// Called with no lock held (`tasks/outbox.rs`), before anyone is told of these tasks.
    pub fn append(&self, pending: Vec<Pending>) {
        let mut bytes = Vec::new();
        let mut ended = 0;
        for entry in pending {
            match entry {
                Pending::Started { task, owner, seq } => {
                    let Ok(body) = serde_json::to_vec(&task) else {
                        continue;
                    };
                    let summary = Summary::of(&task, owner, seq);
                    let header = Header {
                        kind: Kind::Started,
                        id: task.id.to_string(),
                        summary,
                    };
                    format::encode(&mut bytes, &header, &body);
                }
                Pending::Ended { id, summary, body } => {
                    let header = Header {
                        kind: Kind::Ended,
                        id,
                        summary,
                    };
                    format::encode(&mut bytes, &header, &body);
                    ended += 1;
                }
            }
        }
        let mut appender = self.shared.lock();
        match appender.file.as_ref().write_all(&bytes) {
            Ok(()) => {
                appender.bytes += bytes.len() as u64;
                appender.ended += ended;
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
                let what = "cannot be written; tasks ending now may not survive a restart";
                crate::cli::warn("run", &format!("the task store: {what}: {err}"));
            }
            Err(_) => {
                let _ = appender.file.set_len(appender.bytes);
            }
        }
    }

    /// Sync what is written and stop the writer: the session ends in order.
    pub fn close(&self) {
        self.shared.lock().closed = true;
        self.shared.written.notify_one();
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Appender> {
        self.appender.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The writer thread: sync what was appended, in groups, until the journal closes; rewrite
    /// it when it has grown past twice its bounds.
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
                let due = appender.ended.saturating_sub(ended) > 2 * KEPT_TASKS
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

    /// Rewrite the journal to what it comes to ([`format::reduce`]), ended tasks within the
    /// bounds and the tasks still running. Rare (once per [`KEPT_TASKS`] tasks at most), and
    /// off the appender's lock but for its last step: what was written up to now is read,
    /// reduced and staged beside the journal, synced, with appends going on meanwhile; then,
    /// under the lock, what they added is copied to the staged file, which is renamed over the
    /// journal and appended to from then on. A failure leaves the journal as it was.
    fn compact(&self) {
        if let Err(why) = self.rewrite_behind() {
            let mut appender = self.lock();
            // Not tried again until it has grown as much once more.
            appender.failed_at = (appender.ended, appender.bytes);
            drop(appender);
            crate::cli::warn("run", &format!("the task store cannot be compacted: {why}"));
        }
    }

    fn rewrite_behind(&self) -> Result<(), String> {
        use std::io::{Read, Seek, SeekFrom};
        let (upto, ended_then) = {
            let appender = self.lock();
            (appender.bytes, appender.ended)
        };
        let small = self
            .dir
            .read_small(JOURNAL, MAX_FILE)
            .map_err(|err| format!("{err:?}"))?;
        // Appends past `upto` may be half-written as this reads: they are copied below.
        let written = small
            .bytes
            .get(..upto as usize)
            .ok_or("the journal shrank")?;
        let reduced = format::reduce(format::read(written).0);
        let ended = reduced.ended.len();
        let mut kept = reduced.ended;
        kept.extend(reduced.unended);
        let mut file = staged(&self.dir, &kept).map_err(|err| err.to_string())?;
        let mut appender = self.lock();
        let mut tail = Vec::new();
        let mut old = self.dir.open_read(JOURNAL).map_err(|err| err.to_string())?;
        old.seek(SeekFrom::Start(upto))
            .and_then(|_| old.take(appender.bytes - upto).read_to_end(&mut tail))
            .and_then(|_| file.write_all(&tail))
            .and_then(|()| self.dir.rename(REWRITE.as_ref(), JOURNAL.as_ref()))
            .map_err(|err| err.to_string())?;
        appender.bytes = file.metadata().map_or(0, |m| m.len());
        appender.ended = ended + (appender.ended - ended_then);
        appender.unsynced |= !tail.is_empty();
        appender.failed_at = (0, 0);
        appender.file = Arc::new(file);
        drop(appender);
        self.dir.sync().map_err(|err| err.to_string())
    }
}
