//! `mur ps`: every capsule running on this machine, each record checked through all three layers
//! (concurrently), stale records pruned on the way past.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use serde_json::{Value, json};

use super::Applet;
use crate::address::{self, Addressable};
use crate::cli::spec::{Arg, Kind, Opt, Parser, Spec};
use crate::cli::{self, Failure, Out, Outcome};
use crate::door_client;
use crate::json::ended::EndedRecord;
use crate::running::ended::Ended;
use crate::running::{Depth, InFlight, Kept};
use crate::time;
use filter::{FILTER_PREFIXES, FilterKey, Filters, STATUSES};
use format::{Template, align, header, printable, render, template};
use history::Restarts;
use row::{Row, SHORT_ID, short, status_cell, uptime_secs};

mod filter;
mod format;
mod history;
mod row;

pub const APPLET: Applet = Applet {
    name: "ps",
    summary: "list the capsules running on this machine",
    usage: "\
Usage: mur ps [-a] [--json | -q | --format TEMPLATE] [-v] [--no-trunc]
              [--filter KEY=VALUE]...
              [--capsule NAME[@VERSION]] [--formation ID] [--status STATUS]

List every capsule session of this murmur home, most recent first: the
sessions started with the same home, $MURMUR_HOME when set (absolute), else
~/.murmur -- this user's, not other users', nor ones started under another
MURMUR_HOME.

Each record in the home's running/ is checked three ways: its pid is alive, the
process holding that pid started when the record says, and its door answers as
that session. Doors are probed at once, so the listing takes about as long as
the slowest probe (at most ~7 s for a door that never answers).

Records whose process is gone, and files that are not records, are removed on
the way past; how many is said on stderr (-v: one line each, with the reason).
A live process whose door does not answer is kept and shown as 'unreachable',
with the reason on a line of its own after the table:
  unreachable ses_0199...: the door at 127.0.0.1:8080 answers for session ses_01a9...

With -a, the ended sessions this home keeps follow the running ones, most
recently ended first (the last 100, or fewer when their logs pass 64 MiB:
MURMUR_KEEP_ENDED and MURMUR_KEEP_ENDED_MIB change that; 'mur logs' reads
their logs, 'mur rm' and 'mur prune' remove them).

Columns: SESSION NAME CAPSULE STATUS DETACHED UPTIME [RESTARTS] [FORMATION] URL
  SESSION    the id's first 12 hex digits (more when two would share them):
             an address as it is; --no-trunc shows whole ids
  NAME       the --name it runs under, else its member name in its formation
  STATUS     running, or unreachable (live process, door not answering as it);
             with -a also 'exited (CODE) 2 minutes ago', 'killed ...' (mur
             stop had to SIGKILL it) or 'gone ...' (found gone: SIGKILLed or
             crashed, its exit status unknown); UPTIME is then how long it ran
  DETACHED   yes when the session outlives the terminal that started it
  RESTARTS   shown once a --name has run more than once: the runs of the name
             before this one that the home keeps; a name's runs are listed
             together, newest first (-a: its ended runs under its running one)
  FORMATION  shown when any session belongs to a formation; one summary line
             per formation follows the table

Options:
  -a, --all  the ended sessions too
  --no-trunc whole session and formation ids in the table
  --json     one JSON document: {\"capsules\":[...],\"formations\":[...]}; keys are
             stable (added, never renamed or removed); never a token
  -q, --quiet
             session ids only, one a line
  --format TEMPLATE
             one line per session: TEMPLATE with each {{.key}} replaced by that
             session's value of the --json key (a string as is, null empty),
             {{json .key}} by it as JSON and {{json .}} by the whole session,
             e.g. --format '{{.url}}' or '{{.session_id}} {{.status}}'; an
             unknown key is a usage error naming it. As docker's:
               json              one JSON object per session, a line each
               table TEMPLATE    a header row, then the columns aligned
                                 (\t or blanks between keys separate them)
               table             the default table
  --filter KEY=VALUE
             only the sessions matching; repeatable: a key given twice
             matches either value, different keys must all match. Keys:
               name           a --name, a member name, or a capsule's
               capsule        NAME or NAME@VERSION (as --capsule)
               id             a session id, or 4+ of its first or last chars
               formation      a frm_ id or suffix of 4+ chars (as --formation)
               status         running, unreachable, or (implying -a)
                              exited, killed, gone (as --status)
  --capsule NAME[@VERSION]
             --filter capsule=NAME[@VERSION]
  --formation ID
             --filter formation=ID
  --status running|unreachable|exited|killed|gone
             --filter status=STATUS
  --json, -q and --format each choose the output: give one
  -v, --verbose
             name each pruned record and why, each session whose handlers
             run outside a sandbox and why (\"sandbox\": false, or no Landlock),
             each whose handlers run as a user of their own (mur runs as root),
             and each session that dropped log lines because nobody read its
             stderr (a session never waits on its stderr):
               unsandboxed ses_0199...: unavailable: this kernel has no Landlock
               user ses_0199...: handlers run as dynamic uid 61234
               stderr ses_0199...: 1200 log lines dropped: stderr not read
  -h, --help this text

Exit status: 0; 1 when ~/.murmur/running cannot be read (the path and reason
are printed), or when a filter was given and no session matched it (as pgrep:
'mur ps --capsule shout -q || mur run ...'; the table then says 'no running
capsules match' when some run); 2 on a usage error, such as two options that
each choose the output (--json -q). With nothing running and no filter, 0 and
'no running capsules'.
",
    main,
    spec: &SPEC,
};

/// `ps`'s command line, the one table its parser and the shell completions read.
static SPEC: Spec = Spec::new(
    &[
        Opt::flag("json", None, "one JSON document"),
        Opt::flag("quiet", Some('q'), "session ids only"),
        Opt::flag("all", Some('a'), "the ended sessions too"),
        Opt::flag("no-trunc", None, "whole ids in the table"),
        Opt::value(
            "format",
            None,
            "TEMPLATE",
            Kind::Words(&["json", "table"]),
            "one line per session from TEMPLATE",
        ),
        Opt::value(
            "filter",
            None,
            "KEY=VALUE",
            Kind::Words(&FILTER_PREFIXES),
            "only the sessions matching (repeatable)",
        ),
        Opt::value(
            "capsule",
            None,
            "NAME[@VERSION]",
            Kind::Text,
            "only that capsule's sessions",
        ),
        Opt::value(
            "formation",
            None,
            "ID",
            Kind::Text,
            "only that formation's members",
        ),
        Opt::value(
            "status",
            None,
            "STATUS",
            Kind::Words(STATUSES),
            "only the sessions in that state",
        ),
        Opt::flag(
            "verbose",
            Some('v'),
            "name what was pruned, unsandboxed, dropped",
        ),
    ],
    &[],
);

/// How the sessions are printed.
enum Output {
    Table,
    Json,
    Quiet,
    Format(Template),
}

/// What is shown besides the sessions themselves.
#[derive(Default)]
struct Shown {
    verbose: bool,
    /// `-a`: the ended sessions too.
    all: bool,
    /// `--no-trunc`: whole ids in the table.
    whole_ids: bool,
}

fn parse(args: Vec<std::ffi::OsString>) -> Result<(Output, Filters, Shown), Failure> {
    let mut output = Output::Table;
    // The option that chose the output, so a second one is refused naming both.
    let mut chosen: Option<&str> = None;
    let mut filters = Filters::default();
    let mut shown = Shown::default();
    let mut parser = Parser::new(&SPEC, args);
    while let Some(arg) = parser.next_arg()? {
        let mut choose = |option: &'static str, how: Output| match chosen.replace(option) {
            Some(before) if before == option => Err(Failure::Usage(format!(
                "{option} given twice; give it once"
            ))),
            Some(before) => Err(Failure::Usage(format!(
                "{before} and {option} each choose the output; give one"
            ))),
            None => {
                output = how;
                Ok(())
            }
        };
        match arg {
            Arg::Flag("json") => choose("--json", Output::Json)?,
            Arg::Flag("quiet") => choose("-q", Output::Quiet)?,
            Arg::Opt("format", text) => {
                let how = match template(&cli::utf8(text)?)? {
                    None => Output::Table,
                    Some(template) => Output::Format(template),
                };
                choose("--format", how)?;
            }
            Arg::Flag("verbose") => shown.verbose = true,
            Arg::Flag("all") => shown.all = true,
            Arg::Flag("no-trunc") => shown.whole_ids = true,
            Arg::Opt("filter", text) => filters.add_filter(cli::utf8(text)?)?,
            Arg::Opt("capsule", value) => {
                filters.add("--capsule", FilterKey::Capsule, cli::utf8(value)?)?;
            }
            Arg::Opt("formation", value) => {
                filters.add("--formation", FilterKey::Formation, cli::utf8(value)?)?;
            }
            Arg::Opt("status", value) => {
                filters.add("--status", FilterKey::Status, cli::utf8(value)?)?;
            }
            other => return Err(other.unexpected()),
        }
    }
    shown.all |= filters.wants_ended();
    Ok((output, filters, shown))
}

fn main(args: Vec<std::ffi::OsString>) -> Outcome {
    let (output, filters, shown) = parse(args)?;
    let in_flight = InFlight::default();
    let sweep = std::thread::scope(|scope| {
        let (done, finished) = std::sync::mpsc::channel::<()>();
        if std::io::stderr().is_terminal() {
            let in_flight = &in_flight;
            scope.spawn(move || say_what_waits(&finished, in_flight));
        }
        let sweep = super::sweep_watched("ps", Depth::Door, shown.verbose, &in_flight);
        drop(done);
        sweep
    })?;
    // A named session's earlier runs are counted even when only the running are listed; read
    // then without pruning or reporting anything: that is `ps -a`'s to do.
    let named = sweep.kept.iter().any(|k| k.entry.record.name().is_some());
    let ended = if shown.all {
        super::ended("ps")?
    } else if named {
        crate::running::ended::peek()
    } else {
        Vec::new()
    };
    // A session between keeping its ended record and removing its running one is listed once,
    // as running.
    let is_running = |e: &Ended| {
        sweep
            .kept
            .iter()
            .any(|k| k.entry.record.session_id == e.record.session_id)
    };
    let listed_ended = ended.iter().filter(|e| shown.all && !is_running(e));
    let all: Vec<Row> = (sweep.kept.iter().map(Row::Running))
        .chain(listed_ended.map(Row::Ended))
        .collect();
    let listed = all.len();
    let rows = history::grouped(all.into_iter().filter(|row| filters.keep(row)).collect());
    let restarts = Restarts::count(&rows, &ended);
    let kept: Vec<&Kept> = rows
        .iter()
        .filter_map(|row| match row {
            Row::Running(k) => Some(*k),
            Row::Ended(_) => None,
        })
        .collect();

    let now = time::unix_now();
    let formations = group_formations(&kept);
    let mut out = Out::default();
    match output {
        Output::Json => {
            let doc = json!({
                "capsules": rows.iter().map(|row| capsule_json(row, now, restarts.of(row))).collect::<Vec<_>>(),
                "formations": formations.iter().map(|(id, members)| formation_json(id, members)).collect::<Vec<_>>(),
            });
            out.line(&doc.to_string());
        }
        Output::Quiet => {
            for row in &rows {
                out.line(row.record().session_id().as_str());
            }
        }
        Output::Format(Template {
            table: false,
            pieces,
        }) => {
            for row in &rows {
                out.line(&render(&pieces, &capsule_json(row, now, restarts.of(row))).concat());
            }
        }
        Output::Format(Template {
            table: true,
            pieces,
        }) => {
            let mut lines = vec![header(&pieces)];
            lines.extend(
                rows.iter()
                    .map(|row| render(&pieces, &capsule_json(row, now, restarts.of(row)))),
            );
            for line in align(&lines) {
                out.line(&line);
            }
        }
        // Said apart from an empty machine, so a typo in a filter is not taken for one.
        Output::Table if rows.is_empty() && listed > 0 => out.line(if shown.all {
            "no capsules, running or ended, match"
        } else {
            "no running capsules match"
        }),
        Output::Table if rows.is_empty() => out.line(if shown.all {
            "no capsules, running or ended"
        } else {
            "no running capsules"
        }),
        Output::Table => {
            let with_formation = rows.iter().any(|row| row.record().formation_id().is_some());
            for line in table(&rows, with_formation, &restarts, shown.whole_ids, now) {
                out.line(&line);
            }
            for (id, members) in &formations {
                out.line(&formation_summary(id, members));
            }
            notes(&mut out, &kept, shown.verbose);
        }
    }
    Ok(i32::from(filters.any() && rows.is_empty()))
}

/// What follows the table: each unreachable session's reason, and with `verbose` each session
/// that runs its handlers unsandboxed or as a user of their own, or dropped log lines.
fn notes(out: &mut Out, kept: &[&Kept], verbose: bool) {
    for k in kept {
        if let Some(why) = &k.unreachable {
            let id = &k.entry.record.session_id;
            out.line(&format!("unreachable {id}: {}", why.escape_debug()));
        }
    }
    for k in kept.iter().filter(|_| verbose) {
        let (id, record) = (&k.entry.record.session_id, &k.entry.record);
        if let Some(why) = &record.sandbox {
            out.line(&format!("unsandboxed {id}: {}", why.escape_debug()));
        }
        if let Some(user) = &record.handler_user {
            out.line(&format!(
                "user {id}: handlers run as {}",
                user.escape_debug()
            ));
        }
        if record.log_lines_dropped > 0 {
            let n = record.log_lines_dropped;
            out.line(&format!(
                "stderr {id}: {n} log lines dropped: stderr not read"
            ));
        }
    }
}

/// How long `ps` waits in silence before saying on a terminal what it waits for.
const NOTICE_AFTER: Duration = Duration::from_secs(1);

/// The probes named in the notice; the rest are counted.
const NOTICE_NAMES: usize = 3;

/// Unless `finished` says the sweep ended within [`NOTICE_AFTER`], say on stderr which doors it
/// still waits for, and for at most how long: a suspended session's door holds the listing
/// for seconds, and silence would look like a hang. Called only when stderr is a terminal, so
/// scripts and pipes never see it.
fn say_what_waits(finished: &Receiver<()>, in_flight: &InFlight) {
    if finished.recv_timeout(NOTICE_AFTER) != Err(RecvTimeoutError::Timeout) {
        return;
    }
    let waiting = in_flight.waiting();
    let Some(first) = waiting.first() else {
        return;
    };
    let most = (door_client::PROBE.connect + door_client::PROBE.response).as_secs();
    let named = waiting
        .iter()
        .take(NOTICE_NAMES)
        .cloned()
        .collect::<Vec<_>>();
    let more = waiting.len().saturating_sub(NOTICE_NAMES);
    let what = match waiting.len() {
        1 => format!("the door of {first}"),
        n => format!(
            "{n} doors: {}{}",
            named.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ),
    };
    cli::warn(
        "ps",
        &format!("waiting for {what} to answer (at most {most} s each)"),
    );
}

fn table(
    rows: &[Row],
    with_formation: bool,
    restarts: &Restarts,
    whole_ids: bool,
    now: i64,
) -> Vec<String> {
    let sessions: Vec<&str> = rows
        .iter()
        .map(|row| row.record().session_id().hex())
        .collect();
    let mut formations: Vec<&str> = rows
        .iter()
        .filter_map(|row| row.record().formation_id())
        .map(|f| f.hex())
        .collect();
    formations.sort_unstable();
    formations.dedup();
    let (session_digits, formation_digits) = if whole_ids {
        (crate::id::HEX_DIGITS, crate::id::HEX_DIGITS)
    } else {
        (
            address::unique_prefix(&sessions, SHORT_ID),
            address::unique_prefix(&formations, SHORT_ID),
        )
    };
    let mut cells: Vec<Vec<String>> = vec![];
    let with_restarts = restarts.any();
    let mut header = vec!["SESSION", "NAME", "CAPSULE", "STATUS", "DETACHED", "UPTIME"];
    if with_restarts {
        header.push("RESTARTS");
    }
    if with_formation {
        header.push("FORMATION");
    }
    header.push("URL");
    cells.push(header.into_iter().map(String::from).collect());
    for (row, hex) in rows.iter().zip(&sessions) {
        let detached = match row {
            Row::Running(k) if k.entry.record.outlives_launcher => "yes",
            Row::Running(_) => "no",
            Row::Ended(_) => "-",
        };
        let mut line = vec![
            short("ses_", hex, session_digits),
            printable(row.name().unwrap_or("-")),
            printable(&row.record().capsule()),
            status_cell(row, now),
            detached.to_string(),
            uptime_secs(row, now).map_or_else(|| "?".to_string(), time::format_uptime),
        ];
        if with_restarts {
            line.push(
                restarts
                    .of(row)
                    .map_or_else(|| "-".to_string(), |n| n.to_string()),
            );
        }
        if with_formation {
            line.push(row.record().formation_id().map_or_else(
                || "-".to_string(),
                |f| short("frm_", f.hex(), formation_digits),
            ));
        }
        line.push(match row {
            Row::Running(k) => printable(&k.entry.record.url),
            Row::Ended(_) => "-".to_string(),
        });
        cells.push(line);
    }
    align(&cells)
}

fn group_formations<'a>(kept: &[&'a Kept]) -> BTreeMap<String, Vec<&'a Kept>> {
    let mut groups: BTreeMap<String, Vec<&Kept>> = BTreeMap::new();
    for &k in kept {
        if let Some(f) = &k.entry.record.formation_id {
            groups.entry(f.to_string()).or_default().push(k);
        }
    }
    groups
}

