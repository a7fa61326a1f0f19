//! `mur ps`: every capsule running on this machine, each record checked through all three layers
//! (concurrently), stale records pruned on the way past.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::Applet;
use crate::cli::{Out, Outcome};
use crate::running::{Depth, Kept};
use crate::time;

pub const APPLET: Applet = Applet {
    name: "ps",
    summary: "list the capsules running on this machine",
    usage: "\
Usage: mur ps [--json] [-v]

List every capsule session running on this machine, most recent first.

Each record in ~/.murmur/running is checked three ways: its pid is alive, the
process holding that pid started when the record says, and its door answers as
that session. Doors are probed at once, so the listing takes about as long as
the slowest probe (at most ~7 s for a door that never answers).

Records whose process is gone, and files that are not records, are removed on
the way past; how many is said on stderr (-v: one line each, with the reason).
A live process whose door does not answer is kept and shown as 'unreachable'.

Columns: SESSION CAPSULE STATUS DETACHED UPTIME [FORMATION] URL
  STATUS     running, or unreachable (live process, door not answering as it)
  DETACHED   yes when the session outlives the terminal that started it
  FORMATION  shown when any session belongs to a formation; one summary line
             per formation follows the table

Options:
  --json     one JSON document: {\"capsules\":[...],\"formations\":[...]}; keys are
             stable (added, never renamed or removed); never a token
  -v         name each pruned record and why
  -h, --help this text

Exit status: 0, even with nothing running; 1 when ~/.murmur/running cannot be
read (the path and reason are printed).
",
    main,
};

fn main(args: Vec<std::ffi::OsString>) -> Outcome {
    let mut json_output = false;
    let mut verbose = false;
    let mut parser = lexopt::Parser::from_args(args);
    while let Some(arg) = parser.next()? {
        match arg {
            lexopt::Arg::Long("json") => json_output = true,
            lexopt::Arg::Short('v') | lexopt::Arg::Long("verbose") => verbose = true,
            other => return Err(other.unexpected().into()),
        }
    }

    let sweep = super::sweep("ps", Depth::Door, verbose)?;

    let now = time::unix_now();
    let formations = group_formations(&sweep.kept);
    let mut out = Out::default();
    if json_output {
        let doc = json!({
            "capsules": sweep.kept.iter().map(|k| capsule_json(k, now)).collect::<Vec<_>>(),
            "formations": formations.iter().map(|(id, members)| formation_json(id, members)).collect::<Vec<_>>(),
        });
        out.line(&doc.to_string());
    } else if sweep.kept.is_empty() {
        out.line("no running capsules");
    } else {
        for line in table(&sweep.kept, !formations.is_empty(), now) {
            out.line(&line);
        }
        for (id, members) in &formations {
            out.line(&formation_summary(id, members));
        }
    }
    Ok(0)
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
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| {
            rows.iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
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
