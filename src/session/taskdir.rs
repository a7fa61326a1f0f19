//! A task's private directory, `MUR_TASK_DIR`: `~/.murmur/tasks/<session>/<task>/` (0700), where
//! a handler finds every part of the message it is answering and leaves files to send back. When
//! handlers run as a user of their own (mur runs as root, [`crate::session::identity`]) the
//! session's directory is `/run/mur/<session>/` (0711) instead, and each task's is handed to that
//! user while its task runs — the directory, `out/` and the files written for it, each checked
//! through its own descriptor to be ours with one link before it is given — and taken back
//! before it is emptied.
//!
//! - `message.json`: the incoming message, all its parts, in the A2A 1.0 shape;
//! - `history.json` (from turn 2): every earlier message of the task, both roles;
//! - `out/`: each regular file the handler leaves there becomes a part of the answer — `*.json`
//!   holding valid JSON a `data` part, anything else a `raw` part with its name and a media type
//!   from its extension — within the answer's bound. A link, a directory, a FIFO or a file past
//!   the bound is skipped with a note, never followed or read.
//!
//! Everything goes through directory descriptors opened without following links
//! ([`crate::sys::dir::Dir`]): the handler owns what is inside and may have put a link anywhere.
//! The directory goes when the task ends — first off its path (one rename, [`TaskDir::retire`]),
//! then, once the engine's lock is released, it is emptied and kept as a spare for a later task
//! ([`SessionTasks::recycle`]), or removed. Creating and removing a directory pair and a file per
//! task is what a filesystem makes slow: ext4 frees blocks with a synchronous trim when mounted
//! `discard`, and will not reuse an inode freed in the last minute, so on a busy session each
//! new inode is found by scanning past thousands (0.3-1.2 ms a task measured, against 25 µs to
//! reuse one). A spare holds nothing of its last task: an empty `out/` and an empty
//! `message.json`, which the next task's is written over. The session's whole `tasks/<session>/` goes when
//! it ends, spares and all.
//!
//! A spare keeps its Landlock ruleset too ([`TaskDir::domain`]): a rule names the directory
//! itself (the inode held when it was added), not its path, so the ruleset made for a directory's
//! first task — the session's rules and this directory — is every later one's in it, however it
//! is renamed. Made once per directory, not once per task: a ruleset is the session's dozen-odd
//! rules added one system call at a time.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::identity::HandlerUser;
use super::sandbox::Domain;
use crate::a2a::message::{Content, Message, Part};
use crate::a2a::version::Generation;
use crate::json::raw::RawJson;
use crate::sys::dir::{Dir, Entry};
use crate::sys::fs::{PRIVATE_DIR_MODE, ReadRefusal};
use crate::sys::user::Ids;

/// The most emptied task directories a session keeps for later tasks.
const MAX_SPARES: usize = 16;
/// The one file a spare keeps, empty: the next task's is written over it.
const MESSAGE: &str = "message.json";
/// A later turn's earlier messages.
const HISTORY: &str = "history.json";

/// One session's `tasks/<session>/`.
pub struct SessionTasks {
    dir: Dir,
    /// `tasks/`, to remove the session's directory from.
    parent: Dir,
    name: String,
    /// Emptied task directories, ready for the next tasks.
    spares: Mutex<Vec<Spare>>,
    /// Whom the handlers run as when not as mur.
    user: Option<HandlerUser>,
    /// Whom each task's directory is handed to while its task runs: the user's ids, unless it
    /// keeps root's file access ([`HandlerUser::takes_task_dirs`]).
    handed: Option<Ids>,
}

/// An emptied task directory: its name (`.spare.<task>`), the directory itself (its descriptor,
/// kept open: the next task's hold, never reopened by name) and what `fstat` said of it when it
/// was emptied, and the ruleset made for it, if any.
struct Spare {
    name: OsString,
    dir: Dir,
    inode: Entry,
    domain: Option<Arc<Domain>>,
}

