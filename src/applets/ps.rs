//! `mur ps`: every capsule running on this machine, each record checked through all three layers
//! (concurrently), stale records pruned on the way past.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use serde_json::{Value, json};

use super::Applet;
use crate::cli::spec::{Arg, Kind, Opt, Parser, Spec};
use crate::cli::{self, Failure, Out, Outcome};
use crate::door_client;
use crate::running::{Depth, InFlight, Kept};
use crate::time;

pub const APPLET: Applet = Applet {
    name: "ps",
    summary: "list the capsules running on this machine",
    usage: "\
Usage: mur ps [--json | -q | --format TEMPLATE] [-v] [--filter KEY=VALUE]...
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

Columns: SESSION CAPSULE STATUS DETACHED UPTIME [FORMATION] URL
  STATUS     running, or unreachable (live process, door not answering as it)
  DETACHED   yes when the session outlives the terminal that started it
  FORMATION  shown when any session belongs to a formation; one summary line
             per formation follows the table

Options:
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
               name, capsule  NAME or NAME@VERSION (as --capsule)
               id             a session id, or 4+ of its first or last chars
               formation      a frm_ id or suffix of 4+ chars (as --formation)
               status         running or unreachable (as --status)
  --capsule NAME[@VERSION]
             --filter capsule=NAME[@VERSION]
  --formation ID
             --filter formation=ID
  --status running|unreachable
             --filter status=STATUS
  --json, -q and --format each choose the output: give one
  -v, --verbose
             name each pruned record and why, each session whose handlers
             run outside a sandbox and why (\"sandbox\": false, or no Landlock),
             and each session that dropped log lines because nobody read its
             stderr (a session never waits on its stderr):
               unsandboxed ses_0199...: unavailable: this kernel has no Landlock
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
            Kind::Words(&["running", "unreachable"]),
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

/// A `--format` template: its pieces, and whether docker's `table` directive asked for a
/// header row and aligned columns.
#[derive(Debug, PartialEq, Eq)]
struct Template {
    table: bool,
    pieces: Vec<Piece>,
}

/// One piece of a `--format` template.
#[derive(Debug, PartialEq, Eq)]
enum Piece {
    Text(String),
    Key(&'static str),
    /// `{{json .key}}`, or with `None` `{{json .}}`: the value (the whole session) as JSON.
    Json(Option<&'static str>),
    /// Between two columns of a `table` template: a tab, or blanks alone between two keys.
    Column,
}

/// The `--filter` keys, docker's where one fits, each as the option it stands for when there
/// is one: `--capsule X` is `--filter capsule=X`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FilterKey {
    /// A capsule's `NAME` or `NAME@VERSION` (docker's `name`; `capsule` says the same).
    Capsule,
    /// A session id, whole or by 4+ of its first or last characters (docker's `id`).
    Id,
    Formation,
    Status,
}

const FILTER_KEYS: &[(&str, FilterKey)] = &[
    ("name", FilterKey::Capsule),
    ("capsule", FilterKey::Capsule),
    ("id", FilterKey::Id),
    ("formation", FilterKey::Formation),
    ("status", FilterKey::Status),
];

/// What completion offers for `--filter`: each key with its `=`.
const FILTER_PREFIXES: [&str; 5] = ["name=", "capsule=", "id=", "formation=", "status="];

/// Which sessions are shown: docker's rule, each key's values or-ed (`--filter status=running
/// --filter status=unreachable` is both), different keys and-ed.
#[derive(Default)]
struct Filters {
    given: Vec<(FilterKey, String)>,
}

impl Filters {
    fn any(&self) -> bool {
        !self.given.is_empty()
    }

    /// Add `key=value`, checked so that a value that can match nothing is a usage error (named
    /// as the user wrote it, `option`), not an empty listing.
    fn add(&mut self, option: &str, key: FilterKey, value: String) -> Result<(), Failure> {
        let value = match key {
            FilterKey::Capsule => value,
            FilterKey::Id | FilterKey::Formation => {
                if value.len() < crate::address::MIN_SUFFIX {
                    let what = if key == FilterKey::Id { "ses_" } else { "frm_" };
                    return Err(Failure::Usage(format!(
                        "{option} wants a {what} id or at least {} of its characters, not '{value}'",
                        crate::address::MIN_SUFFIX
                    )));
                }
                value.to_ascii_lowercase()
            }
            FilterKey::Status => {
                if !["running", "unreachable"].contains(&value.as_str()) {
                    return Err(Failure::Usage(format!(
                        "{option} wants running or unreachable, not '{value}'"
                    )));
                }
                value
            }
        };
        self.given.push((key, value));
        Ok(())
    }

    /// `--filter KEY=VALUE`.
    fn add_filter(&mut self, text: String) -> Result<(), Failure> {
        let known = || {
            FILTER_KEYS
                .iter()
                .map(|(k, _)| *k)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let Some((name, value)) = text.split_once('=') else {
            return Err(Failure::Usage(format!(
                "--filter wants KEY=VALUE (keys: {}), not '{text}'",
                known()
            )));
        };
        let Some((_, key)) = FILTER_KEYS.iter().find(|(k, _)| *k == name) else {
            return Err(Failure::Usage(format!(
                "--filter: unknown key '{name}' (the keys: {}){}",
                known(),
                cli::spec::did_you_mean(name, FILTER_KEYS.iter().map(|(k, _)| *k))
            )));
        };
        self.add(&format!("--filter {name}="), *key, value.to_string())
    }

    fn keep(&self, k: &Kept) -> bool {
        let matches = |key: FilterKey, value: &str| {
            let r = &k.entry.record;
            match key {
                FilterKey::Capsule => value == r.capsule_name || value == r.capsule(),
                FilterKey::Id => {
                    let id = r.session_id.as_str().to_ascii_lowercase();
                    id.starts_with(value) || id.ends_with(value)
                }
                FilterKey::Formation => r
                    .formation_id
                    .as_ref()
                    .is_some_and(|id| id.as_str().ends_with(value)),
                FilterKey::Status => value == status(k),
            }
        };
        self.given.iter().all(|(key, _)| {
            self.given
                .iter()
                .filter(|(other, _)| other == key)
                .any(|(_, value)| matches(*key, value))
        })
    }
}

fn parse(args: Vec<std::ffi::OsString>) -> Result<(Output, Filters, bool), Failure> {
    let mut output = Output::Table;
    // The option that chose the output, so a second one is refused naming both.
    let mut chosen: Option<&str> = None;
    let mut filters = Filters::default();
    let mut verbose = false;
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
            Arg::Flag("verbose") => verbose = true,
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
    Ok((output, filters, verbose))
}

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
];

/// A `--format` template, as docker reads one: `json` is a session's JSON object a line
/// (`{{json .}}`); `table TEMPLATE` adds a header row and aligns the columns (separated by a
/// tab, `\t` written out, or blanks between two keys); `table` alone is the default table
/// (`None`). Otherwise text with `{{.key}}` and `{{json .key}}` / `{{json .}}` (spaces inside
/// the braces allowed), each key one of [`KEYS`]. The `Err` is a usage error naming an unknown
/// key or an unclosed `{{`.
fn template(text: &str) -> Result<Option<Template>, Failure> {
    if text == "json" {
        return Ok(Some(Template {
            table: false,
            pieces: vec![Piece::Json(None)],
        }));
    }
    let (table, body) = match text.strip_prefix("table") {
        Some("") => return Ok(None),
        Some(rest) if rest.starts_with(char::is_whitespace) => (true, rest.trim_start()),
        _ => (false, text),
    };
    let body = body.replace("\\t", "\t").replace("\\n", "\n");
    let mut pieces = vec![];
    let mut rest = body.as_str();
    while let Some(open) = rest.find("{{") {
        text_pieces(&rest[..open], table, &mut pieces);
        let after = &rest[open + 2..];
        let close = after.find("}}").ok_or_else(|| {
            Failure::Usage(format!("--format: '{{{{' without '}}}}' in '{text}'"))
        })?;
        let inner = after[..close].trim();
        pieces.push(match inner.strip_prefix("json") {
            Some(field) if field.trim() == "." => Piece::Json(None),
            Some(field) if field.starts_with(char::is_whitespace) => {
                Piece::Json(Some(key(field.trim())?))
            }
            _ => Piece::Key(key(inner)?),
        });
        rest = &after[close + 2..];
    }
    text_pieces(rest, table, &mut pieces);
    if table {
        // Blanks alone between two keys separate columns, as a tab does.
        let n = pieces.len();
        for i in 1..n.saturating_sub(1) {
            if matches!(&pieces[i], Piece::Text(t) if t.trim().is_empty())
                && !matches!(pieces[i - 1], Piece::Column)
                && !matches!(pieces[i + 1], Piece::Column)
            {
                pieces[i] = Piece::Column;
            }
        }
    }
    Ok(Some(Template { table, pieces }))
}

/// The text between keys: in a `table` template each tab is a column break.
fn text_pieces(text: &str, table: bool, pieces: &mut Vec<Piece>) {
    let mut parts = text.split(if table { '\t' } else { '\0' }).peekable();
    while let Some(part) = parts.next() {
        if !part.is_empty() {
            pieces.push(Piece::Text(part.to_string()));
        }
        if parts.peek().is_some() {
            pieces.push(Piece::Column);
        }
    }
}

/// `.key`, one of [`KEYS`], or a usage error listing them.
fn key(inner: &str) -> Result<&'static str, Failure> {
    let name = inner.strip_prefix('.').unwrap_or("");
    KEYS.iter().find(|k| **k == name).copied().ok_or_else(|| {
        Failure::Usage(format!(
            "--format: unknown key '{inner}'; the keys are {}{}",
            KEYS.iter()
                .map(|k| format!(".{k}"))
                .collect::<Vec<_>>()
                .join(" "),
            cli::spec::suggest(name, KEYS.iter().copied())
                .map_or_else(String::new, |k| format!("; did you mean '.{k}'?"))
        ))
    })
}

/// One session through a template, as cells (one, unless a `table` template has columns):
/// strings as they are, null as nothing, anything else as JSON; control characters escaped so
/// a value cannot forge a line.
fn render(pieces: &[Piece], doc: &Value) -> Vec<String> {
    let mut cells = vec![String::new()];
    for piece in pieces {
        let cell = cells.last_mut().expect("never empty");
        match piece {
            Piece::Text(text) => cell.push_str(text),
            Piece::Column => cells.push(String::new()),
            Piece::Json(None) => cell.push_str(&doc.to_string()),
            Piece::Json(Some(key)) => cell.push_str(&doc[*key].to_string()),
            Piece::Key(key) => match &doc[*key] {
                Value::Null => {}
                Value::String(text) => cell.extend(text.chars().flat_map(|c| {
                    if c.is_control() {
                        c.escape_default().collect::<Vec<_>>()
                    } else {
                        vec![c]
                    }
                })),
                other => cell.push_str(&other.to_string()),
            },
        }
    }
    cells
}

/// A `table` template's header row: each column's keys in capitals (`{{.url}}` is `URL`).
fn header(pieces: &[Piece]) -> Vec<String> {
    let mut cells = vec![vec![]];
    for piece in pieces {
        let cell = cells.last_mut().expect("never empty");
        match piece {
            Piece::Column => cells.push(vec![]),
            Piece::Key(key) | Piece::Json(Some(key)) => cell.push(key.to_ascii_uppercase()),
            Piece::Json(None) => cell.push("JSON".to_string()),
            Piece::Text(_) => {}
        }
    }
    cells.into_iter().map(|keys| keys.join(" ")).collect()
}

fn main(args: Vec<std::ffi::OsString>) -> Outcome {
    let (output, filters, verbose) = parse(args)?;
    let in_flight = InFlight::default();
    let mut sweep = std::thread::scope(|scope| {
        let (done, finished) = std::sync::mpsc::channel::<()>();
        if std::io::stderr().is_terminal() {
            let in_flight = &in_flight;
            scope.spawn(move || say_what_waits(&finished, in_flight));
        }
        let sweep = super::sweep_watched("ps", Depth::Door, verbose, &in_flight);
        drop(done);
        sweep
    })?;
    let running = sweep.kept.len();
    sweep.kept.retain(|k| filters.keep(k));

    let now = time::unix_now();
    let formations = group_formations(&sweep.kept);
    let mut out = Out::default();
    match output {
        Output::Json => {
            let doc = json!({
                "capsules": sweep.kept.iter().map(|k| capsule_json(k, now)).collect::<Vec<_>>(),
                "formations": formations.iter().map(|(id, members)| formation_json(id, members)).collect::<Vec<_>>(),
            });
            out.line(&doc.to_string());
        }
        Output::Quiet => {
            for k in &sweep.kept {
                out.line(k.entry.record.session_id.as_str());
            }
        }
        Output::Format(Template {
            table: false,
            pieces,
        }) => {
            for k in &sweep.kept {
                out.line(&render(&pieces, &capsule_json(k, now)).concat());
            }
        }
        Output::Format(Template {
            table: true,
            pieces,
        }) => {
            let mut rows = vec![header(&pieces)];
            rows.extend(
                sweep
                    .kept
                    .iter()
                    .map(|k| render(&pieces, &capsule_json(k, now))),
            );
            for line in align(&rows) {
                out.line(&line);
            }
        }
        // Said apart from an empty machine, so a typo in a filter is not taken for one.
        Output::Table if sweep.kept.is_empty() && running > 0 => {
            out.line("no running capsules match");
        }
        Output::Table if sweep.kept.is_empty() => out.line("no running capsules"),
        Output::Table => {
            for line in table(&sweep.kept, !formations.is_empty(), now) {
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
            for k in sweep.kept.iter().filter(|_| verbose) {
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
    Ok(i32::from(filters.any() && sweep.kept.is_empty()))
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

fn status(kept: &Kept) -> &'static str {
    if kept.unreachable.is_some() {
        "unreachable"
    } else {
        "running"
    }
}

fn uptime_secs(kept: &Kept, now: i64) -> Option<i64> {
    time::parse_rfc3339(&kept.entry.record.started_at).map(|start| (now - start).max(0))
}

fn table(kept: &[Kept], with_formation: bool, now: i64) -> Vec<String> {
    let mut rows: Vec<Vec<String>> = vec![];
    let mut header = vec!["SESSION", "CAPSULE", "STATUS", "DETACHED", "UPTIME"];
    if with_formation {
        header.push("FORMATION");
    }
    header.push("URL");
    rows.push(header.into_iter().map(String::from).collect());
    for k in kept {
        let r = &k.entry.record;
        let mut row = vec![
            r.session_id.to_string(),
            r.capsule(),
            status(k).to_string(),
            if r.outlives_launcher { "yes" } else { "no" }.to_string(),
            uptime_secs(k, now).map_or_else(|| "?".to_string(), time::format_uptime),
        ];
        if with_formation {
            row.push(
                r.formation_id
                    .as_ref()
                    .map_or_else(|| "-".to_string(), |f| f.to_string()),
            );
        }
        row.push(r.url.clone());
        rows.push(row.into_iter().map(|cell| printable(&cell)).collect());
    }
    align(&rows)
}

/// Rows as lines of columns padded to their widest cell, two spaces apart (the last column not
/// padded, so no line ends in blanks).
fn align(rows: &[Vec<String>]) -> Vec<String> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|row| row.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|row| {
            let last = row.len().saturating_sub(1);
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

fn capsule_json(k: &Kept, now: i64) -> Value {
    let r = &k.entry.record;
    json!({
        "session_id": r.session_id,
        "capsule_name": r.capsule_name,
        "capsule_version": r.capsule_version,
        "status": status(k),
        "reason": k.unreachable,
        "pid": r.pid,
        "url": r.url,
        "workdir": r.workdir,
        "started_at": r.started_at,
        "uptime_secs": uptime_secs(k, now),
        "outlives_launcher": r.outlives_launcher,
        "authenticated": r.door_token.is_some(),
        "formation_id": r.formation_id,
        "log_lines_dropped": r.log_lines_dropped,
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

    fn pieces(text: &str) -> Vec<Piece> {
        template(text).unwrap().unwrap().pieces
    }

    #[test]
    fn templates_name_json_keys_and_nothing_else() {
        assert_eq!(
            pieces("{{.url}} x{{ .pid }}"),
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
        assert!(err("{{.urll}}").contains("did you mean '.url'?"));
        assert!(err("{{json .nope}}").contains("unknown key '.nope'"));
        assert!(err("{{.url").contains("without"));
        let doc = json!({"url": "a\nb\"c\\", "pid": 7, "reason": null});
        let p = pieces("{{.url}} {{.pid}} [{{.reason}}] {{json .url}}");
        assert_eq!(render(&p, &doc), ["a\\nb\"c\\ 7 [] \"a\\nb\\\"c\\\\\""]);
        assert_eq!(render(&pieces("json"), &doc), [doc.to_string()]);
        assert_eq!(render(&pieces("{{json .}}"), &doc), [doc.to_string()]);
    }

    #[test]
    fn table_templates_have_a_header_and_columns() {
        assert!(template("table").unwrap().is_none());
        let t = template("table {{.url}}\\t{{.pid}} {{.status}}")
            .unwrap()
            .unwrap();
        assert!(t.table);
        assert_eq!(header(&t.pieces), ["URL", "PID", "STATUS"]);
        let doc = json!({"url": "u", "pid": 7, "status": "running"});
        assert_eq!(render(&t.pieces, &doc), ["u", "7", "running"]);
        // Without `table` a tab is text, and `tablex` is no directive.
        assert_eq!(render(&pieces("{{.url}}\t{{.pid}}"), &doc), ["u\t7"]);
        assert_eq!(render(&pieces("tablex{{.pid}}"), &doc), ["tablex7"]);
        assert_eq!(
            align(&[
                vec!["URL".into(), "PID".into()],
                vec!["long-url".into(), "7".into()]
            ]),
            ["URL       PID", "long-url  7"]
        );
    }
}
