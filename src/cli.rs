//! What every applet shares: its failure type, its stdout, its diagnostics ([`warn`]; a
//! session's are queued for a thread of their own, `stderr`), argument helpers, and its command
//! line as data ([`spec`]).

pub mod spec;
mod stderr;

pub use stderr::{drain_stderr, flush_stderr, queue_stderr, stderr_dropped, warn, warn_later};

use std::io::Write;

/// How an applet ends other than with its own exit code.
#[derive(Debug)]
pub enum Failure {
    /// Exit 2: the command line is wrong. Printed with a pointer to `--help`.
    Usage(String),
    /// Exit 1: the applet could not do its job. Printed as `mur <applet>: <message>`.
    Failed(String),
}

impl From<lexopt::Error> for Failure {
    fn from(err: lexopt::Error) -> Self {
        Self::Usage(err.to_string())
    }
}

pub type Outcome = Result<i32, Failure>;

/// Stdout for human and JSON output. A reader that went away (`mur ps | head -1`) is not an
/// error: the first `EPIPE` silences every later write, and the applet finishes its work — `mur
/// stop` half done because nobody read its output would be worse than output nobody reads.
pub struct Out {
    lock: std::io::StdoutLock<'static>,
    closed: bool,
}

impl Default for Out {
    fn default() -> Self {
        Self {
            lock: std::io::stdout().lock(),
            closed: false,
        }
    }
}

impl Out {
    /// Write `text` and a newline.
    pub fn line(&mut self, text: &str) {
        if self.closed {
            return;
        }
        let written = self
            .lock
            .write_all(text.as_bytes())
            .and_then(|()| self.lock.write_all(b"\n"))
            .and_then(|()| self.lock.flush());
        if written.is_err() {
            // EPIPE, or a full disk behind a redirect: either way nobody can read more.
            self.closed = true;
        }
    }
}

/// The applet a diagnostic is said under. A `mur run` that `mur formation` started (its
/// environment names the formation) speaks as `formation`: its stderr is the formation's, and
/// `mur run:` would name a command the user never typed.
pub fn speaker(applet: &str) -> &str {
    if applet == "run" && std::env::var_os(crate::json::channel::env::FORMATION_ID).is_some() {
        "formation"
    } else {
        applet
    }
}

/// A positional argument as UTF-8, or a usage error naming it.
pub fn utf8(value: std::ffi::OsString) -> Result<String, Failure> {
    value
        .into_string()
        .map_err(|bad| Failure::Usage(format!("'{}' is not valid UTF-8", bad.to_string_lossy())))
}

/// An option's value parsed as a number, or a usage error naming the option and the value.
pub fn number<T: std::str::FromStr>(option: &str, value: std::ffi::OsString) -> Result<T, Failure> {
    let text = utf8(value)?;
    text.parse()
        .map_err(|_| Failure::Usage(format!("{option} wants a whole number, not '{text}'")))
}

/// A TCP port option's value, `0..=65535`, or a usage error naming the option, the value and
/// the range: "wants a whole number" would mislead for `99999`, which is one.
pub fn port(option: &str, value: std::ffi::OsString) -> Result<u16, Failure> {
    let text = utf8(value)?;
    text.parse().map_err(|_| {
        Failure::Usage(format!(
            "{option} wants a port number from 0 to 65535 (0: any free port), not '{text}'"
        ))
    })
}

/// The longest duration any option takes: a year. Bounded at parse time, so no deadline
/// computed from it can overflow (`Instant + Duration` panics where this would not).
pub const MAX_SECS: u64 = 366 * 24 * 3600;

/// The units a duration may carry, as `docker --time`, `timeout(1)` and systemd write them.
const UNITS: &[(&str, u64)] = &[
    ("ms", 1),
    ("s", 1000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

/// An option's value as a duration in `min..=MAX_SECS`: a whole number with a unit (`500ms`,
/// `10s`, `2m`, `1h`, `1d`), or a bare number, which is seconds as every such option always
/// took. Every option that takes a time parses it here, so `10s` means the same to each. The
/// `Err` is a usage error naming the option, the value and the range.
pub fn duration(
    option: &str,
    value: std::ffi::OsString,
    min: std::time::Duration,
) -> Result<std::time::Duration, Failure> {
    let text = utf8(value)?;
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let scale = match unit {
        "" => Some(1000),
        unit => UNITS.iter().find(|(u, _)| *u == unit).map(|(_, ms)| *ms),
    };
    let millis = scale.and_then(|scale| number.parse::<u64>().ok()?.checked_mul(scale));
    let range = |why: &str| {
        Failure::Usage(format!(
            "{option} wants a duration from {}s to {MAX_SECS}s (a year) -- seconds, or with a unit: 500ms, 10s, 2m, 1h, 1d -- not '{text}'{why}",
            min.as_secs()
        ))
    };
    let millis = millis.ok_or_else(|| range(""))?;
    let duration = std::time::Duration::from_millis(millis);
    if duration < min || duration > std::time::Duration::from_secs(MAX_SECS) {
        return Err(range(" (out of range)"));
    }
    Ok(duration)
}

/// A task's text from stdin (`--task -`, `mur formation call PEER -`), read to EOF. One trailing
/// newline is dropped: `echo hi | mur run --task -` is the task "hi", the line's end not part of
/// it. At most [`crate::net::server::MAX_BODY`] is read — what the door would take in one request
/// — so `< /dev/zero` is a usage error, not all of memory: more is refused (exit 2) naming the
/// limit, as is text that is not UTF-8.
pub fn task_from_stdin() -> Result<String, Failure> {
    use std::io::Read;
    let limit = crate::net::server::MAX_BODY;
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| Failure::Failed(format!("cannot read the task from stdin: {err}")))?;
    if bytes.len() > limit {
        return Err(Failure::Usage(format!(
            "the task on stdin is larger than {} MiB, the most a door takes in one request",
            limit >> 20
        )));
    }
    let mut text = String::from_utf8(bytes)
        .map_err(|_| Failure::Usage("the task on stdin is not UTF-8 text".into()))?;
    if text.ends_with('\n') {
        text.pop();
    }
    Ok(text)
}
