//! `mur logs`: a running session's log — its handlers' stderr and its task events, each line
//! tagged with its task id — like `tail` and `docker logs`; `-f` follows it until the session
//! ends.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use super::Applet;
use crate::address::{self, Named};
use crate::cli::spec::{Arg, Kind, Opt, Parser, Spec};
use crate::cli::{self, Failure, Out, Outcome};
use crate::home::{LOGS_DIR, log_name, old_log_name};
use crate::json::ended::EndedRecord;
use crate::json::record::RunningRecord;
use crate::running::ended::Ended;
use crate::running::{Depth, Entry};
use crate::session::log::MAX_LOG_BYTES;
use crate::sys::dir::Dir;

pub const APPLET: Applet = Applet {
    name: "logs",
    summary: "show a session's log, running or ended",
    usage: "\
Usage: mur logs ADDR [-f] [-t] [--task ID] [-n N | --tail N] [--since WHEN]

Print the log of a session: what its handlers wrote on stderr and the
session's task events (started, completed/failed/... with the duration and,
for a failure, the reason), one line each (with -t, each line's time first):
  tsk_0199...  stderr: the handler's own words
  tsk_0199...  mur: failed in 0.52s: the handler exited with code 3
ADDR is as 'mur stop --help' says: @N, a --name, an id or a prefix or suffix
of one, FORMATION/MEMBER, a member or capsule NAME. An address no running
session answers to is looked for among the ended sessions this home keeps
('mur ps -a'). An instance name (run --name) reads as one history: the logs
of the sessions that held it before (its restarts), oldest first, each after
a line saying which it was and how it ended, then the session holding it.

The log is ~/.murmur/logs/<session>.log (mode 0600): at most 1 MiB, then it is
rotated to <session>.log.1 (the one before dropped), so a session keeps at most
2 MiB of log. It is kept when the session ends, with the ended session (see
'mur ps --help'); a session that ended without a word (SIGKILLed, crashed) has
a last line saying so. A handler's stderr never reaches a
caller of the door: a failed task's answer says only why (exit code, signal,
timeout); the rest is here.

Options:
  -f, --follow   keep printing lines as they are written, until the session ends
                 (an ended session's log is printed whole, and -f returns)
  --task ID      only the lines of this task (its full tsk_ id, or a suffix of
                 at least 4 characters)
  -n, --lines N, --tail N
                 only the last N lines (before following)
  --since WHEN   only the lines from WHEN on: a duration ago (10m, 2h, 90s)
                 or a time (2026-05-01T12:00:00Z)
  -t, --timestamps
                 each line's time (UTC, RFC 3339) before it
  -h, --help     this text

Exit status: 0 when the log was printed (with -f: once the session has ended);
1 when the address matched no session, running or ended, or its log cannot be
read; 2 on a usage error.
",
    main,
    spec: &SPEC,
};

/// `logs`'s command line, the one table its parser and the shell completions read.
static SPEC: Spec = Spec::new(
    &[
        Opt::flag(
            "follow",
            Some('f'),
            "keep printing lines as they are written",
        ),
        Opt::value("task", None, "ID", Kind::Text, "one task's lines"),
        Opt::value("lines", Some('n'), "N", Kind::Text, "the last N lines"),
        Opt::value("tail", None, "N", Kind::Text, "the last N lines (as -n)"),
        Opt::value(
            "since",
            None,
            "WHEN",
            Kind::Text,
            "only lines from then on: a duration ago (10m) or a time",
        ),
        Opt::flag("timestamps", Some('t'), "each line's time too"),
    ],
    &[Kind::Address],
);

/// How often `-f` looks for more.
const FOLLOW_TICK: Duration = Duration::from_millis(100);
/// The most `-n` takes: more lines than two full log files could hold.
const MAX_LINES: usize = 1 << 22;

struct Options {
    address: String,
    follow: bool,
    task: Option<String>,
    last: Option<usize>,
    /// `--since`: the first second shown (Unix time).
    since: Option<i64>,
    timestamps: bool,
}

fn parse(args: Vec<std::ffi::OsString>) -> Result<Options, Failure> {
    let mut address = None;
    let mut options = Options {
        address: String::new(),
        follow: false,
        task: None,
        last: None,
        since: None,
        timestamps: false,
    };
    let mut parser = Parser::new(&SPEC, args);
    while let Some(arg) = parser.next_arg()? {
        match arg {
            Arg::Flag("follow") => options.follow = true,
            Arg::Opt("task", id) => {
                let id = cli::utf8(id)?;
                if id.len() < address::MIN_SUFFIX {
                    return Err(Failure::Usage(format!(
                        "--task wants a task id or at least {} of its last characters, not '{id}'",
                        address::MIN_SUFFIX
                    )));
                }
                options.task = Some(id.to_ascii_lowercase());
            }
            Arg::Opt(option @ ("lines" | "tail"), n) => {
                let flag = if option == "lines" { "-n" } else { "--tail" };
                let n: usize = cli::number(flag, n)?;
                if n > MAX_LINES {
                    return Err(Failure::Usage(format!("{flag} wants at most {MAX_LINES}")));
                }
                options.last = Some(n);
            }
            Arg::Opt("since", when) => options.since = Some(since(when)?),
            Arg::Flag("timestamps") => options.timestamps = true,
            Arg::Operand(value) if address.is_none() => {
                let value = cli::utf8(value)?;
                address::at_n(&value).map_err(Failure::Usage)?;
                address = Some(value);
            }
            other => return Err(other.unexpected()),
        }
    }
    options.address = address.ok_or_else(|| Failure::Usage("name a session (ADDR)".into()))?;
    Ok(options)
}