impl SessionTasks {
    /// Create `~/.murmur/tasks/<session>/`; for handlers running as a `user` they are handed to,
    /// `/run/mur/<session>/` at `0711`, so they can pass it to their own task's directory.
    pub fn create(
        session_id: &str,
        user: Option<HandlerUser>,
    ) -> Result<Self, crate::home::HomeError> {
        let handed = user.as_ref().filter(|user| user.takes_task_dirs());
        let parent = match handed {
            Some(user) => user.runtime.clone(),
            None => crate::home::private_dir("tasks")?,
        };
        let handed = handed.map(|user| user.becomes.ids);
        let dir = crate::home::create_held(&parent, session_id)?;
        if handed.is_some() {
            dir.set_mode(0o711).map_err(|err| {
                crate::home::HomeError::Unusable(format!("{}: {err}", dir.path().display()))
            })?;
        }
        Ok(Self {
            dir,
            parent,
            name: session_id.to_string(),
            spares: Mutex::new(Vec::new()),
            user,
            handed,
        })
    }

    /// Whom the session's handlers run as, when not as mur.
    pub fn user(&self) -> Option<&HandlerUser> {
        self.user.as_ref()
    }

    /// A directory for task `id`, with an empty `out/`: a spare renamed to `id` if there is one
    /// and it is still as it was emptied (checked as it is taken), with its descriptor and
    /// ruleset; else a new one, held as every directory of a murmur home is: ours, mode 0700.
    pub fn task(&self, id: &str) -> Result<TaskDir, String> {
        let spare = self.spares.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let (dir, domain) = match spare.and_then(|spare| self.take(spare, id)) {
            Some(taken) => taken,
            None => {
                let dir = crate::home::create_held(&self.dir, id)?;
                crate::home::create_held(&dir, "out")?;
                (dir, None)
            }
        };
        Ok(TaskDir {
            dir,
            parent: self.dir.clone(),
            name: id.to_string(),
            retired: AtomicBool::new(false),
            domain: Mutex::new(domain),
            user: self.handed,
        })
    }

    /// `spare` renamed to `id`, with its ruleset (the same directory: what the ruleset names),
    /// when it is still as it was emptied — a process of an earlier task that outlived its sweep
    /// (stuck in the kernel) could have written there since. One that is not is removed; one
    /// that cannot be renamed stays where it is, for the session's removal to take.
    fn take(&self, spare: Spare, id: &str) -> Option<(Dir, Option<Arc<Domain>>)> {
        self.dir.rename(&spare.name, id.as_ref()).ok()?;
        if intact(&self.dir, id, &spare)
            && let Ok(dir) = spare.dir.renamed(&self.dir, id)
        {
            return Some((dir, spare.domain));
        }
        let _ = self.dir.remove_tree(id);
        None
    }

    /// An ended task's retired directory: emptied and kept as a spare while there are fewer
    /// than `MAX_SPARES` (16), else (or if it cannot be emptied) removed.
    pub fn recycle(&self, task: &TaskDir) {
        let room = self.spares.lock().unwrap_or_else(|p| p.into_inner()).len() < MAX_SPARES;
        if room
            && task.retired.load(Ordering::Relaxed)
            && let Ok(inode) = task.empty()
        {
            let name = OsString::from(format!(".spare.{}", task.name));
            // Named a spare and listed as one in one step: a spare's name is never seen before
            // the next task could take it.
            let mut spares = self.spares.lock().unwrap_or_else(|p| p.into_inner());
            // Counted again under the lock: another task may have filled the last place.
            if spares.len() < MAX_SPARES && self.dir.rename(&task.retired_name(), &name).is_ok() {
                let domain = task.domain.lock().unwrap_or_else(|p| p.into_inner()).take();
                let dir = task.dir.clone();
                spares.push(Spare {
                    name,
                    dir,
                    inode,
                    domain,
                });
                return;
            }
        }
        task.remove();
    }

