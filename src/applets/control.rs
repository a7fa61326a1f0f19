//! `mur control`: a running session's control plane from the command line — the `/control`
//! routes, with the control token read from `<session>.control`, so neither the token nor a
//! secret's value is ever typed where `ps` and shell history can see it.

use std::io::Read;
use std::time::Duration;

use serde_json::{Value, json};

use super::{Applet, printable};
use crate::cli::spec::{Arg, Kind, Opt, Parser, Spec};
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
                set a setting (at most 1 KiB); VALUE goes as JSON when it
                parses as JSON (5, true, \"quoted\"), as a string otherwise:
                a handler sees 5 as 5, and the answer's previous and new
                value are printed
  secret NAME   set a secret to what stdin holds (at most 8 KiB, one
                trailing newline dropped): a secret is never taken from the
                command line, where ps and shell history would keep it
                  printf %s \"$KEY\" | mur control @1 secret API_KEY
  forget NAME   unset a secret or a setting

NAME is letters, digits, _, . and - (not starting with .), so a dotted name
such as inference.max_tokens goes through; which names exist is the door's
to say. Anything else (/, %, ?, # or a space) is refused before it is sent.

The calls carry the session's control token, read from its control file in
~/.murmur/running (mode 0600); a secret is sent only to a door on this machine
(the door refuses it from any other peer).

Exit status: 0 when done; 1 when the session is not running, declares no
control, or the door refused (its reason said: an undeclared NAME, a value too
long) or answered a listing of another shape (what it answered said); 2 on a
usage error (a secret's value on the command line included).
",
    main,
    spec: &SPEC,
};

/// `control`'s command line, the one table its parser and the shell completions read.
static SPEC: Spec = Spec::new(
    &[Opt::flag("json", None, "show: the door's listing as JSON")],
    &[
        Kind::Address,
        Kind::Words(&["show", "set", "secret", "forget"]),
        Kind::Text,
    ],
);

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
    let mut parser = Parser::new(&SPEC, args);
    while let Some(arg) = parser.next_arg()? {
        match arg {
            Arg::Flag("json") => as_json = true,
            Arg::Operand(value) => positional.push(cli::utf8(value)?),
            other => return Err(other.unexpected()),
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
    let door = |method: &str, path: &str, body: Option<(&str, &[u8])>| {
        let response = door_client::http(&entry.record.url, method, path, token, body, CONTROL)
            .map_err(|why| Failure::Failed(format!("{}: {why}", entry.record.session_id)))?;
        accepted(response)
    };
    let mut out = Out::default();
    match action {
        Action::Show { json } => {
            let listing = door("GET", "/control", None)?;
            let (settings, secrets) = entries(&listing)?;
            if json {
                out.line(&listing.to_string());
            } else {
                show(settings, secrets, &mut out);
            }
        }
        Action::Set { name, value } => {
            // As the original's client sends it: JSON when the text parses as JSON (`5`, `true`),
            // a string otherwise, so the door, not the shell, decides what a value may be.
            let value = serde_json::from_str::<Value>(&value).unwrap_or(Value::String(value));
            let body = json!({ "value": value }).to_string();
            let path = route("settings", &name)?;
            let answer = door("PUT", &path, Some(("application/json", body.as_bytes())))?;
            out.line(&format!(
                "set: {} = {} (was {})",
                printable(&name),
                shown(&answer["value"]),
                shown(&answer["previous"])
            ));
        }
        Action::Secret { name } => {
            let path = route("secrets", &name)?;
            let value = secret_from_stdin()?;
            let answer = door("PUT", &path, Some(("application/octet-stream", &value)))?;
            let how = if answer["replaced"] == true {
                "replaced"
            } else {
                "new"
            };
            out.line(&format!("set: {} (secret, {how})", printable(&name)));
        }
        Action::Forget { name } => {
            let listing = door("GET", "/control", None)?;
            let (settings, _) = entries(&listing)?;
            let kind = if settings.iter().any(|s| s["name"] == name.as_str()) {
                "settings"
            } else {
                "secrets"
            };
            door("DELETE", &route(kind, &name)?, None)?;
            out.line(&format!("forgot: {}", printable(&name)));
        }
    }
    Ok(0)
}

/// `/control/KIND/NAME`, for a NAME of the characters a path segment holds as they are (letters,
/// digits, `_`, `.`, `-`, as the original's dotted `inference.max_tokens`), so nothing typed can
/// reach another route; which names exist is the door's to say.
fn route(kind: &str, name: &str) -> Result<String, Failure> {
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if !plain {
        return Err(Failure::Usage(format!(
            "'{}' is not a setting or secret name (letters, digits, _, . and -; not starting with .)",
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

/// The settings and secrets of a listing, `{"session_id", "settings": [{"name", "value"}],
/// "secrets": [{"name", "set"}]}`: any other shape is the door's fault, said, never an empty
/// listing printed as if nothing were declared.
fn entries(listing: &Value) -> Result<(&[Value], &[Value]), Failure> {
    let named = |key: &str| {
        listing[key]
            .as_array()
            .filter(|list| list.iter().all(|e| e["name"].is_string()))
            .map(Vec::as_slice)
    };
    match (named("settings"), named("secrets")) {
        (Some(settings), Some(secrets)) => Ok((settings, secrets)),
        _ => {
            let got: String = listing.to_string().chars().take(200).collect();
            Err(Failure::Failed(format!(
                "the door's listing is not {{\"settings\": [{{\"name\", \"value\"}}], \"secrets\": [{{\"name\", \"set\"}}]}}: it answered {}",
                printable(&got)
            )))
        }
    }
}

/// The listing for a person: each setting with its value, each secret with whether it is set.
fn show(settings: &[Value], secrets: &[Value], out: &mut Out) {
    if settings.is_empty() && secrets.is_empty() {
        out.line("(the capsule declares no settings and no secrets)");
    }
    for setting in settings {
        let name = printable(setting["name"].as_str().unwrap_or(""));
        let value = match &setting["value"] {
            Value::Null => "not set".to_string(),
            value => format!("= {}", shown(value)),
        };
        out.line(&format!("setting  {name}  {value}"));
    }
    for secret in secrets {
        let name = printable(secret["name"].as_str().unwrap_or(""));
        let set = if secret["set"] == true {
            "set"
        } else {
            "not set"
        };
        out.line(&format!("secret  {name}  {set}"));
    }
}

/// A setting's value for a person: a string bare, anything else as JSON, none as `not set`.
fn shown(value: &Value) -> String {
    match value {
        Value::Null => "not set".into(),
        Value::String(text) => printable(text),
        other => printable(&other.to_string()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_of_another_shape_is_an_error_not_an_empty_listing() {
        for odd in [
            json!({}),
            json!(null),
            json!({"settings": {"MODE": {"value": "x"}}, "secrets": {}}),
            json!({"settings": [{"value": "x"}], "secrets": []}),
            json!({"settings": []}),
        ] {
            let Err(Failure::Failed(why)) = entries(&odd) else {
                panic!("{odd} was taken for a listing");
            };
            assert!(why.contains("listing is not"), "{why}");
        }
        let listing = json!({"session_id": "ses_x", "settings": [{"name": "A", "value": 5}],
                             "secrets": [{"name": "K", "set": false}]});
        let (settings, secrets) = entries(&listing).unwrap();
        assert_eq!((settings.len(), secrets.len()), (1, 1));
    }

    #[test]
    fn names_are_path_safe_and_dots_allowed() {
        assert_eq!(
            route("settings", "inference.max_tokens").unwrap(),
            "/control/settings/inference.max_tokens"
        );
        assert_eq!(
            route("secrets", "API-KEY_2").unwrap(),
            "/control/secrets/API-KEY_2"
        );
        for bad in ["", ".", "..", "a/b", "a%2f", "a?b", "a#b", "a b", "é"] {
            assert!(route("settings", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn values_print_strings_bare_and_the_rest_as_json() {
        assert_eq!(shown(&json!("fast")), "fast");
        assert_eq!(shown(&json!(5)), "5");
        assert_eq!(shown(&json!(true)), "true");
        assert_eq!(shown(&Value::Null), "not set");
        assert_eq!(shown(&json!("a\u{1b}[2J")), "a\u{fffd}[2J");
    }
}
