//! One file per applet: its usage text, its option parsing, its main.

pub mod cancel;
pub mod completions;
pub mod control;
mod detached;
pub mod formation;
pub mod logs;
pub mod prune;
pub mod ps;
pub mod rm;
pub mod run;
pub mod stop;
pub mod token;
pub mod watch;

use crate::address::{self, Named};
use crate::cli::spec::{Arg, Kind, Opt, Parser, Spec};
use crate::cli::{self, Failure, Outcome};
use crate::running::ended::{Bounds, Ended};
use crate::running::{Depth, Entry, InFlight, Sweep, Unreadable};

/// One applet: how it is named, what `--help` prints, and its main, which takes the arguments
/// after the applet name.
pub struct Applet {
    pub name: &'static str,
    pub summary: &'static str,
    pub usage: &'static str,
    pub main: fn(Vec<std::ffi::OsString>) -> Outcome,
    /// Its command line as data: what its parser accepts and the completions offer.
    pub spec: &'static Spec,
}

/// Every applet, in the order `mur --list` prints them.
pub const APPLETS: &[Applet] = &[
    run::APPLET,
    ps::APPLET,
    stop::APPLET,
    token::APPLET,
    logs::APPLET,
    rm::APPLET,
    prune::APPLET,
    cancel::APPLET,
    control::APPLET,
    watch::APPLET,
    formation::APPLET,
    completions::APPLET,
];

/// The one session `address` names among `running` — or, without an address, the only one
/// running — for the applets that act on one session (`token`, `cancel`, `control`). A
/// formation is not a session: its members are named instead.
pub fn one_session<'a>(address: Option<&str>, running: &'a [Entry]) -> Result<&'a Entry, Failure> {
    match address {
        Some(address) => match address::resolve(address, running).map_err(Failure::Failed)? {
            Named::Session(entry) => Ok(entry),
            Named::Formation(id, _) => Err(Failure::Failed(format!(
                "{id} is a formation; name one of its members (mur ps lists them)"
            ))),
        },
        None => match running {
            [only] => Ok(only),
            [] => Err(Failure::Failed("no capsule is running".into())),
            many => Err(Failure::Failed(format!(
                "{} sessions are running; name one (@1 is the newest; mur ps lists them)",
                many.len()
            ))),
        },
    }
}

/// The running sessions, swept to the process layer (what the one-session applets act on).
pub fn running(applet: &str) -> Result<Vec<Entry>, Failure> {
    let sweep = sweep(applet, Depth::Process, false)?;
    Ok(sweep.kept.into_iter().map(|k| k.entry).collect())
}

/// The prologue `ps`, `stop`, `token` and `logs` share: the running directory (opened without following
/// a link, trusted only if the effective uid owns it, held at `0700` where it exists), swept as
/// deep as `depth` says, and what the sweep pruned or could not read (or did not trust) said on
/// stderr — the same way by each applet, so no applet prunes silently.
pub fn sweep(applet: &str, depth: Depth, verbose: bool) -> Result<Sweep, Failure> {
    sweep_watched(applet, depth, verbose, &InFlight::default())
}

/// [`sweep`], with the door probes not yet answered in `in_flight` while it runs.
pub fn sweep_watched(
    applet: &str,
    depth: Depth,
    verbose: bool,
    in_flight: &InFlight,
) -> Result<Sweep, Failure> {
    let dir = crate::home::running_dir_if_present(Some(applet))
        .map_err(|err| Failure::Failed(err.into()))?;
    let Some(dir) = dir else {
        return Ok(Sweep::default());
    };
    let sweep = crate::running::sweep(&dir, depth, in_flight).map_err(Failure::Failed)?;
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
    report_unreadable(applet, &sweep.unreadable);
}

/// Say on stderr which files of a record directory were kept unread, and why.
fn report_unreadable(applet: &str, files: &[Unreadable]) {
    for file in files {
        cli::warn(
            applet,
            &format!("kept {}: {}", file.path.display(), file.reason),
        );
    }
}

/// The ended sessions of this home, most recently ended first (`ps -a`, `logs`, `rm`,
/// `prune`), with what could not be read, and a bound set wrong in the environment, said on
/// stderr as the running records' are.
pub fn ended(applet: &str) -> Result<Vec<Ended>, Failure> {
    if let Err(why) = Bounds::from_env() {
        cli::warn(applet, &why);
    }
    let scan = crate::running::ended::list().map_err(Failure::Failed)?;
    report_unreadable(applet, &scan.unreadable);
    Ok(scan.entries)
}

/// The arguments of an applet that reaches one door (`cancel`, `watch`): its positional words,
/// `--url HOST:PORT`, and `--json`.
pub struct DoorArgs {
    pub positional: Vec<String>,
    pub url: Option<String>,
    pub json: bool,
}

/// `s` with each control character replaced, so a door's or a capsule's words shown on a
/// terminal cannot drive it.
pub fn printable(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect()
}

/// The options of an applet that reaches one door, [`DoorArgs`].
pub const DOOR_OPTIONS: &[Opt] = &[
    Opt::value(
        "url",
        None,
        "HOST:PORT",
        Kind::Text,
        "ask this door, without a token",
    ),
    Opt::flag("json", None, "the door's answer as JSON"),
];

/// Parse [`DoorArgs`] by `spec` (whose options are [`DOOR_OPTIONS`]); anything else is a usage
/// error naming it.
pub fn door_args(spec: &'static Spec, args: Vec<std::ffi::OsString>) -> Result<DoorArgs, Failure> {
    let mut parsed = DoorArgs {
        positional: vec![],
        url: None,
        json: false,
    };
    let mut parser = Parser::new(spec, args);
    while let Some(arg) = parser.next_arg()? {
        match arg {
            Arg::Opt("url", url) => parsed.url = Some(cli::utf8(url)?),
            Arg::Flag("json") => parsed.json = true,
            Arg::Operand(value) => parsed.positional.push(cli::utf8(value)?),
            other => return Err(other.unexpected()),
        }
    }
    Ok(parsed)
}
