//! The task journal's bytes, read back whatever a crash left of them.
//!
//! A journal is [`MAGIC`], then entries, each `length (u32, little-endian) · SHA-256 of the
//! payload (32 bytes) · payload`, the payload being a [`Header`] as one line of JSON, a `\n`, and
//! the task's serialized bytes — the very bytes the store of finished tasks keeps.
//!
//! Invariants:
//! - **A torn tail is told from a corrupt store.** Entries are appended whole and in order, so a
//!   crash can only leave the last one short: an entry that runs past the end of the file, or
//!   whose checksum fails and which ends exactly there, is a torn tail ([`Damage::Torn`]).
//!   Anything else that does not read — a wrong magic, a length over [`MAX_ENTRY`], a checksum
//!   failing with more after it, a payload that checks but does not parse — is corruption
//!   ([`Damage::Corrupt`]). Either way the entries before it are read.
//! - **Never a panic on what is read**: every length is checked before it is sliced.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::super::store::{BUDGET, KEPT_TASKS, Summary};

/// The first bytes of every journal, naming its format.
pub const MAGIC: &[u8] = b"mur task journal 1\n";
/// The largest payload an entry may have: a task larger than the store's whole budget is never
/// kept, so never written.
pub const MAX_ENTRY: usize = BUDGET + (64 << 10);
/// Length and checksum.
pub const ENTRY_HEAD: usize = 4 + 32;

/// What an entry says of its task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The task was taken: its first message, before any turn ran.
    Started,
    /// The task ended: its final state, answer, artifacts and history.
    Ended,
    /// The task waits for input: its history so far, the agent's question last. A session
    /// started again parks it as input-required, to go on with the next message.
    Waiting,
}

/// An entry's first line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Header {
    pub kind: Kind,
    pub id: String,
    /// The turn the entry was written at (1 for a new task, one more for each continuation):
    /// of a task's entries that are not its end, the latest turn is its last word, whatever
    /// order threads appended them in (a question and the continuation answering it).
    #[serde(default)]
    pub turn: u32,
    #[serde(flatten)]
    pub summary: Summary,
}

/// One entry as read: its header and the task's serialized bytes.
#[derive(Debug, Clone)]
pub struct Entry {
    pub header: Header,
    pub body: Arc<[u8]>,
}

/// Where reading stopped before the end of the file, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// The last entry is incomplete: the file is whole up to `valid` bytes.
    Torn { valid: usize },
    /// Something other than a torn tail: read up to `valid` bytes.
    Corrupt { valid: usize, why: String },
}

/// Append the entry for `header` and `body` to `out`; the bytes it took.
pub fn encode(out: &mut Vec<u8>, header: &Header, body: &[u8]) -> usize {
    let before = out.len();
    // Serializing our own types cannot fail; a header that did would be an empty line, which
    // reads back as corrupt rather than as something else.
    let line = serde_json::to_vec(header).unwrap_or_default();
    let len = line.len() + 1 + body.len();
    let mut sum = Sha256::new();
    sum.update(&line);
    sum.update(b"\n");
    sum.update(body);
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(&sum.finalize());
    out.extend_from_slice(&line);
    out.push(b'\n');
    out.extend_from_slice(body);
    out.len() - before
}

/// Every entry of the journal `bytes` that reads, in order, and where reading stopped if it did
/// not reach the end.
pub fn read(bytes: &[u8]) -> (Vec<Entry>, Option<Damage>) {
    let mut entries = Vec::new();
    if bytes.len() < MAGIC.len() && MAGIC.starts_with(bytes) {
        let damage = (!bytes.is_empty()).then_some(Damage::Torn { valid: 0 });
        return (entries, damage);
    }
    if !bytes.starts_with(MAGIC) {
        let why = "it does not start as a task journal".to_string();
        return (entries, Some(Damage::Corrupt { valid: 0, why }));
    }
    let mut at = MAGIC.len();
    while at < bytes.len() {
        match entry(&bytes[at..]) {
            Ok((entry, used)) => {
                entries.push(entry);
                at += used;
            }
            Err(None) => return (entries, Some(Damage::Torn { valid: at })),
            Err(Some(why)) => {
                let why = format!("entry at byte {at}: {why}");
                return (entries, Some(Damage::Corrupt { valid: at, why }));
            }
        }
    }
    (entries, None)
}