    /// `tasks/<session>.tmp` (0700): the private `TMPDIR` of the session's sandboxed handlers,
    /// which may reach no other temporary directory. Beside the session's directory, not in it
    /// (that holds task directories only); it goes with it ([`crate::home::scratch_name`]).
    pub fn scratch(&self) -> Result<PathBuf, String> {
        let dir = crate::home::create_held(&self.parent, &crate::home::scratch_name(&self.name))?;
        if let Some(ids) = self.handed {
            dir.set_owner(ids)
                .map_err(|err| format!("{}: {err}", dir.path().display()))?;
        }
        Ok(dir.path().to_path_buf())
    }

    /// The session has ended: remove its directory and everything in it, and its `TMPDIR`.
    pub fn remove(&self) {
        let _ = self.parent.remove_tree(&self.name);
        let _ = self
            .parent
            .remove_tree(crate::home::scratch_name(&self.name));
    }
}

/// One task's directory.
pub struct TaskDir {
    dir: Dir,
    parent: Dir,
    name: String,
    /// Renamed to [`TaskDir::retired_name`] by [`TaskDir::retire`].
    retired: AtomicBool,
    /// The ruleset of this directory's handlers, once made; kept with it as a spare.
    domain: Mutex<Option<Arc<Domain>>>,
    /// Whom its handlers run as, when not as mur: handed the directory for each turn.
    user: Option<Ids>,
}

impl TaskDir {
    pub fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// The Landlock ruleset this directory's handlers run in: the one made for it before (by an
    /// earlier turn, or an earlier task when it was a spare), else `make`'s, kept for later.
    pub fn domain(
        &self,
        make: impl FnOnce() -> std::io::Result<Domain>,
    ) -> std::io::Result<Arc<Domain>> {
        let mut domain = self.domain.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(made) = &*domain {
            return Ok(made.clone());
        }
        let made = Arc::new(make()?);
        *domain = Some(made.clone());
        Ok(made)
    }

    /// Write this turn's `message.json` (over a spare's) and, when there are earlier messages,
    /// `history.json`.
    pub fn write_turn(&self, message: &Message, earlier: &[Message]) -> Result<(), String> {
        let render = |m: &Message| m.render(Generation::V1_0);
        // Parts' data stand as markers in a rendered tree: written out as their text.
        self.dir
            .overwrite_private(MESSAGE, &crate::json::raw::to_vec(&render(message)))?;
        if !earlier.is_empty() {
            let history: Vec<Value> = earlier.iter().map(render).collect();
            let history = crate::json::raw::to_vec(&Value::Array(history));
            self.dir.write_private(HISTORY, &history)?;
        }
        match self.user {
            Some(user) => self
                .set_owner(user, &[MESSAGE, HISTORY])
                .map_err(|err| format!("cannot hand {} over: {err}", self.dir.path().display())),
            None => Ok(()),
        }
    }

