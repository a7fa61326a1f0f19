//! `mur ps`: every capsule running on this machine, each record checked through all three layers
//! (concurrently), stale records pruned on the way past.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::Applet;
use crate::address;
use crate::cli::{self, Failure, Out, Outcome};
use crate::json::ended::EndedRecord;
use crate::running::ended::Ended;
use crate::running::{Depth, Kept};
use crate::time;
use row::{Row, SHORT_ID, short, status_cell, uptime_secs};

mod row;

pub const APPLET: Applet = Applet {
    name: "ps",
    summary: "list the capsules running on this machine",
    usage: "\
Usage: mur ps [-a] [--json | -q | --format TEMPLATE] [-v] [--no-trunc]
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

Columns: SESSION NAME CAPSULE STATUS DETACHED UPTIME [FORMATION] URL
  SESSION    the id's first 12 hex digits (more when two would share them):
             an address as it is; --no-trunc shows whole ids
  NAME       the --name it runs under, else its member name in its formation
  STATUS     running, or unreachable (live process, door not answering as it);
             with -a also 'exited (CODE) 2 minutes ago', 'killed ...' (mur
             stop had to SIGKILL it) or 'gone ...' (found gone: SIGKILLed or
             crashed, its exit status unknown); UPTIME is then how long it ran
  DETACHED   yes when the session outlives the terminal that started it
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
             e.g. --format '{{.url}}' or '{{.session_id}} {{.status}}'; an
             unknown key is a usage error naming it
  --capsule NAME[@VERSION]
             only the sessions of that capsule
  --formation ID
             only the members of that formation (a full frm_ id or a suffix of
             at least 4 characters)
  --status running|unreachable|exited|killed|gone
             only the sessions in that state (an ended one's implies -a)
  -v         name each pruned record and why, each session whose handlers
             run outside a sandbox and why (\"sandbox\": false, or no Landlock),
             and each session that dropped log lines because nobody read its
             stderr (a session never waits on its stderr):
               unsandboxed ses_0199...: unavailable: this kernel has no Landlock
               stderr ses_0199...: 1200 log lines dropped: stderr not read
  -h, --help this text

Exit status: 0; 1 when ~/.murmur/running cannot be read (the path and reason
are printed), or when a filter was given and no session matched it (as pgrep:
'mur ps --capsule shout -q || mur run ...'); 2 on a usage error. With nothing
running and no filter, 0 and 'no running capsules'.
",
    main,
};

/// How the sessions are printed.
enum Output {
    Table,
    Json,
    Quiet,
    Format(Vec<Piece>),
}

/// One piece of a `--format` template.
#[derive(Debug, PartialEq, Eq)]
enum Piece {
    Text(String),
    Key(&'static str),
}

/// Which sessions are shown.
#[derive(Default)]
struct Filters {
    capsule: Option<String>,
    formation: Option<String>,
    status: Option<&'static str>,
}

impl Filters {
    fn any(&self) -> bool {
        self.capsule.is_some() || self.formation.is_some() || self.status.is_some()
    }

    fn keep(&self, row: &Row) -> bool {
        let capsule = self
            .capsule
            .as_ref()
            .is_none_or(|c| c == row.record().capsule_name() || *c == row.record().capsule());
        let formation = self.formation.as_ref().is_none_or(|f| {
            row.record()
                .formation_id()
                .is_some_and(|id| id.as_str().ends_with(f.as_str()))
        });
        let status = self.status.is_none_or(|s| s == row.status());
        capsule && formation && status
    }
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
    let mut filters = Filters::default();
    let mut shown = Shown::default();
    let mut parser = lexopt::Parser::from_args(args);
    while let Some(arg) = parser.next()? {
        match arg {
            lexopt::Arg::Long("json") => output = Output::Json,
            lexopt::Arg::Short('q') | lexopt::Arg::Long("quiet") => output = Output::Quiet,
            lexopt::Arg::Long("format") => {
                output = Output::Format(template(&cli::utf8(parser.value()?)?)?);
            }
            lexopt::Arg::Short('v') | lexopt::Arg::Long("verbose") => shown.verbose = true,
            lexopt::Arg::Short('a') | lexopt::Arg::Long("all") => shown.all = true,
            lexopt::Arg::Long("no-trunc") => shown.whole_ids = true,
            lexopt::Arg::Long("capsule") => filters.capsule = Some(cli::utf8(parser.value()?)?),
            lexopt::Arg::Long("formation") => {
                let id = cli::utf8(parser.value()?)?.to_ascii_lowercase();
                if id.len() < crate::address::MIN_SUFFIX {
                    return Err(Failure::Usage(format!(
                        "--formation wants a frm_ id or at least {} of its last characters, not '{id}'",
                        crate::address::MIN_SUFFIX
                    )));
                }
                filters.formation = Some(id);
            }
            lexopt::Arg::Long("status") => {
                let text = cli::utf8(parser.value()?)?;
                filters.status = Some(STATUSES.iter().find(|s| **s == text).ok_or_else(|| {
                    Failure::Usage(format!(
                        "--status wants one of {}, not '{text}'",
                        STATUSES.join(", ")
                    ))
                })?);
            }
            other => return Err(other.unexpected().into()),
        }
    }
    // A state only an ended session is in asks for ended sessions: `-a` is implied, as docker's
    // `--filter status=exited` lists stopped containers without it.
    shown.all |= filters
        .status
        .is_some_and(|s| !matches!(s, "running" | "unreachable"));
    Ok((output, filters, shown))
}

/// Every STATUS a session may show: running ones', then ended ones' (`-a`).
const STATUSES: &[&str] = &["running", "unreachable", "exited", "killed", "gone"];

/// The keys of a session in `--json` (and so in `--format`), in the order it writes them.
const KEYS: &[&str] = &[
    "session_id",
    "capsule_name",
    "capsule_version",
    "status",
    "reason",
    "pid",
    "url",
    "workdir",
    "started_at",
    "uptime_secs",
    "outlives_launcher",
    "authenticated",
    "formation_id",
    "log_lines_dropped",
    "name",
    "member",
    "ended_at",
    "exit_code",
    "duration_secs",
];

/// A `--format` template: text and `{{.key}}` (spaces inside the braces allowed), each key one
/// of [`KEYS`]. The `Err` is a usage error naming an unknown key or an unclosed `{{`.
fn template(text: &str) -> Result<Vec<Piece>, Failure> {
    let mut pieces = vec![];
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        if open > 0 {
            pieces.push(Piece::Text(rest[..open].to_string()));
        }
        let after = &rest[open + 2..];
        let close = after.find("}}").ok_or_else(|| {
            Failure::Usage(format!("--format: '{{{{' without '}}}}' in '{text}'"))
        })?;
        let inner = after[..close].trim();
        let name = inner.strip_prefix('.').unwrap_or("");
        let key = KEYS.iter().find(|k| **k == name).ok_or_else(|| {
            Failure::Usage(format!(
                "--format: unknown key '{inner}'; the keys are {}",
                KEYS.iter()
                    .map(|k| format!(".{k}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ))
        })?;
        pieces.push(Piece::Key(key));
        rest = &after[close + 2..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest.to_string()));
    }
    Ok(pieces)
}

/// One session through a template: strings as they are, null as nothing, anything else as
/// JSON; control characters escaped so a value cannot forge a line.
fn render(pieces: &[Piece], doc: &Value) -> String {
    let mut line = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(text) => line.push_str(text),
            Piece::Key(key) => match &doc[*key] {
                Value::Null => {}
                Value::String(text) => line.extend(text.chars().flat_map(|c| {
                    if c.is_control() {
                        c.escape_default().collect::<Vec<_>>()
                    } else {
                        vec![c]
                    }
                })),
                other => line.push_str(&other.to_string()),
            },
        }
    }
    line
}

fn main(args: Vec<std::ffi::OsString>) -> Outcome {
    let (output, filters, shown) = parse(args)?;
    let mut sweep = super::sweep("ps", Depth::Door, shown.verbose)?;
    sweep.kept.retain(|k| filters.keep(&Row::Running(k)));
    let ended = if shown.all {
        super::ended("ps")?
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
    let rows: Vec<Row> = (sweep.kept.iter().map(Row::Running))
        .chain(ended.iter().filter(|e| !is_running(e)).map(Row::Ended))
        .filter(|row| filters.keep(row))
        .collect();

    let now = time::unix_now();
    let formations = group_formations(&sweep.kept);
    let mut out = Out::default();
    match output {
        Output::Json => {
            let doc = json!({
                "capsules": rows.iter().map(|row| capsule_json(row, now)).collect::<Vec<_>>(),
                "formations": formations.iter().map(|(id, members)| formation_json(id, members)).collect::<Vec<_>>(),
            });
            out.line(&doc.to_string());
        }
        Output::Quiet => {
            for row in &rows {
                out.line(row.record().session_id().as_str());
            }
        }
        Output::Format(pieces) => {
            for row in &rows {
                out.line(&render(&pieces, &capsule_json(row, now)));
            }
        }
        Output::Table if rows.is_empty() => out.line(if shown.all {
            "no capsules, running or ended"
        } else {
            "no running capsules"
        }),
        Output::Table => {
            let with_formation = rows.iter().any(|row| row.record().formation_id().is_some());
            for line in table(&rows, with_formation, shown.whole_ids, now) {
                out.line(&line);
            }
            for (id, members) in &formations {
                out.line(&formation_summary(id, members));
            }
            for k in &sweep.kept {
                if let Some(why) = &k.unreachable {
                    let id = &k.entry.record.session_id;
                    out.line(&format!("unreachable {id}: {}", why.escape_debug()));
                }
            }
            for k in sweep.kept.iter().filter(|_| shown.verbose) {
                let (id, record) = (&k.entry.record.session_id, &k.entry.record);
                if let Some(why) = &record.sandbox {
                    out.line(&format!("unsandboxed {id}: {}", why.escape_debug()));
                }
                if record.log_lines_dropped > 0 {
                    let n = record.log_lines_dropped;
                    out.line(&format!(
                        "stderr {id}: {n} log lines dropped: stderr not read"
                    ));
                }
            }
        }
    }
    Ok(i32::from(filters.any() && rows.is_empty()))
}

fn table(rows: &[Row], with_formation: bool, whole_ids: bool, now: i64) -> Vec<String> {
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
    let mut header = vec!["SESSION", "NAME", "CAPSULE", "STATUS", "DETACHED", "UPTIME"];
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
    let widths: Vec<usize> = (0..cells[0].len())
        .map(|c| {
            cells
                .iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    cells
        .iter()
        .map(|row| {
            let last = row.len() - 1;
            row.iter()
                .enumerate()
                .map(|(c, cell)| {
                    if c == last {
                        cell.clone()
                    } else {
                        format!("{cell:<w$}", w = widths[c])
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
        })
        .collect()
}

/// A cell with control characters and spaces escaped, so a hostile capsule name cannot forge
/// table rows or terminal escapes.
fn printable(cell: &str) -> String {
    cell.chars()
        .flat_map(|c| {
            if c.is_control() || c == ' ' {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

fn group_formations(kept: &[Kept]) -> BTreeMap<String, Vec<&Kept>> {
    let mut groups: BTreeMap<String, Vec<&Kept>> = BTreeMap::new();
    for k in kept {
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
fn capsule_json(row: &Row, now: i64) -> Value {
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
        "name": row.record().name(),
        "member": row.record().member(),
        "ended_at": ended.map(|e| &e.ended_at),
        "exit_code": ended.and_then(|e| e.exit_code),
        "duration_secs": ended.and_then(EndedRecord::duration_secs),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_name_json_keys_and_nothing_else() {
        assert_eq!(
            template("{{.url}} x{{ .pid }}").unwrap(),
            [
                Piece::Key("url"),
                Piece::Text(" x".into()),
                Piece::Key("pid")
            ]
        );
        let err = |t: &str| match template(t) {
            Err(Failure::Usage(why)) => why,
            other => panic!("{other:?}"),
        };
        assert!(err("{{.nope}}").contains("unknown key '.nope'"));
        assert!(err("{{url}}").contains("unknown key 'url'"));
        assert!(err("{{.url").contains("without"));
        let doc = json!({"url": "a\nb\"c\\", "pid": 7, "reason": null});
        let pieces = template("{{.url}} {{.pid}} [{{.reason}}]").unwrap();
        assert_eq!(render(&pieces, &doc), "a\\nb\"c\\ 7 []");
    }
}
