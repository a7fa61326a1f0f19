//! `mur rm`: remove ended sessions — what is kept of each and its log — as `docker rm` removes
//! stopped containers. A running session is never touched: `mur stop` ends it first.

use super::Applet;
use crate::address::{self, Named};
use crate::cli::spec::{Arg, Kind, Parser, Spec};
use crate::cli::{self, Failure, Out, Outcome};
use crate::running::ended::{self, Ended};

pub const APPLET: Applet = Applet {
    name: "rm",
    summary: "remove ended sessions and their logs",
    usage: "\
Usage: mur rm ADDR...

Remove ended sessions this home keeps (mur ps -a lists them): each one's
record and its log. ADDR is as 'mur stop --help' says, looked for among the
ended sessions: a --name (the session of that name that ended last), an id or
a prefix or suffix of one, FORMATION/MEMBER, a member or capsule NAME that one
ended session has, or a formation (all its ended members). An address a
running session answers to is refused, naming it: end it first (mur stop).
'mur prune' removes every ended session.

Prints one line per session removed:
  removed: ses_0199...  echo@0.1.0  2048 bytes of log

Exit status: 0 when everything named was removed; 1 when an address named a
running session or no ended one, or a record could not be removed; 2 on a
usage error.
",
    main,
    spec: &SPEC,
};

/// `rm`'s command line, the one table its parser and the shell completions read.
static SPEC: Spec = Spec {
    options: &[],
    operands: &[Kind::Address],
    repeats: true,
    subcommands: &[],
};

fn main(args: Vec<std::ffi::OsString>) -> Outcome {
    let mut addresses = vec![];
    let mut parser = Parser::new(&SPEC, args);
    while let Some(arg) = parser.next_arg()? {
        match arg {
            Arg::Operand(value) => {
                let value = cli::utf8(value)?;
                address::at_n(&value).map_err(Failure::Usage)?;
                addresses.push(value);
            }
            other => return Err(other.unexpected()),
        }
    }
    if addresses.is_empty() {
        return Err(Failure::Usage(
            "name the ended sessions to remove (ADDR..., as 'mur ps -a' lists them); \
             'mur prune' removes them all"
                .into(),
        ));
    }
    let running = super::running("rm")?;
    let kept = super::ended("rm")?;
    let mut out = Out::default();
    let mut failed = false;
    let mut removed = vec![];
    for address in &addresses {
        match address::lookup(address, &running) {
            Ok(None) => {}
            Ok(Some(named)) => {
                let what = match named {
                    Named::Session(e) => format!("session {}", e.record.session_id),
                    Named::Formation(id, _) => format!("formation {id}"),
                };
                cli::warn(
                    "rm",
                    &format!(
                        "'{address}' names the running {what}: end it first (mur stop {address})"
                    ),
                );
                failed = true;
                continue;
            }
            Err(why) => {
                cli::warn("rm", &why);
                failed = true;
                continue;
            }
        }
        let named = match address::resolve(address, &kept) {
            Ok(Named::Session(e)) => vec![e],
            Ok(Named::Formation(_, members)) => members,
            Err(why) => {
                cli::warn("rm", &why);
                failed = true;
                continue;
            }
        };
        for e in named {
            let id = &e.record.session_id;
            if !removed.contains(id) {
                failed |= !remove(e, &mut out);
                removed.push(id.clone());
            }
        }
    }
    Ok(i32::from(failed))
}

/// Remove one ended session and say so; `false` (said on stderr) when its record stays.
fn remove(e: &Ended, out: &mut Out) -> bool {
    match ended::remove(e) {
        Ok(bytes) => {
            out.line(&format!(
                "removed: {}  {}  {bytes} bytes of log",
                e.record.session_id,
                super::printable(&e.record.capsule())
            ));
            true
        }
        Err(err) => {
            cli::warn("rm", &format!("cannot remove {}: {err}", e.path.display()));
            false
        }
    }
}