    /// Give the directory, `out/` and the files `names` (those present) to `ids`: each opened
    /// without following a link and given through its descriptor — a file only when it is
    /// mur's or the handler's with one link, so a name the handler swapped for a link to
    /// another file of mur's gives it nothing.
    fn set_owner(&self, ids: Ids, names: &[&str]) -> std::io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let owners = [
            crate::sys::user::mine().uid,
            self.user.map_or(ids.uid, |u| u.uid),
        ];
        self.dir.set_owner(ids)?;
        self.dir.open_child("out")?.set_owner(ids)?;
        for name in names {
            let file = match self.dir.open_read(name) {
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                opened => opened?,
            };
            let meta = file.metadata()?;
            if !meta.is_file() || meta.nlink() != 1 || !owners.contains(&meta.uid()) {
                return Err(std::io::Error::from_raw_os_error(libc::EPERM));
            }
            std::os::unix::fs::fchown(&file, Some(ids.uid), Some(ids.gid))?;
        }
        Ok(())
    }

    /// The files in `out/` as answer parts, in name order, at most `budget` bytes of them; and a
    /// note for each entry skipped.
    pub fn collect_out(&self, budget: usize) -> (Vec<Part>, Vec<String>) {
        let (mut parts, mut notes) = (Vec::new(), Vec::new());
        let out = match self.dir.open_child("out") {
            Ok(out) => out,
            Err(err) => {
                notes.push(format!("out/ could not be opened: {err}"));
                return (parts, notes);
            }
        };
        let mut names = match out.names() {
            Ok(names) => names,
            Err(err) => {
                notes.push(format!("out/ could not be listed: {err}"));
                return (parts, notes);
            }
        };
        names.sort();
        let mut left = budget;
        for name in names {
            let shown = name.to_string_lossy().into_owned();
            match out.read_small(&name, left as u64) {
                Ok(file) => {
                    left -= file.bytes.len();
                    parts.push(part_of(&shown, file.bytes));
                }
                Err(ReadRefusal::Invalid(why) | ReadRefusal::Io(why)) => {
                    notes.push(format!("skipped out/{}: {why}", shown.escape_debug()));
                }
                Err(ReadRefusal::Vanished) => {}
            }
        }
        (parts, notes)
    }

    /// The task has ended: take the directory off `MUR_TASK_DIR`'s path, to `.gone.<task>` in
    /// the session's directory (task ids never start with a dot). A rename frees no block, so
    /// it is cheap enough to do before the task is seen ended; if it fails, the directory is
    /// removed where it is.
    pub fn retire(&self) {
        let gone = self.retired_name();
        if self.parent.rename(self.name.as_ref(), &gone).is_ok() {
            self.retired.store(true, Ordering::Relaxed);
        }
    }

    /// Everything the task left removed, but an empty `out/` and `message.json` emptied in place
    /// (its inode kept for the next task's); the directory and `out/` ours at exactly `0700`, as
    /// [`intact`] expects them. What `fstat` says of the directory, or the `Err`: anything that
    /// would not go, or a directory or `out/` not ours or not a directory — such a directory is
    /// removed instead of kept.
    ///
    /// The handler may have chmod-ed the directory, `out/` or anything below to `000`: each
    /// directory gets its owner's `rwx` back through its own descriptor before it is emptied
    /// ([`Dir::open_child_to_empty`], [`Dir::remove_tree`]), so no mode keeps a spare — or,
    /// through it, the session's `tasks/<session>/` — in place.
    fn empty(&self) -> std::io::Result<Entry> {
        if self.user.is_some() {
            // Taken back first: what follows, and a later task's hold, expect it mur's.
            self.set_owner(crate::sys::user::mine(), &[MESSAGE])?;
        }
        let inode = hold_private(&self.dir)?;
        for name in self.dir.names()? {
            if name == "out" {
                let out = self.dir.open_child_to_empty("out")?;
                for entry in out.names()? {
                    out.remove_tree(entry)?;
                }
                hold_private(&out)?;
            } else if name == MESSAGE {
                self.dir.clear_private(MESSAGE)?;
            } else {
                self.dir.remove_tree(name)?;
            }
        }
        Ok(inode)
    }

    /// Remove the directory and everything in it, retired or not.
    fn remove(&self) {
        let _ = if self.retired.load(Ordering::Relaxed) {
            self.parent.remove_tree(self.retired_name())
        } else {
            self.parent.remove_tree(&self.name)
        };
    }

    fn retired_name(&self) -> OsString {
        format!(".gone.{}", self.name).into()
    }
}

