//! `mur control`: a running session's control plane from the command line — the `/control`
//! routes, with the control token read from `<session>.control`, so neither the token nor a
//! secret's value is ever typed where `ps` and shell history can see it.

use std::io::Read;
use std::time::Duration;

use serde_json::{Value, json};

use super::Applet;
use crate::cli::{self, Failure, Out, Outcome};
use crate::door_client;
use crate::net::client::{Deadlines, WholeResponse};
use crate::running::Entry;
use crate::secret::Secret;

pub const APPLET: Applet = Applet {
    name: "control",
    summary: "show or change a running session's settings and secrets",
    usage: "\
Usage: mur control ADDR show [--json]
       mur control ADDR set NAME VALUE
       mur control ADDR secret NAME < FILE
       mur control ADDR forget NAME

Drive the control plane of a session whose capsule declares 'control' in its
manifest. New values apply from the session's next task, in its handlers'
environment. ADDR is @N, a full ses_ id, a capsule NAME or NAME@VERSION, or a
suffix of at least 4 characters (see 'mur stop --help').

  show          the declared settings with their values, and the declared
                secrets with whether each is set (never a secret's value);
                --json prints the door's listing
  set NAME VALUE
                set a setting (at most 1 KiB)
  secret NAME   set a secret to what stdin holds (at most 8 KiB, one
                trailing newline dropped): a secret is never taken from the
                command line, where ps and shell history would keep it
                  printf %s \"$KEY\" | mur control @1 secret API_KEY
  forget NAME   unset a secret or a setting

The calls carry the session's control token, read from its control file in
~/.murmur/running (mode 0600); a secret is sent only to a door on this machine
(the door refuses it from any other peer).

Exit status: 0 when done; 1 when the session is not running, declares no
control, or the door refused (its reason said: an undeclared NAME, a value too
long); 2 on a usage error (a secret's value on the command line included).
",
    main,
};

/// Control calls are answered at once; only a wedged door is slower.
const CONTROL: Deadlines = Deadlines {
    connect: Duration::from_secs(2),
    response: Duration::from_secs(10),
};

/// The most a secret may hold (the door's bound).
const MAX_SECRET: usize = 8 << 10;

/// What the command line asked for.
enum Action {
    Show { json: bool },
    Set { name: String, value: String },
    Secret { name: String },
    Forget { name: String },
}

fn main(args: Vec<std::ffi::OsString>) -> Outcome {
    let mut positional = vec![];
    let mut as_json = false;
    let mut parser = lexopt::Parser::from_args(args);
    while let Some(arg) = parser.next()? {
        match arg {
            lexopt::Arg::Long("json") => as_json = true,
            lexopt::Arg::Value(value) => positional.push(cli::utf8(value)?),
            other => return Err(other.unexpected().into()),
        }
    }
    let (address, action) = parse(positional, as_json)?;
    let running = super::running("control")?;
    let entry = super::one_session(Some(&address), &running)?;
    let token = super::token::control_token(entry)?;
    run(entry, &token, action)
}

/// ADDR and the action the positional arguments name.
fn parse(positional: Vec<String>, as_json: bool) -> Result<(String, Action), Failure> {
    let mut words = positional.into_iter();
    let (Some(address), Some(verb)) = (words.next(), words.next()) else {
        return Err(Failure::Usage(
            "name the session and what to do: ADDR show|set|secret|forget".into(),
        ));
    };
    let rest: Vec<String> = words.collect();
    let action = match (verb.as_str(), rest.as_slice()) {
        ("show", []) => Action::Show { json: as_json },
        ("set", [name, value]) => Action::Set {
            name: name.clone(),
            value: value.clone(),
        },
        ("secret", [name]) => Action::Secret { name: name.clone() },
        ("secret", [_, _, ..]) => {
            return Err(Failure::Usage(
                "a secret's value is never taken from the command line (ps and shell history keep it): give it on stdin, e.g. printf %s \"$KEY\" | mur control ADDR secret NAME".into(),
            ));
        }
        ("forget", [name]) => Action::Forget { name: name.clone() },
        ("show" | "set" | "secret" | "forget", _) => {
            return Err(Failure::Usage(format!(
                "wrong arguments for '{verb}': show | set NAME VALUE | secret NAME | forget NAME"
            )));
        }
        _ => {
            return Err(Failure::Usage(format!(
                "unknown action '{}': show | set NAME VALUE | secret NAME | forget NAME",
                verb.escape_debug()
            )));
        }
    };
    if as_json && !matches!(action, Action::Show { .. }) {
        return Err(Failure::Usage("--json goes with show".into()));
    }
    Ok((address, action))
}

fn run(entry: &Entry, token: &Secret, action: Action) -> Outcome {
    let door = |method: &str, path: &str, body: Option<&[u8]>| {
        let response = door_client::http(&entry.record.url, method, path, token, body, CONTROL)
            .map_err(|why| Failure::Failed(format!("{}: {why}", entry.record.session_id)))?;
        accepted(response)
    };
    let mut out = Out::default();
    match action {
        Action::Show { json } => {
            let listing = door("GET", "/control", None)?;
            if json {
                out.line(&listing.to_string());
            } else {
                show(&listing, &mut out);
            }
        }
        Action::Set { name, value } => {
            let body = json!({"value": value}).to_string();
            door("PUT", &route("settings", &name)?, Some(body.as_bytes()))?;
            out.line(&format!("set: {name}"));
        }
        Action::Secret { name } => {
            let path = route("secrets", &name)?;
            let value = secret_from_stdin()?;
            door("PUT", &path, Some(&value))?;
            out.line(&format!("set: {name} (secret)"));
        }
        Action::Forget { name } => {
            let listing = door("GET", "/control", None)?;
            let kind = if listing["settings"].get(&name).is_some() {
                "settings"
            } else {
                "secrets"
            };
            door("DELETE", &route(kind, &name)?, None)?;
            out.line(&format!("forgot: {name}"));
        }
    }
    Ok(0)
}

/// `/control/KIND/NAME`, for a NAME that is a plain environment variable name (what a manifest
/// may declare), so nothing typed can reach another route.
fn route(kind: &str, name: &str) -> Result<String, Failure> {
    let plain = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !plain {
        return Err(Failure::Usage(format!(
            "'{}' is not a setting or secret name (letters, digits and _)",
            name.escape_debug()
        )));
    }
    Ok(format!("/control/{kind}/{name}"))
}

/// The JSON a 2xx answer carries, or the door's reason for refusing.
fn accepted(response: WholeResponse) -> Result<Value, Failure> {
    let body: Value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    if (200..300).contains(&response.status) {
        return Ok(body);
    }
    let why = body["error"]
        .as_str()
        .map(|e| e.chars().filter(|c| !c.is_control()).take(300).collect())
        .unwrap_or_else(|| format!("HTTP {}", response.status));
    Err(Failure::Failed(format!("the door refused: {why}")))
}

/// The listing for a person: each setting with its value, each secret with whether it is set.
fn show(listing: &Value, out: &mut Out) {
    let printable = |s: &str| {
        s.chars()
            .map(|c| if c.is_control() { '\u{fffd}' } else { c })
            .collect::<String>()
    };
    for (kind, entries) in [
        ("setting", &listing["settings"]),
        ("secret", &listing["secrets"]),
    ] {
        let Some(entries) = entries.as_object() else {
            continue;
        };
        for (name, entry) in entries {
            let set = entry["set"].as_bool().unwrap_or(false);
            let value = match (kind, entry["value"].as_str()) {
                ("setting", Some(value)) => format!("= {}", printable(value)),
                _ if set => "set".to_string(),
                _ => "not set".to_string(),
            };
            out.line(&format!("{kind}  {}  {value}", printable(name)));
        }
    }
}

/// A secret's value from stdin, as bytes (the door holds any but NUL): at most [`MAX_SECRET`],
/// one trailing newline dropped.
fn secret_from_stdin() -> Result<Vec<u8>, Failure> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(MAX_SECRET as u64 + 2)
        .read_to_end(&mut bytes)
        .map_err(|err| Failure::Failed(format!("cannot read the secret from stdin: {err}")))?;
    if bytes.ends_with(b"\n") {
        bytes.pop();
    }
    if bytes.len() > MAX_SECRET {
        return Err(Failure::Usage("a secret is at most 8 KiB".into()));
    }
    if bytes.is_empty() {
        return Err(Failure::Usage(
            "stdin held no secret (pipe or redirect it: mur control ADDR secret NAME < FILE)"
                .into(),
        ));
    }
    Ok(bytes)
}