fn main(args: Vec<std::ffi::OsString>) -> Outcome {
    let options = parse(args)?;
    let sweep = super::sweep("logs", Depth::Process, false)?;
    let running: Vec<Entry> = sweep.kept.into_iter().map(|k| k.entry).collect();
    let ended: Vec<Ended>;
    // A running session answers to an address before any ended one does.
    let (id, live) = match address::lookup(&options.address, &running).map_err(Failure::Failed)? {
        Some(named) => {
            let entry = one(named)?;
            (&entry.record.session_id, Some(&entry.record))
        }
        None => {
            ended = super::ended("logs")?;
            match address::lookup(&options.address, &ended).map_err(Failure::Failed)? {
                Some(named) => (&one(named)?.record.session_id, None),
                None => {
                    let why = address::resolve(&options.address, &running)
                        .err()
                        .unwrap_or_default();
                    return Err(Failure::Failed(format!(
                        "{why}; nor does any ended session it keeps (mur ps -a lists them)"
                    )));
                }
            }
        }
    };
    let id = id.as_str();
    let no_log = || Failure::Failed(format!("{id} has no log (its home could not hold one)"));
    let dir = crate::home::existing_dir(LOGS_DIR)
        .map_err(|err| Failure::Failed(err.into()))?
        .ok_or_else(no_log)?;
    let mut text = earlier_lives(&options.address, id, live, &dir);
    text.extend(read_whole(&dir, &old_log_name(id)).unwrap_or_default());
    let current = open_log(&dir, &log_name(id)).ok_or_else(no_log)?;
    let (mut file, mut ino) = current;
    file.read_to_end(&mut text)
        .map_err(|err| Failure::Failed(format!("cannot read {id}'s log: {err}")))?;
    let mut out = Out::default();
    let mut lines = Lines {
        task: options.task.clone(),
        since: options.since,
        timestamps: options.timestamps,
    };
    let mut shown = lines.complete(&mut text);
    if let Some(n) = options.last {
        shown.drain(..shown.len().saturating_sub(n));
    }
    shown.iter().for_each(|line| out.line(line));
    if !options.follow {
        return Ok(0);
    }
    loop {
        // An ended session's log is whole already: printed, and done.
        let ended = live.is_none_or(|record| {
            matches!(
                crate::running::process_liveness(record),
                Some(crate::running::Liveness::Gone(_))
            )
        });
        // Read what the open file holds; when the name now holds another file (rotated), the
        // rest of the old one was read first, and the new one is read from its start.
        let _ = file.read_to_end(&mut text);
        if let Some((new, new_ino)) = open_log(&dir, &log_name(id))
            && new_ino != ino
        {
            (file, ino) = (new, new_ino);
            let _ = file.read_to_end(&mut text);
        }
        lines.complete(&mut text).iter().for_each(|l| out.line(l));
        if ended {
            return Ok(0);
        }
        std::thread::sleep(FOLLOW_TICK);
    }
}

/// When `address` is the instance name of session `id` (`mur run --name`): the logs of the
/// sessions that held the name before it (restarts of one service, kept as ended), oldest
/// first, each after a line saying which session it was and how it ended, then a line for `id`
/// itself — so `mur logs NAME` reads a named session's restarts as one history. Nothing for any
/// other address.
fn earlier_lives(address: &str, id: &str, live: Option<&RunningRecord>, dir: &Dir) -> Vec<u8> {
    let mut text = Vec::new();
    if crate::running::names::check(address).is_err() {
        return text;
    }
    let Ok(ended) = super::ended("logs") else {
        return text;
    };
    let mut lives: Vec<&EndedRecord> = ended
        .iter()
        .map(|e| &e.record)
        .filter(|r| r.name.as_deref() == Some(address))
        .collect();
    let Some(started) = live.map(|r| r.started_at.clone()).or_else(|| {
        lives
            .iter()
            .find(|r| r.session_id.as_str() == id)
            .map(|r| r.started_at.clone())
    }) else {
        return text;
    };
    lives.retain(|r| r.session_id.as_str() != id && r.started_at <= started);
    if lives.is_empty() {
        return text;
    }
    lives.sort_by(|a, b| a.started_at.cmp(&b.started_at));
    for life in lives {
        let was = life.session_id.as_str();
        let how = match life.exit_code {
            Some(code) => format!("{} ({code})", life.end.word()),
            None => life.end.word().to_string(),
        };
        let line = format!(
            "{} {was} mur: session {was} of '{address}' started; it ended {} ({how})\n",
            life.started_at, life.ended_at
        );
        text.extend_from_slice(line.as_bytes());
        text.extend(read_whole(dir, &old_log_name(was)).unwrap_or_default());
        text.extend(read_whole(dir, &log_name(was)).unwrap_or_default());
    }
    let line = format!("{started} {id} mur: session {id} of '{address}' started\n");
    text.extend_from_slice(line.as_bytes());
    text
}

