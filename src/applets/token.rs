//! `mur token`: print one door token of a running session, for scripts. The one place DESIGN.md
//! lets a token reach stdout.

use super::Applet;
use crate::address::{self, Named};
use crate::cli::spec::{Arg, Kind, Opt, Parser, Spec};
use crate::cli::{self, Failure, Out, Outcome};
use crate::running::{Depth, Entry};
use crate::secret::Secret;
use crate::sys::fs;

pub const APPLET: Applet = Applet {
    name: "token",
    summary: "print a door token of a running session",
    usage: "\
Usage: mur token [ADDR] [CREDENTIAL] [--control]

Print exactly one token of a running session and a newline, so that
  T=$(mur token @1) && curl -H \"Authorization: Bearer $T\" ...
works. ADDR is @N, a full ses_ id, a capsule NAME or NAME@VERSION, or a suffix
of at least 4 characters (see 'mur stop --help'); without it, the only running
session (an error if there are none or several).

  (default)    the operator token: every method at the session's door
  CREDENTIAL   the token of a credential the capsule's manifest declares
  --control    the control token (for /control), for a capsule declaring control

The token is a secret: anyone holding it can drive the capsule. It is read
from the session's record in ~/.murmur/running (mode 0600).

Exit status: 0 with the token printed; 1 when the session is not running, its
door is public (no token), the credential is unknown (the known ones are
listed) or it declares no control; 2 on a usage error.
",
    main,
    spec: &SPEC,
};

/// `token`'s command line, the one table its parser and the shell completions read.
static SPEC: Spec = Spec::new(
    &[Opt::flag("control", None, "the control token")],
    &[Kind::Address, Kind::Text],
);

/// The largest control token file read; a real one is under 200 bytes.
const MAX_CONTROL_BYTES: u64 = 4096;

fn main(args: Vec<std::ffi::OsString>) -> Outcome {
    let mut positional = vec![];
    let mut control = false;
    let mut parser = Parser::new(&SPEC, args);
    while let Some(arg) = parser.next_arg()? {
        match arg {
            Arg::Flag("control") => control = true,
            Arg::Operand(value) => positional.push(cli::utf8(value)?),
            other => return Err(other.unexpected()),
        }
    }
    let (address, credential) = match positional.as_slice() {
        [] => (None, None),
        [a] => (Some(a.as_str()), None),
        [a, c] => (Some(a.as_str()), Some(c.as_str())),
        _ => return Err(Failure::Usage("at most ADDR and CREDENTIAL".into())),
    };
    if control && credential.is_some() {
        return Err(Failure::Usage("--control takes no CREDENTIAL".into()));
    }
    if let Some(address) = address {
        address::at_n(address).map_err(Failure::Usage)?;
    }

    let sweep = super::sweep("token", Depth::Process, false)?;
    let running: Vec<Entry> = sweep.kept.into_iter().map(|k| k.entry).collect();
    let entry = match address {
        Some(address) => match address::resolve(address, &running)
            .map_err(|why| Failure::Failed(why + &credential_hint(address, &running)))?
        {
            Named::Session(entry) => entry,
            Named::Formation(id, _) => {
                return Err(Failure::Failed(format!(
                    "{id} is a formation; its members have tokens of their own (name one: mur ps lists them)"
                )));
            }
        },
        None => match running.as_slice() {
            [only] => only,
            [] => return Err(Failure::Failed("no capsule is running".into())),
            many => {
                return Err(Failure::Failed(format!(
                    "{} sessions are running; name one (@1 is the newest; mur ps lists them)",
                    many.len()
                )));
            }
        },
    };

    let token = if control {
        control_token(entry)?
    } else {
        door_token(entry, credential)?
    };
    let mut out = Out::default();
    out.line(token.expose());
    Ok(0)
}

/// When a lone word names no session but a credential of the one session running (`mur token
/// client`), how to ask for that credential: `mur token @1 client`. Nothing otherwise.
fn credential_hint(word: &str, running: &[Entry]) -> String {
    match running {
        [only] if only.record.credentials.contains_key(word) => format!(
            "; '{}' is a credential of the one running session ({}): mur token @1 {}",
            word.escape_debug(),
            only.record.capsule(),
            word.escape_debug()
        ),
        _ => String::new(),
    }
}

fn door_token(entry: &Entry, credential: Option<&str>) -> Result<Secret, Failure> {
    let record = &entry.record;
    let Some(operator) = &record.door_token else {
        return Err(Failure::Failed(format!(
            "{} ({}) has a public door: it takes no token",
            record.session_id,
            record.capsule()
        )));
    };
    let Some(name) = credential else {
        return Ok(operator.clone());
    };
    record.credentials.get(name).cloned().ok_or_else(|| {
        let known: Vec<&str> = record.credentials.keys().map(String::as_str).collect();
        Failure::Failed(if known.is_empty() {
            format!(
                "{} declares no credentials; only its operator token exists (mur token without CREDENTIAL)",
                record.session_id
            )
        } else {
            format!(
                "{} has no credential '{}'; it has: {}",
                record.session_id,
                name.escape_debug(),
                known.join(", ")
            )
        })
    })
}

/// The control token `<session>.control` holds; a session without that file declares no control.
pub(super) fn control_token(entry: &Entry) -> Result<Secret, Failure> {
    let path = entry.control_path();
    let no_control = || {
        Failure::Failed(format!(
            "{} ({}) declares no control: it has no control token",
            entry.record.session_id,
            entry.record.capsule()
        ))
    };
    let bytes = entry
        .read_control(MAX_CONTROL_BYTES)
        .map_err(|refusal| match refusal {
            fs::ReadRefusal::Vanished => no_control(),
            fs::ReadRefusal::Invalid(why) | fs::ReadRefusal::Io(why) => {
                Failure::Failed(format!("{}: {why}", path.display()))
            }
        })?;
    let text = String::from_utf8(bytes)
        .ok()
        .map(|t| t.trim_end().to_string())
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or_else(|| Failure::Failed(format!("{}: not a control token", path.display())))?;
    Ok(Secret::new(text))
}