/// The launcher the members name, and whether it is still the process they name.
fn launcher_of(members: &[&Kept]) -> Option<(u32, bool)> {
    let launcher = members
        .iter()
        .find_map(|k| k.entry.record.formation_launcher.as_ref())?;
    let alive = crate::process::check(launcher.pid, &launcher.process_start).is_ok();
    Some((launcher.pid, alive))
}

fn formation_summary(id: &str, members: &[&Kept]) -> String {
    let running = members.iter().filter(|k| k.unreachable.is_none()).count();
    let unreachable = members.len() - running;
    let launcher = match launcher_of(members) {
        Some((pid, true)) => format!("launcher pid {pid}"),
        Some((pid, false)) => format!("launcher pid {pid} gone"),
        None => "no launcher recorded".to_string(),
    };
    let plural = if members.len() == 1 { "" } else { "s" };
    format!(
        "formation {id}: {} member{plural} ({running} running, {unreachable} unreachable), {launcher}",
        members.len()
    )
}

/// One session as `--json` (and `--format`) give it: every key for either kind, null where it
/// does not apply (a running session has not ended; an ended one has no pid, door or token).
fn capsule_json(row: &Row, now: i64, restarts: Option<usize>) -> Value {
    let (kept, ended) = match row {
        Row::Running(k) => (Some(*k), None),
        Row::Ended(e) => (None, Some(&e.record)),
    };
    let running = kept.map(|k| &k.entry.record);
    json!({
        "session_id": row.record().session_id(),
        "capsule_name": row.record().capsule_name(),
        "capsule_version": row.get(|r| &r.capsule_version, |r| &r.capsule_version),
        "status": row.status(),
        "reason": kept.and_then(|k| k.unreachable.as_ref()),
        "pid": running.map(|r| r.pid),
        "url": running.map(|r| &r.url),
        "workdir": row.get(|r| &r.workdir, |r| &r.workdir),
        "started_at": row.get(|r| &r.started_at, |r| &r.started_at),
        "uptime_secs": uptime_secs(row, now),
        "outlives_launcher": running.map(|r| r.outlives_launcher),
        "authenticated": running.map(|r| r.door_token.is_some()),
        "formation_id": row.record().formation_id(),
        "log_lines_dropped": running.map(|r| r.log_lines_dropped),
        "handler_user": running.and_then(|r| r.handler_user.as_deref()),
        "name": row.record().name(),
        "member": row.record().member(),
        "ended_at": ended.map(|e| &e.ended_at),
        "exit_code": ended.and_then(|e| e.exit_code),
        "duration_secs": ended.and_then(EndedRecord::duration_secs),
        "restarts": restarts,
    })
}

fn formation_json(id: &str, members: &[&Kept]) -> Value {
    let launcher = launcher_of(members).map(|(pid, alive)| json!({"pid": pid, "alive": alive}));
    json!({
        "formation_id": id,
        "members": members.iter().map(|k| k.entry.record.session_id.as_str()).collect::<Vec<_>>(),
        "running": members.iter().filter(|k| k.unreachable.is_none()).count(),
        "unreachable": members.iter().filter(|k| k.unreachable.is_some()).count(),
        "launcher": launcher,
    })
}