/// `--since WHEN`: an RFC 3339 time, or a duration ago (`10m`, `2h`, `90s`; a bare number is
/// seconds), as Unix time.
fn since(when: std::ffi::OsString) -> Result<i64, Failure> {
    if let Some(at) = when.to_str().and_then(crate::time::parse_rfc3339) {
        return Ok(at);
    }
    let ago = cli::duration("--since", when, Duration::ZERO).map_err(|_| {
        Failure::Usage(
            "--since wants a duration ago (10m, 2h) or a time (2026-05-01T12:00:00Z)".into(),
        )
    })?;
    let ago = i64::try_from(ago.as_secs()).unwrap_or(i64::MAX);
    Ok(crate::time::unix_now().saturating_sub(ago))
}

/// The one session `named` names: a formation is not one.
fn one<R>(named: Named<'_, R>) -> Result<&Entry<R>, Failure> {
    match named {
        Named::Session(entry) => Ok(entry),
        Named::Formation(id, _) => Err(Failure::Failed(format!(
            "{id} is a formation; each member has a log of its own (name one: mur ps lists them)"
        ))),
    }
}

/// The log file `name`, when it is a regular file of ours: opened (following no link) and its
/// inode, to tell a rotation.
fn open_log(dir: &Dir, name: &str) -> Option<(File, u64)> {
    let file = dir.open_read(name).ok()?;
    let meta = file.metadata().ok()?;
    (meta.is_file() && meta.uid() == crate::sys::proc::euid()).then_some((file, meta.ino()))
}

/// The whole of the rotated log `name`, if there is one (at most one file's bound).
fn read_whole(dir: &Dir, name: &str) -> Option<Vec<u8>> {
    let (file, _) = open_log(dir, name)?;
    let mut bytes = Vec::new();
    let mut file = file;
    file.seek(SeekFrom::Start(0)).ok()?;
    file.take(MAX_LOG_BYTES * 2).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Complete lines taken off the front of what was read, filtered by task and time, shown with
/// or without the time each starts with.
struct Lines {
    task: Option<String>,
    since: Option<i64>,
    timestamps: bool,
}

impl Lines {
    /// The complete lines at the front of `bytes` (removed from it) that pass the filter; an
    /// unfinished last line stays for the next read.
    fn complete(&mut self, bytes: &mut Vec<u8>) -> Vec<String> {
        let Some(end) = bytes.iter().rposition(|&b| b == b'\n') else {
            return Vec::new();
        };
        let taken: Vec<u8> = bytes.drain(..=end).collect();
        String::from_utf8_lossy(&taken)
            .lines()
            .filter(|line| self.wanted(line))
            .map(|line| match line.split_once(' ') {
                Some((_, rest)) if !self.timestamps => rest.to_string(),
                _ => line.to_string(),
            })
            .collect()
    }

    /// Whether `line` (`<time> <task> …`) is of the task asked for, if one was, and no older
    /// than `since`.
    fn wanted(&self, line: &str) -> bool {
        let mut words = line.split(' ');
        let time = words.next().and_then(crate::time::parse_rfc3339);
        let task = words.next();
        let recent = self
            .since
            .is_none_or(|since| time.is_none_or(|at| at >= since));
        let of_task = self.task.as_ref().is_none_or(|wanted| {
            task.is_some_and(|id| id.to_ascii_lowercase().ends_with(wanted.as_str()))
        });
        recent && of_task
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_taken_whole_and_filtered_by_task_suffix() {
        let mut lines = Lines {
            task: Some("beef".into()),
            since: None,
            timestamps: true,
        };
        let mut bytes = b"t tsk_1dead x: a\nt tsk_1BEEF x: b\nt tsk_1beef x: par".to_vec();
        assert_eq!(lines.complete(&mut bytes), ["t tsk_1BEEF x: b"]);
        assert_eq!(bytes, b"t tsk_1beef x: par");
        bytes.extend_from_slice(b"tial\n");
        assert_eq!(lines.complete(&mut bytes), ["t tsk_1beef x: partial"]);
        assert!(bytes.is_empty());
    }

    #[test]
    fn since_keeps_later_lines_and_the_time_goes_unless_asked_for() {
        let mut lines = Lines {
            task: None,
            since: crate::time::parse_rfc3339("2026-05-01T12:00:01Z"),
            timestamps: false,
        };
        let mut bytes = b"2026-05-01T12:00:00Z tsk_1 mur: a\n2026-05-01T12:00:01Z tsk_1 mur: b\n\
                          2026-05-01T12:00:02Z tsk_1 mur: c\n"
            .to_vec();
        assert_eq!(lines.complete(&mut bytes), ["tsk_1 mur: b", "tsk_1 mur: c"]);
    }
}