/// What [`crate::home::hold`] makes of a directory of a murmur home — ours, mode exactly
/// `0700` (re-moded through its descriptor if not) — with what `fstat` said of it.
fn hold_private(dir: &Dir) -> std::io::Result<Entry> {
    let inode = Entry::of(&dir.stat()?);
    if inode.uid != crate::sys::proc::euid() {
        return Err(std::io::Error::from_raw_os_error(libc::EPERM));
    }
    if inode.mode & 0o7777 != PRIVATE_DIR_MODE {
        dir.set_mode(PRIVATE_DIR_MODE)?;
    }
    Ok(inode)
}

/// Whether the spare just renamed to `id` is as [`TaskDir::empty`] left it: `id` names the very
/// directory the spare holds (not a link, not another put in its place), ours at `0700`, holding
/// an empty `out/` (ours, `0700`) and nothing else but `message.json` — which the turn writes
/// over whole, and only when it is a file of ours with one link ([`Dir::overwrite_private`]).
/// Eight system calls: the name's `fstatat`, two listings and `out/`'s open, `fstat` and close.
fn intact(parent: &Dir, id: &str, spare: &Spare) -> bool {
    let private_dir = |entry: &Entry| {
        entry.uid == crate::sys::proc::euid()
            && entry.is_dir()
            && entry.mode & 0o7777 == PRIVATE_DIR_MODE
    };
    let named = parent.entry(id);
    if !named.is_ok_and(|named| named.same_inode(&spare.inode) && private_dir(&named)) {
        return false;
    }
    let only_ours = spare.dir.names().is_ok_and(|names| {
        names.iter().any(|name| name == "out")
            && names.iter().all(|name| name == "out" || name == MESSAGE)
    });
    only_ours
        && spare.dir.open_child("out").is_ok_and(|out| {
            out.stat().is_ok_and(|meta| private_dir(&Entry::of(&meta)))
                && out.names().is_ok_and(|names| names.is_empty())
        })
}

/// A file's bytes as a part: valid JSON in a `*.json` file is data, anything else raw.
fn part_of(name: &str, bytes: Vec<u8>) -> Part {
    let media_type = media_type(name);
    // Kept as the file's text (checked to be one JSON value), never parsed into a tree.
    let json = (media_type == "application/json")
        .then(|| std::str::from_utf8(&bytes).ok())
        .flatten()
        .and_then(|text| RawJson::from_text(text.to_string()).ok());
    let content = match json {
        Some(value) => Content::Data(value),
        None => Content::Raw(crate::b64::encode_standard(&bytes)),
    };
    Part {
        content,
        filename: Some(name.to_string()),
        media_type: Some(media_type.to_string()),
        metadata: None,
    }
}

/// The media type a file name's extension suggests.
fn media_type(name: &str) -> &'static str {
    let extension = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match extension.as_deref() {
        Some("json") => "application/json",
        Some("txt" | "log") => "text/plain",
        Some("md") => "text/markdown",
        Some("csv") => "text/csv",
        Some("html" | "htm") => "text/html",
        Some("xml") => "application/xml",
        Some("yaml" | "yml") => "application/yaml",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("svg") => "image/svg+xml",
        Some("pdf") => "application/pdf",
        Some("gz") => "application/gzip",
        Some("zip") => "application/zip",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_become_parts_by_kind() {
        let json = part_of("r.json", br#"{"k":1}"#.to_vec());
        let Content::Data(data) = &json.content else {
            panic!("{json:?}")
        };
        assert_eq!(data.to_value(), serde_json::json!({"k": 1}));
        let broken = part_of("r.json", b"{not json".to_vec());
        assert_eq!(broken.content, Content::Raw("e25vdCBqc29u".into()));
        assert_eq!(broken.media_type.as_deref(), Some("application/json"));
        let text = part_of("notes.TXT", b"hi".to_vec());
        assert_eq!(text.content, Content::Raw("aGk=".into()));
        assert_eq!(text.media_type.as_deref(), Some("text/plain"));
        assert_eq!(
            part_of("blob", vec![0]).media_type.as_deref(),
            Some("application/octet-stream")
        );
    }
}
