//! The session's log, `~/.murmur/logs/<session>.log`: its handlers' stderr, one line per line
//! they wrote, and the session's own task events, each line tagged with its task id — what
//! `mur logs` shows. The events also go to the session's own stderr, one line each, for
//! journald and container logs.
//!
//! Invariants:
//! - **Bounded.** A log file grows to [`MAX_LOG_BYTES`]; then it is renamed `<session>.log.1`
//!   (replacing the one before) and a fresh one begun, so a session holds at most twice that on
//!   disk however much its handlers write. A line is at most [`MAX_LINE`] bytes (longer ones
//!   are cut into several).
//! - **Private.** Files `0600` in `logs/` held at `0700`, like every directory of the home,
//!   opened through its descriptor, following no link ([`Dir::append_private`]).
//! - **Never a secret, never a message.** The session writes only task ids, states, durations
//!   and its own failure reasons; what a handler writes on stderr is its own to keep clean. A
//!   control character a handler writes is escaped, so `mur logs` cannot forge a line or drive
//!   a terminal.
//! - **Kept past its session.** When the session ends, however it ends, the log stays with
//!   what is kept of it (`running::ended`, bounded), and goes when that goes
//!   ([`crate::home::remove_logs`]).
//!
//! One session per process, so one log per process: a process-wide handle ([`open`]), which
//! the task threads write through a lock.

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::a2a::task::State;
use crate::a2a::version::Generation;
use crate::home::{LOGS_DIR, log_name};
use crate::sys::dir::Dir;

/// The most one log file holds before it is rotated.
pub const MAX_LOG_BYTES: u64 = 1 << 20;
/// The longest line written; a longer one is cut.
pub const MAX_LINE: usize = 4096;

struct Open {
    dir: Dir,
    name: OsString,
    file: Option<File>,
    size: u64,
    /// Lines [`turn_started`] queued, written ahead of the next line (in its `write`) or by
    /// [`flush`]; and when the first of them was queued — `Some` exactly while `queued` holds
    /// any (both set in [`Open::queue`], both cleared in [`Open::append`]).
    queued: String,
    queued_at: Option<Instant>,
}

struct Log {
    open: Mutex<Option<Open>>,
    /// Whether the events go to stderr too (not for a one-shot task or a launched member,
    /// whose stderr is a terminal or a cron mail).
    to_stderr: bool,
}

static LOG: OnceLock<Log> = OnceLock::new();

/// Begin this process's session log. A home whose `logs/` cannot be used leaves the session
/// without a log (said on stderr); the events still reach stderr when `to_stderr`.
pub fn open(session_id: &str, to_stderr: bool) -> Result<(), String> {
    let open = match crate::home::private_dir(LOGS_DIR) {
        Ok(dir) => {
            let name = OsString::from(log_name(session_id));
            match dir.append_private(&name) {
                Ok(file) => Some(Open {
                    size: file.metadata().map_or(0, |m| m.len()),
                    dir,
                    name,
                    file: Some(file),
                    queued: String::new(),
                    queued_at: None,
                }),
                Err(err) => {
                    let path = dir.join(&name);
                    crate::cli::warn("run", &format!("{}: {err}; no log", path.display()));
                    None
                }
            }
        }
        Err(crate::home::HomeError::Untrusted(why)) => return Err(why),
        Err(crate::home::HomeError::Unusable(why)) => {
            crate::cli::warn("run", &format!("{why}; no log"));
            None
        }
    };
    let _ = LOG.set(Log {
        open: Mutex::new(open),
        to_stderr,
    });
    Ok(())
}

/// A task event: one line on the session's stderr (when it says them there) and in its log.
/// `text` is the session's own words: a state, a duration, a reason — never a token, never
/// what a message said.
pub fn event(task_id: &str, text: &str) {
    record(task_id, text, crate::cli::warn, Log::write);
}

/// [`event`], its stderr line queued for later ([`crate::cli::warn_later`]): a task's end, said
/// on stderr once its waiters are woken, with its start's ([`turn_started`]) — so that a task
/// costs one wake-up of the stderr writer, and neither its handler's start nor its answer waits
/// for it. The log has the line at once: a caller who has the answer finds the end in `mur logs`.
pub fn event_later(task_id: &str, text: &str) {
    record(task_id, text, crate::cli::warn_later, Log::write);
}

