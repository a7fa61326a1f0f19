//! Rewriting the journal to its bounds while the session appends to it, by copying: the
//! appender keeps an index of where each entry lies ([`Slot`]), the entries to keep are chosen
//! from it ([`format::reduce`]) and their bytes copied verbatim into a new file — nothing is
//! read back, parsed, hashed or serialized again.
//!
//! Invariants:
//! - **Off the appender's lock but for the last step.** The copy of what was written when the
//!   rewrite began runs with appends going on; so does the copy of what they add, round after
//!   round, until at most [`TAIL_UNDER_LOCK`] bytes are left: those are copied under the lock,
//!   and the new file renamed over the journal there, so no entry falls between the two files.
//! - **A crash leaves the old journal or the new**, each whole: the new one is synced before it
//!   is renamed; the tail copied under the lock is synced by the next group, like any append.
//! - **Damage is said.** Each kept entry's length is checked where the index puts it; one that
//!   does not match stops the rewrite, which says so, and the journal stays as it was (its next
//!   reading, at a start, sets aside what does not read).

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use super::format::{self, ENTRY_HEAD, Header, Kind, Word};
use super::{JOURNAL, REWRITE, Shared};

/// The most bytes copied under the appender's lock: what was appended during the last round of
/// copying, or the rounds go on.
const TAIL_UNDER_LOCK: u64 = 64 << 10;
/// The most bytes of kept entries read at once (one entry may be larger).
const CHUNK: u64 = 1 << 20;

/// Where one entry lies in the journal, and what choosing whether to keep it needs.
#[derive(Clone)]
pub struct Slot {
    /// The offset of its first byte (its length's).
    pub at: u64,
    /// Its bytes, length and checksum included.
    pub len: u64,
    pub id: String,
    pub kind: Kind,
    pub seq: u64,
    pub turn: u32,
    /// Its task's bytes, counted against the store's budget.
    pub body: usize,
}

impl Slot {
    /// The slot of the entry for `header` encoded at `at` in `len` bytes, `body` of them its
    /// task's.
    pub fn of(header: &Header, at: u64, len: usize, body: usize) -> Self {
        Self {
            at,
            len: len as u64,
            id: header.id.clone(),
            kind: header.kind,
            seq: header.summary.seq,
            turn: header.turn,
            body,
        }
    }

    /// The same slot `by` bytes further on.
    pub fn moved(self, by: u64) -> Self {
        Self {
            at: self.at + by,
            ..self
        }
    }
}

impl Word for &Slot {
    fn id(&self) -> &str {
        &self.id
    }
    fn kind(&self) -> Kind {
        self.kind
    }
    fn seq(&self) -> u64 {
        self.seq
    }
    fn turn(&self) -> u32 {
        self.turn
    }
    fn body_len(&self) -> usize {
        self.body
    }
}

impl Shared {
    /// Rewrite the journal to what it comes to ([`format::reduce`]): ended tasks within the
    /// bounds and the tasks not ended. Rare (once per [`super::KEPT_TASKS`] tasks at most). A
    /// failure leaves the journal as it was, says why, and defers the next try until it has
    /// grown as much again.
    pub(super) fn compact(&self) {
        let (upto, old) = {
            let mut appender = self.lock();
            (appender.bytes, std::mem::take(&mut appender.index))
        };
        let copied = self.rewrite_behind(upto, &old);
        let mut appender = self.lock();
        if let Err(why) = copied {
            // The index back whole: what was taken, then what was appended meanwhile.
            let mut index = old;
            index.append(&mut appender.index);
            appender.index = index;
            appender.failed_at = (appender.ended, appender.bytes);
            drop(appender);
            let _ = self.dir.unlink(REWRITE);
            self.warn(&format!(
                "cannot be compacted ({why}); it stays as it is (a start sets aside what does \
                 not read), and is tried again once it has grown as much"
            ));
        }
    }

