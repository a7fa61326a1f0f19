//! `mur prune`: remove every ended session this home keeps, and say how much went.

use super::Applet;
use crate::cli::spec::{Parser, Spec};
use crate::cli::{self, Out, Outcome};
use crate::running::ended;

pub const APPLET: Applet = Applet {
    name: "prune",
    summary: "remove every ended session and its log",
    usage: "\
Usage: mur prune

Remove every ended session this home keeps (mur ps -a lists them): each one's
record and its log; running sessions are untouched. Then say how many went
and how many bytes of log with them:
  removed 3 ended sessions and 48213 bytes of log

Ended sessions are kept bounded without it: the last 100 (MURMUR_KEEP_ENDED),
or fewer when their logs pass 64 MiB (MURMUR_KEEP_ENDED_MIB); 0 keeps none.

Exit status: 0; 1 when a record could not be removed (said); 2 on a usage
error.
",
    main,
    spec: &SPEC,
};

/// `prune` takes nothing: the one table its parser and the shell completions read.
static SPEC: Spec = Spec::new(&[], &[]);

fn main(args: Vec<std::ffi::OsString>) -> Outcome {
    let mut parser = Parser::new(&SPEC, args);
    if let Some(arg) = parser.next_arg()? {
        return Err(arg.unexpected());
    }
    let kept = super::ended("prune")?;
    let (mut sessions, mut bytes, mut failed) = (0usize, 0u64, false);
    for e in &kept {
        match ended::remove(e) {
            Ok(log) => (sessions, bytes) = (sessions + 1, bytes + log),
            Err(err) => {
                cli::warn(
                    "prune",
                    &format!("cannot remove {}: {err}", e.path.display()),
                );
                failed = true;
            }
        }
    }
    let plural = if sessions == 1 { "" } else { "s" };
    Out::default().line(&format!(
        "removed {sessions} ended session{plural} and {bytes} bytes of log"
    ));
    Ok(i32::from(failed))
}