/// A turn's start: its stderr line queued as [`event_later`]'s, and its log line queued as
/// well — written ahead of the log's next line (most often the turn's end, in the same `write`),
/// or by [`flush`] once it has waited. So the door worker starting a turn makes no ext4 append
/// before the handler starts, and a task that ends before its watcher's first look costs the log
/// one append, not two (a gain too small for the handler bench to see, docs/benchmarks.md). The
/// line keeps the time it was queued at; a session killed within that wait (`SIGKILL`) loses it.
pub fn turn_started(task_id: &str, text: &str) {
    record(task_id, text, crate::cli::warn_later, Log::queue);
}

/// Write the lines [`turn_started`] queued once the first has waited `age`: a turn's watcher
/// calls it at each look, so a running turn's start is in the log within a look or two.
pub fn flush(age: Duration) {
    let Some(log) = LOG.get() else {
        return;
    };
    let mut guard = log.open.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(open) = guard.as_mut()
        && open.queued_at.is_some_and(|at| at.elapsed() >= age)
    {
        open.append(String::new());
    }
}

/// A task event said on stderr by `say` (when the session says them there) and put in the log by
/// `put` ([`Log::write`] at once, or [`Log::queue`]d).
fn record(task_id: &str, text: &str, say: fn(&str, &str), put: fn(&Log, &str, &str, &[u8])) {
    let Some(log) = LOG.get() else {
        return;
    };
    if log.to_stderr {
        say("run", &format!("{task_id} {text}"));
    }
    put(log, task_id, "mur:", text.as_bytes());
}

/// `<time> <task> <tag> <text>` lines of `text` (escaped, cut at [`MAX_LINE`]).
fn lines(task_id: &str, tag: &str, text: &[u8]) -> Vec<String> {
    let stamp = crate::time::format_rfc3339(crate::time::unix_now());
    text.chunks(MAX_LINE)
        .map(|piece| format!("{stamp} {task_id} {tag} {}\n", escaped(piece)))
        .collect()
}

/// The words of a turn's end, for [`event`]: its state, how long it ran, and for a failure the
/// session's short reason (a handler's exit code or signal, a timeout — never its output).
/// Made under the engine lock, written after it is released.
pub fn turn_ended(state: State, note: Option<&str>, took: Duration) -> String {
    let state_name = state.wire(Generation::V0_3);
    let secs = took.as_secs_f64();
    match note.filter(|_| state == State::Failed) {
        Some(why) => format!("{state_name} in {secs:.2}s: {why}"),
        None => format!("{state_name} in {secs:.2}s"),
    }
}

impl Log {
    /// Append `<time> <task> <tag> <text>` (escaped, cut at [`MAX_LINE`]) after any queued
    /// lines, rotating first when the file would pass its bound. A write that fails is dropped:
    /// the log is never a reason for a task to fail.
    fn write(&self, task_id: &str, tag: &str, text: &[u8]) {
        let mut guard = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let Some(open) = guard.as_mut() else {
            return;
        };
        for line in lines(task_id, tag, text) {
            open.append(line);
        }
    }

    /// [`Log::write`]'s lines, queued to go out with the next line written, or by [`flush`].
    fn queue(&self, task_id: &str, tag: &str, text: &[u8]) {
        let mut guard = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(open) = guard.as_mut() {
            open.queue(&lines(task_id, tag, text));
        }
    }
}

impl Open {
    /// Queue `lines` for the next write; written at once when the queue would pass a line's
    /// bound, so it never holds much.
    fn queue(&mut self, lines: &[String]) {
        if self.queued.is_empty() {
            self.queued_at = Some(Instant::now());
        }
        for line in lines {
            self.queued.push_str(line);
        }
        if self.queued.len() > MAX_LINE {
            self.append(String::new());
        }
    }