    /// Copy the entries of `old` (the index of the journal's first `upto` bytes) worth keeping
    /// to a new file, then what was appended since, and rename it over the journal.
    fn rewrite_behind(&self, upto: u64, old: &[Slot]) -> Result<(), String> {
        let reduced = format::reduce(old.iter().collect());
        let mut kept = reduced.ended;
        kept.extend(reduced.unended);
        kept.sort_unstable_by_key(|s| s.at);
        let from = self
            .dir
            .open_read(JOURNAL)
            .map_err(|err| format!("cannot read it: {err}"))?;
        self.dir.unlink(REWRITE).map_err(|err| err.to_string())?;
        let mut to = self
            .dir
            .append_private(REWRITE)
            .map_err(|err| format!("cannot create {REWRITE}: {err}"))?;
        to.write_all(format::MAGIC).map_err(|err| err.to_string())?;
        let (index, end) = copy_kept(&from, &to, &kept)?;
        to.sync_data().map_err(|err| err.to_string())?;
        let mut copied = upto;
        loop {
            let mut appender = self.lock();
            let now = appender.bytes;
            if now - copied > TAIL_UNDER_LOCK {
                drop(appender);
                copy_range(&from, &mut to, copied, now)?;
                copied = now;
                continue;
            }
            copy_range(&from, &mut to, copied, now)?;
            self.dir
                .rename(REWRITE.as_ref(), JOURNAL.as_ref())
                .map_err(|err| format!("cannot rename {REWRITE} over it: {err}"))?;
            // Entries appended since the rewrite began follow the kept ones, in order.
            let shift = |s: Slot| Slot {
                at: s.at - upto + end,
                ..s
            };
            let mut index = index;
            let since = std::mem::take(&mut appender.index);
            appender.ended = index
                .iter()
                .chain(&since)
                .filter(|s| s.kind == Kind::Ended)
                .count();
            index.extend(since.into_iter().map(shift));
            appender.index = index;
            appender.bytes = end + (now - upto);
            appender.unsynced |= now > upto;
            appender.failed_at = (0, 0);
            appender.file = Arc::new(to);
            drop(appender);
            // Done: a failure here only leaves the rename to the filesystem's own time (a crash
            // of the machine before it may find the old journal, whole), never undoes it.
            if let Err(err) = self.dir.sync() {
                self.warn(&format!("its rewrite may not be on disk yet: {err}"));
            }
            return Ok(());
        }
    }
}

/// Copy the entries `kept` (in file order) from `from` to the end of `to`, which holds only the
/// magic: where each lies now, and where the copy ends. Adjacent entries are read together, up
/// to [`CHUNK`] bytes at once.
fn copy_kept(from: &File, mut to: &File, kept: &[&Slot]) -> Result<(Vec<Slot>, u64), String> {
    let mut index = Vec::with_capacity(kept.len());
    let mut end = format::MAGIC.len() as u64;
    let mut buf = Vec::new();
    let mut next = 0;
    while next < kept.len() {
        let first = kept[next].at;
        let mut last = next + 1;
        while last < kept.len()
            && kept[last].at == kept[last - 1].at + kept[last - 1].len
            && kept[last].at + kept[last].len - first <= CHUNK
        {
            last += 1;
        }
        let run = &kept[next..last];
        let size = run.iter().map(|s| s.len).sum::<u64>();
        buf.resize(size as usize, 0);
        from.read_exact_at(&mut buf, first)
            .map_err(|err| format!("cannot read bytes {first}..{}: {err}", first + size))?;
        for slot in run {
            let off = (slot.at - first) as usize;
            let len = buf
                .get(off..off + 4)
                .map(|b| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])));
            if len != Some(slot.len - ENTRY_HEAD as u64) {
                return Err(format!(
                    "damage: the entry of task {} at byte {} does not have the length it was \
                     written with",
                    slot.id, slot.at
                ));
            }
            index.push(Slot {
                at: end + slot.at - first,
                ..(*slot).clone()
            });
        }
        to.write_all(&buf).map_err(|err| err.to_string())?;
        end += size;
        next = last;
    }
    Ok((index, end))
}

/// Copy bytes `from_at..upto` of `from` to the end of `to`, a chunk at a time.
fn copy_range(from: &File, to: &mut File, from_at: u64, upto: u64) -> Result<(), String> {
    let mut buf = vec![0; (upto - from_at).min(CHUNK) as usize];
    let mut at = from_at;
    while at < upto {
        let n = (upto - at).min(CHUNK) as usize;
        from.read_exact_at(&mut buf[..n], at)
            .and_then(|()| to.write_all(&buf[..n]))
            .map_err(|err| format!("cannot copy bytes {at}..{}: {err}", at + n as u64))?;
        at += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