/// The entry at the start of `rest` and the bytes it takes; `Err(None)` for a torn tail,
/// `Err(Some(why))` for corruption.
fn entry(rest: &[u8]) -> Result<(Entry, usize), Option<String>> {
    let Some((head, after)) = rest.split_first_chunk::<ENTRY_HEAD>() else {
        return Err(None);
    };
    let (len, sum) = head.split_at(4);
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    if len > MAX_ENTRY {
        return Err(Some(format!(
            "a length of {len} bytes, over the {MAX_ENTRY} allowed"
        )));
    }
    let Some(payload) = after.get(..len) else {
        return Err(None);
    };
    if Sha256::digest(payload).as_slice() != sum {
        return if after.len() == len {
            Err(None)
        } else {
            Err(Some("its checksum does not match".into()))
        };
    }
    let Some(newline) = payload.iter().position(|&b| b == b'\n') else {
        return Err(Some("no header line".into()));
    };
    let header: Header = serde_json::from_slice(&payload[..newline])
        .map_err(|err| Some(format!("its header does not read: {err}")))?;
    let body = payload[newline + 1..].into();
    Ok((Entry { header, body }, ENTRY_HEAD + len))
}

/// What reducing a journal needs of an entry, whether it was read whole ([`Entry`]) or is
/// known by its place in the file (the appender's index, `super::compact::Slot`).
pub trait Word {
    fn id(&self) -> &str;
    fn kind(&self) -> Kind;
    fn seq(&self) -> u64;
    fn turn(&self) -> u32;
    /// The task's bytes, counted against the store's [`BUDGET`].
    fn body_len(&self) -> usize;
}

impl Word for Entry {
    fn id(&self) -> &str {
        &self.header.id
    }
    fn kind(&self) -> Kind {
        self.header.kind
    }
    fn seq(&self) -> u64 {
        self.header.summary.seq
    }
    fn turn(&self) -> u32 {
        self.header.turn
    }
    fn body_len(&self) -> usize {
        self.body.len()
    }
}

/// What a journal's entries come to: the ended tasks within the store's bounds (the newest
/// [`KEPT_TASKS`], at most [`BUDGET`] bytes of them), oldest first, and the tasks not ended —
/// running or waiting for input — (by arrival), each once.
pub struct Reduced<T> {
    pub ended: Vec<T>,
    pub unended: Vec<T>,
}

/// Whether `later`, found after `earlier` for the same task, is its last word instead: an end
/// is final whatever came after it (a start and an end are appended by different threads, so
/// an end may come first); else the latest turn, and of one turn the later entry.
fn supersedes(earlier: &impl Word, later: &impl Word) -> bool {
    earlier.kind() != Kind::Ended && (later.kind() == Kind::Ended || later.turn() >= earlier.turn())
}

/// Reduce `entries` to each task's last word (`supersedes`: an end, else the latest turn),
/// within the bounds.
pub fn reduce<T: Word>(entries: Vec<T>) -> Reduced<T> {
    let mut keep = vec![false; entries.len()];
    {
        let mut last: HashMap<&str, usize> = HashMap::with_capacity(entries.len());
        for (at, entry) in entries.iter().enumerate() {
            match last.get(entry.id()) {
                Some(&was) if !supersedes(&entries[was], entry) => {}
                _ => {
                    last.insert(entry.id(), at);
                }
            }
        }
        last.into_values().for_each(|at| keep[at] = true);
    }
    let (mut ended, mut unended): (Vec<T>, Vec<T>) = entries
        .into_iter()
        .zip(keep)
        .filter_map(|(entry, kept)| kept.then_some(entry))
        .partition(|e| e.kind() == Kind::Ended);
    ended.sort_unstable_by_key(|e| std::cmp::Reverse(e.seq()));
    let mut bytes = 0;
    let within = ended
        .iter()
        .take(KEPT_TASKS)
        .take_while(|e| {
            bytes += e.body_len();
            bytes <= BUDGET
        })
        .count();
    ended.truncate(within);
    ended.reverse();
    unended.sort_unstable_by_key(Word::seq);
    Reduced { ended, unended }
}

#[cfg(test)]
mod tests;
