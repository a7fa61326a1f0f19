//! One file per applet: its usage text, its option parsing, its main.

mod detached;
pub mod formation;
pub mod logs;
pub mod ps;
pub mod run;
pub mod stop;
pub mod token;

use crate::cli::{self, Failure, Outcome};
use crate::running::{Depth, Sweep};

/// One applet: how it is named, what `--help` prints, and its main, which takes the arguments
/// after the applet name.
pub struct Applet {
    pub name: &'static str,
    pub summary: &'static str,
    pub usage: &'static str,
    pub main: fn(Vec<std::ffi::OsString>) -> Outcome,
}

/// Every applet, in the order `mur --list` prints them.
pub const APPLETS: &[Applet] = &[
    run::APPLET,
    ps::APPLET,
    stop::APPLET,
    token::APPLET,
    logs::APPLET,
    formation::APPLET,
];

/// The prologue `ps`, `stop`, `token` and `logs` share: the running directory (opened without following
/// a link, trusted only if the effective uid owns it, held at `0700` where it exists), swept as
/// deep as `depth` says, and what the sweep pruned or could not read (or did not trust) said on
/// stderr — the same way by each applet, so no applet prunes silently.
pub fn sweep(applet: &str, depth: Depth, verbose: bool) -> Result<Sweep, Failure> {
    let dir = crate::home::running_dir_if_present(Some(applet))
        .map_err(|err| Failure::Failed(err.into()))?;
    let Some(dir) = dir else {
        return Ok(Sweep::default());
    };
    let sweep = crate::running::sweep(&dir, depth).map_err(Failure::Failed)?;
    report(applet, &sweep, verbose);
    Ok(sweep)
}

/// Say on stderr what a sweep pruned (a count, or one line each with `verbose`) and which files
/// it could not read.
fn report(applet: &str, sweep: &Sweep, verbose: bool) {
    if verbose {
        for pruned in &sweep.pruned {
            cli::warn(
                applet,
                &format!("pruned {}: {}", pruned.path.display(), pruned.reason),
            );
        }
    } else if !sweep.pruned.is_empty() {
        let n = sweep.pruned.len();
        let plural = if n == 1 { "" } else { "s" };
        cli::warn(
            applet,
            &format!("pruned {n} stale record{plural} (-v names them)"),
        );
    }
    for file in &sweep.unreadable {
        cli::warn(
            applet,
            &format!("kept {}: {}", file.path.display(), file.reason),
        );
    }
}
