//! Diagnostics on stderr, and a session's stderr queue.
//!
//! A session's stderr may be a pipe nobody reads (a FIFO, a stalled journal). Only the writer
//! thread ([`queue_stderr`]) ever waits on it — forever, harmlessly; every other thread puts
//! its line in a bounded queue, or drops it and counts it when the queue is full. The count is
//! said on stderr once the queue drains, and read by `mur ps -v` from the session's record.
//! O_NONBLOCK on the inherited stderr would not do: it is a flag of the open file description,
//! shared with every process writing to the same terminal or pipe.
//!
//! A line may be queued *for later* ([`warn_later`]): the writer is not woken for it, but
//! writes it with the next line queued now, at a [`flush_stderr`] once it has waited a while,
//! or at the session's end — in order either way. A wake-up of the writer is a cross-CPU
//! wake-up, some 20 µs of the waker's time on a VM: a task's start line waits for its end's,
//! and both are flushed once the task's waiters are woken (one wake-up a task, not two, and
//! neither before its handler starts nor before its answer), or at its watcher's next look
//! when the task runs on.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::speaker;

/// The most lines a session's stderr queue holds.
const STDERR_LINES: usize = 256;

/// Print a diagnostic on stderr, prefixed with the applet as [`speaker`] names it, ignoring a
/// closed stderr. In a session ([`queue_stderr`]) it is queued, never waited for.
pub fn warn(applet: &str, message: &str) {
    say(applet, message, true);
}

/// [`warn`], for a line that may wait: in a session it is queued without waking the writer,
/// and written with the next line that does, at a [`flush_stderr`] once it has waited the age
/// that flush names, or at the session's end.
pub fn warn_later(applet: &str, message: &str) {
    say(applet, message, false);
}

fn say(applet: &str, message: &str, now: bool) {
    let line = format!("mur {}: {message}\n", speaker(applet));
    match STDERR.get().filter(|q| !q.direct.load(Ordering::Acquire)) {
        Some(queue) => queue.send(line, now),
        None => {
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }
}

/// Have the lines queued for later written now, if the oldest has waited `age` or more.
pub fn flush_stderr(age: Duration) {
    if let Some(queue) = STDERR.get() {
        let mut lines = queue.lock();
        if lines
            .later_since
            .is_some_and(|since| since.elapsed() >= age)
        {
            queue.make_due(&mut lines);
        }
    }
}

/// A session's stderr: the lines queued, written by one thread of their own.
struct Stderr {
    lines: Mutex<Lines>,
    /// The writer waits here for lines to fall due ([`Lines::due`]).
    wake: Condvar,
    /// [`drain_stderr`] waits here for the queue to be written.
    written: Condvar,
    /// Lines dropped because the queue was full, since the session began.
    dropped: AtomicU64,
    /// Set by [`drain_stderr`]: from then on [`warn`] writes itself, as before the session.
    direct: AtomicBool,
}

#[derive(Default)]
struct Lines {
    queued: VecDeque<String>,
    /// Lines the writer has taken and not yet written.
    writing: usize,
    /// The queue is to be written now; else the writer leaves it be.
    due: bool,
    /// When the oldest line queued for later was.
    later_since: Option<Instant>,
    /// The writer waits on `due` (and must be woken).
    idle: bool,
    /// [`drain_stderr`] waits on `written` (and must be told).
    draining: bool,
}

static STDERR: OnceLock<Stderr> = OnceLock::new();

impl Stderr {
    fn lock(&self) -> MutexGuard<'_, Lines> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn send(&self, line: String, now: bool) {
        let mut lines = self.lock();
        if lines.queued.len() + lines.writing >= STDERR_LINES {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        lines.queued.push_back(line);
        if now {
            self.make_due(&mut lines);
        } else if lines.later_since.is_none() {
            lines.later_since = Some(Instant::now());
        }
    }

    /// Mark the queue due, waking the writer if it waits.
    fn make_due(&self, lines: &mut Lines) {
        lines.due = true;
        if lines.idle {
            self.wake.notify_one();
        }
    }

    /// Write the lines as they fall due; before waiting for more, say how many were dropped
    /// since last said.
    fn write_out(&self) {
        let mut said = 0;
        loop {
            let dropped = self.dropped.load(Ordering::Relaxed);
            if dropped > said {
                let note = format!(
                    "mur {}: {} log lines dropped: stderr not read\n",
                    speaker("run"),
                    dropped - said
                );
                let _ = std::io::stderr().lock().write_all(note.as_bytes());
                said = dropped;
            }
            let taken = {
                let mut lines = self.lock();
                while !lines.due || lines.queued.is_empty() {
                    if lines.due {
                        // Due and empty: what a drain waits for.
                        lines.due = false;
                        if lines.draining {
                            self.written.notify_all();
                        }
                    }
                    lines.idle = true;
                    lines = self.wake.wait(lines).unwrap_or_else(|p| p.into_inner());
                    lines.idle = false;
                }
                lines.later_since = None;
                let taken = std::mem::take(&mut lines.queued);
                lines.writing = taken.len();
                taken
            };
            let mut out = std::io::stderr().lock();
            for line in &taken {
                let _ = out.write_all(line.as_bytes());
            }
            drop(out);
            self.lock().writing = 0;
        }
    }
}

/// From now on, [`warn`] queues its lines for a thread of their own: this process is a session,
/// whose threads must never wait on stderr. Without a thread for it, stderr stays direct.
pub fn queue_stderr() {
    let queue = Stderr {
        lines: Mutex::default(),
        wake: Condvar::new(),
        written: Condvar::new(),
        dropped: AtomicU64::new(0),
        direct: AtomicBool::new(false),
    };
    if STDERR.set(queue).is_err() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("stderr".into())
        .stack_size(64 * 1024)
        .spawn(|| {
            if let Some(queue) = STDERR.get() {
                queue.write_out();
            }
        });
    if spawned.is_err()
        && let Some(queue) = STDERR.get()
    {
        queue.direct.store(true, Ordering::Release);
    }
}

/// The lines this session dropped because its stderr was not read.
pub fn stderr_dropped() -> u64 {
    STDERR
        .get()
        .map_or(0, |q| q.dropped.load(Ordering::Relaxed))
}

/// The session is ending: have every queued line written (those queued for later too), waiting
/// at most `wait`; if they were, write directly again (what an applet says last, after the
/// session, is then never dropped). If they were not, the writer thread is still inside a
/// write to a stderr nobody reads — holding std's stderr lock — so a direct write would wait on
/// it forever and the session would never exit: lines go on being queued (and dropped when the
/// queue is full).
pub fn drain_stderr(wait: Duration) {
    let Some(queue) = STDERR.get() else {
        return;
    };
    let mut lines = queue.lock();
    queue.make_due(&mut lines);
    lines.draining = true;
    let (mut lines, _) = queue
        .written
        .wait_timeout_while(lines, wait, |l| !l.queued.is_empty() || l.writing > 0)
        .unwrap_or_else(|p| p.into_inner());
    lines.draining = false;
    if lines.queued.is_empty() && lines.writing == 0 {
        queue.direct.store(true, Ordering::Release);
    }
}