    /// Write the queued lines, then `line`, in one `write`, rotating first when the file would
    /// pass its bound.
    fn append(&mut self, line: String) {
        let text = if self.queued.is_empty() {
            line
        } else {
            self.queued_at = None;
            let mut text = std::mem::take(&mut self.queued);
            text.push_str(&line);
            text
        };
        if text.is_empty() {
            return;
        }
        if self.size + text.len() as u64 > MAX_LOG_BYTES {
            self.rotate();
        }
        if let Some(file) = &mut self.file
            && file.write_all(text.as_bytes()).is_ok()
        {
            self.size += text.len() as u64;
        }
    }

    /// `<session>.log` becomes `<session>.log.1` (the one before goes) and a fresh file begins.
    fn rotate(&mut self) {
        let mut old = self.name.clone();
        old.push(".1");
        self.file = None;
        let _ = self.dir.rename(&self.name, &old);
        self.file = self.dir.append_private(&self.name).ok();
        self.size = 0;
    }
}

/// `bytes` as text with control characters (but tab) escaped, invalid UTF-8 replaced.
fn escaped(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .flat_map(|c| {
            if c.is_control() && c != '\t' {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// One task's stderr on its way into the log: cut into lines as they complete (a line longer
/// than [`MAX_LINE`] is written in pieces), the unfinished last one written when it is dropped.
pub struct TaskStderr {
    task_id: String,
    partial: Vec<u8>,
}

impl TaskStderr {
    pub fn new(task_id: &str) -> Self {
        Self {
            task_id: task_id.to_string(),
            partial: Vec::new(),
        }
    }

    /// Take what the handler wrote; write each line it completes.
    pub fn push(&mut self, bytes: &[u8]) {
        let Some(log) = LOG.get() else {
            return;
        };
        self.partial.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(end) = self.partial[start..].iter().position(|&b| b == b'\n') {
            log.write(&self.task_id, "stderr:", &self.partial[start..start + end]);
            start += end + 1;
        }
        self.partial.drain(..start);
        if self.partial.len() >= MAX_LINE {
            log.write(&self.task_id, "stderr:", &self.partial);
            self.partial.clear();
        }
    }
}

impl Drop for TaskStderr {
    fn drop(&mut self) {
        if let Some(log) = LOG.get()
            && !self.partial.is_empty()
        {
            log.write(&self.task_id, "stderr:", &self.partial);
        }
    }
}

/// The lines of task `task_id` in this session's current log file (at most `max` bytes from
/// its end): a one-shot task's own stderr, for the operator who ran it.
pub fn task_lines(task_id: &str, max: u64) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    let Some(log) = LOG.get() else {
        return Vec::new();
    };
    let guard = log.open.lock().unwrap_or_else(|p| p.into_inner());
    let Some(open) = guard.as_ref() else {
        return Vec::new();
    };
    let Ok(mut file) = open.dir.open_read(&open.name) else {
        return Vec::new();
    };
    let size = file.metadata().map_or(0, |m| m.len());
    let _ = file.seek(SeekFrom::Start(size.saturating_sub(max)));
    let mut text = String::new();
    let _ = file.take(max).read_to_string(&mut text);
    let tag = format!(" {task_id} stderr: ");
    text.lines()
        .filter_map(|line| line.split_once(&tag).map(|(_, rest)| rest.to_string()))
        .collect()
}

/// Close this process's session log, at the session's orderly end: nothing is written to it
/// after. The file stays, kept with the ended session (`running::ended`), and goes with it.
pub fn close() {
    if let Some(mut open) = take() {
        open.append(String::new());
    }
}

/// Close this process's session log and remove it: a session that failed to start leaves no
/// log behind (it never served, so there is nothing to keep).
pub fn discard() {
    if let Some(open) = take() {
        let mut old = open.name.clone();
        old.push(".1");
        let _ = open.dir.unlink(&old);
        let _ = open.dir.unlink(&open.name);
    }
}

fn take() -> Option<Open> {
    LOG.get()?
        .open
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_tabs_kept() {
        assert_eq!(escaped(b"a\tb\x1b[31mc\r"), "a\tb\\u{1b}[31mc\\r");
        assert_eq!(escaped(b"\xff ok"), "\u{fffd} ok");
    }
}
