//! `mur ps --format`: a template as docker reads one — `json`, `table TEMPLATE`, `{{.key}}`,
//! `{{json .key}}`, `{{json .}}` — each key one of the `--json` keys, rendered with every value
//! escaped so a hostile capsule name cannot forge a line or a terminal escape; and the aligned
//! columns the table and `table` templates share.

use serde_json::Value;

use crate::cli::{self, Failure};

/// A `--format` template: its pieces, and whether docker's `table` directive asked for a
/// header row and aligned columns.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Template {
    pub(super) table: bool,
    pub(super) pieces: Vec<Piece>,
}

/// One piece of a `--format` template.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Piece {
    Text(String),
    Key(&'static str),
    /// `{{json .key}}`, or with `None` `{{json .}}`: the value (the whole session) as JSON.
    Json(Option<&'static str>),
    /// Between two columns of a `table` template: a tab, or blanks alone between two keys.
    Column,
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
    "handler_user",
    "name",
    "member",
    "ended_at",
    "exit_code",
    "duration_secs",
    "restarts",
];

/// A `--format` template, as docker reads one: `json` is a session's JSON object a line
/// (`{{json .}}`); `table TEMPLATE` adds a header row and aligns the columns (separated by a
/// tab, `\t` written out, or blanks between two keys); `table` alone is the default table
/// (`None`). Otherwise text with `{{.key}}` and `{{json .key}}` / `{{json .}}` (spaces inside
/// the braces allowed), each key one of [`KEYS`]. The `Err` is a usage error naming an unknown
/// key or an unclosed `{{`.
pub(super) fn template(text: &str) -> Result<Option<Template>, Failure> {
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
pub(super) fn render(pieces: &[Piece], doc: &Value) -> Vec<String> {
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
pub(super) fn header(pieces: &[Piece]) -> Vec<String> {
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

/// Rows as lines of columns padded to their widest cell, two spaces apart (the last column not
/// padded, so no line ends in blanks).
pub(super) fn align(rows: &[Vec<String>]) -> Vec<String> {
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
pub(super) fn printable(cell: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
