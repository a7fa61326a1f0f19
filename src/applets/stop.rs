//! `mur stop`: end a session or a whole formation, never signalling a process it cannot verify
//! is the one the record names.

use std::time::{Duration, Instant};

use serde_json::json;

use super::Applet;
use crate::a2a::rpc::{SESSION_STOP, STOP_SESSION};
use crate::address::{self, Named};
use crate::cli::spec::{Arg, Kind, Opt, Parser, Spec};
use crate::cli::{self, Failure, Out, Outcome};
use crate::door_client;
use crate::json::ended::End;
use crate::json::record::{ProcessIdentity, RunningRecord};
use crate::net::client::Deadlines;
use crate::process::{self, Ended, NotSignallable, Stoppable, Target};
use crate::running::{self, Depth, Entry};

pub const APPLET: Applet = Applet {
    name: "stop",
    summary: "stop running sessions or formations",
    usage: "\
Usage: mur stop ADDR... [-t|--timeout DURATION]
       mur stop --all [-t|--timeout DURATION]

Stop sessions or formations. ADDR is @N (the N-th row of 'mur ps', @1 newest),
a full ses_/frm_ id, a capsule NAME or NAME@VERSION that exactly one running
session has (several: an error listing them, nothing stopped), or a
case-insensitive suffix of at least 4 characters that matches exactly one
session or formation.

A session is first asked to stop at its door (session/stop, with its operator
token; a door of the original runtime, which speaks only A2A 1.0, is asked
murmur.StopSession with A2A-Version: 1.0, which cancels its tasks but leaves
the process running, so SIGTERM follows at once); if it has not gone within
2 s (at most half the timeout) it gets SIGTERM, and SIGKILL once the timeout
has passed. Every signal goes to the
recorded process only: its start time is checked first (through a pidfd where
the kernel has one), so a pid that now belongs to another process is never
signalled. Whatever a record says, mur signals only your own processes, and
never pid 1, a kernel thread, a thread id, itself or its ancestors. Asking is
not signalling: such a session is still asked at its door, so a session that
is pid 1 of its container stops that way; if it does not go within the
timeout, its record is kept and the reason said (exit 1). A record is removed
once its process is gone.

A formation is stopped through its launcher: SIGTERM (SIGKILL after the
timeout), which closes every member's lifeline; members still running after
that are stopped as sessions.

Prints one line per thing stopped and how, e.g.
  stopped: ses_0199...  echo@0.1.0  session/stop

Options:
  -t, --timeout DURATION
                  grace before SIGKILL (default 10s; 0 = SIGKILL at once;
                  at most a year): seconds, or 500ms, 10s, 2m, 1h
  --all           stop every running session and formation
  -h, --help      this text

Exit status: 0 when everything named was stopped; 1 when an address matched
nothing, or something could not be stopped (its record is kept: a live pid
whose start time cannot be read, a process mur may not signal, or a record
this user does not own); 2 on a usage error (no ADDR and no --all, both, or an
@N that can name nothing, such as @0).
",
    main,
    spec: &SPEC,
};

/// `stop`'s command line, the one table its parser and the shell completions read.
static SPEC: Spec = Spec {
    options: &[
        Opt::value(
            "timeout",
            Some('t'),
            "DURATION",
            Kind::Text,
            "grace before SIGKILL",
        ),
        Opt::flag("all", None, "stop every session and formation"),
    ],
    operands: &[Kind::Address],
    repeats: true,
    subcommands: &[],
};

/// How long a session asked at its door has before it is sent SIGTERM.
const DOOR_GRACE: Duration = Duration::from_secs(2);
/// How often a session that cannot be pinned (pid 1 of its container) is looked for after its
/// door was asked.
const GONE_POLL: Duration = Duration::from_millis(10);

fn main(args: Vec<std::ffi::OsString>) -> Outcome {
    let asked = parse(args)?;
    let sweep = super::sweep("stop", Depth::Process, false)?;
    let running: Vec<Entry> = sweep.kept.into_iter().map(|k| k.entry).collect();
    let (named, mut failed) = match &asked.addresses {
        None => (everything(&running), false),
        Some(addresses) => resolve_all(addresses, &running),
    };
    // The same thing named twice is stopped once, however far apart (`mur stop X Y X`).
    let named = first_of_each(named, key);

    let mut out = Out::default();
    for thing in named {
        let ok = match thing {
            Named::Session(entry) => stop_session(entry, asked.timeout, &mut out),
            Named::Formation(id, members) => {
                stop_formation(&id.to_string(), &members, asked.timeout, &mut out)
            }
        };
        failed |= !ok;
    }
    Ok(i32::from(failed))
}

/// What the command line asks: the addresses (`None`: `--all`) and the grace before SIGKILL.
struct Asked {
    addresses: Option<Vec<String>>,
    timeout: Duration,
}

fn parse(args: Vec<std::ffi::OsString>) -> Result<Asked, Failure> {
    let mut addresses = vec![];
    let mut timeout = Duration::from_secs(10);
    let mut all = false;
    let mut parser = Parser::new(&SPEC, args);
    while let Some(arg) = parser.next_arg()? {
        match arg {
            Arg::Opt("timeout", value) => {
                timeout = cli::duration("--timeout", value, Duration::ZERO)?;
            }
            Arg::Flag("all") => all = true,
            Arg::Operand(value) => {
                let value = cli::utf8(value)?;
                address::at_n(&value).map_err(Failure::Usage)?;
                addresses.push(value);
            }
            other => return Err(other.unexpected()),
        }
    }
    match (all, addresses.is_empty()) {
        (false, true) => Err(Failure::Usage(
            "name what to stop (ADDR..., as 'mur ps' lists them), or give --all".into(),
        )),
        (true, false) => Err(Failure::Usage(
            "name what to stop (ADDR...) or give --all, not both".into(),
        )),
        (true, true) => Ok(Asked {
            addresses: None,
            timeout,
        }),
        (false, false) => Ok(Asked {
            addresses: Some(addresses),
            timeout,
        }),
    }
}

/// What each address names, in order; `true` when one named nothing (said on stderr).
fn resolve_all<'a>(addresses: &[String], running: &'a [Entry]) -> (Vec<Named<'a>>, bool) {
    let mut named = vec![];
    let mut failed = false;
    for address in addresses {
        match address::resolve(address, running) {
            Ok(thing) => named.push(thing),
            Err(why) => {
                cli::warn("stop", &why);
                failed = true;
            }
        }
    }
    (named, failed)
}

/// `items` in their order with every later one whose key was already seen dropped: a name given
/// twice is acted on once, where it first appears (`dedup` drops adjacent repeats only).
fn first_of_each<T, K: PartialEq>(items: Vec<T>, key: impl Fn(&T) -> K) -> Vec<T> {
    let mut seen = Vec::with_capacity(items.len());
    let mut kept = Vec::with_capacity(items.len());
    for item in items {
        let k = key(&item);
        if !seen.contains(&k) {
            seen.push(k);
            kept.push(item);
        }
    }
    kept
}

fn key(thing: &Named<'_>) -> String {
    match thing {
        Named::Session(e) => e.record.session_id.to_string(),
        Named::Formation(f, _) => f.to_string(),
    }
}

/// Every formation, then every session in none.
fn everything(running: &[Entry]) -> Vec<Named<'_>> {
    let mut named = vec![];
    let mut seen = std::collections::BTreeSet::new();
    for entry in running {
        match &entry.record.formation_id {
            Some(f) if seen.insert(f.clone()) => {
                if let Ok(thing) = address::resolve(f.as_str(), running) {
                    named.push(thing);
                }
            }
            Some(_) => {}
            None => named.push(Named::Session(entry)),
        }
    }
    named
}

/// Stop one session; `true` when it is gone. Prints the outcome.
fn stop_session(entry: &Entry, timeout: Duration, out: &mut Out) -> bool {
    let record = &entry.record;
    let label = format!("{}  {}", record.session_id, record.capsule());
    let deadline = Instant::now() + timeout;
    let target = Target::open(record.pid, &record.process_start);
    if let Err(NotSignallable::Gone(_)) = target {
        forget(entry, End::Gone);
        out.line(&format!("stopped: {label}  already gone"));
        return true;
    }
    // Asking is not signalling: the door is asked whatever the pid, so a session mur may not
    // signal (pid 1 of its container) still stops this way.
    let asked = ask_door(record, timeout);
    let target = match target {
        Ok(target) => target,
        Err(NotSignallable::Refused(why) | NotSignallable::Gone(why)) => {
            return asked_only(entry, &label, &why, asked, deadline, out);
        }
    };
    let until = asked.map(|(until, _)| until);
    match process::stop(&target, until, !timeout.is_zero(), deadline) {
        Ok(ended) => {
            // SIGKILLed, it could say nothing of its end: kept as killed.
            forget(
                entry,
                if ended == Ended::Kill {
                    End::Killed
                } else {
                    End::Gone
                },
            );
            let how = match (ended, asked) {
                (Ended::Asked, Some((_, method))) => method,
                _ => ended.name(),
            };
            out.line(&format!("stopped: {label}  {how}"));
            true
        }
        Err(why) => {
            let pid = target.pid();
            cli::warn("stop", &format!("{label}: pid {pid}: {why}; record kept"));
            false
        }
    }
}

/// Ask the session at its door to stop (`session/stop`, or the original runtime's
/// `murmur.StopSession`, with its operator token): until when it has to go, and the method
/// that took; `None` when the door did not accept or there is no time (`--timeout 0`). The
/// door and its grace get at most half the timeout, so SIGTERM always has the other half.
fn ask_door(record: &RunningRecord, timeout: Duration) -> Option<(Instant, &'static str)> {
    if timeout.is_zero() {
        return None;
    }
    let door_budget = DOOR_GRACE.min(timeout / 2);
    let ask = Deadlines {
        connect: door_budget,
        response: door_budget,
    };
    let asked_at = Instant::now();
    door_client::call_either(
        &record.url,
        record.door_token.as_ref(),
        [SESSION_STOP, STOP_SESSION],
        json!({}),
        ask,
    )
    .ok()
    .map(|(method, _)| {
        // The original runtime's method cancels the session's tasks and leaves the process to
        // the signal that follows, so there is nothing to wait for.
        let grace = if method == STOP_SESSION {
            Duration::ZERO
        } else {
            door_budget
        };
        (asked_at + grace, method)
    })
}

/// A session mur may not signal (`refused` says why): stopped only if its door took the
/// request and it went within the timeout (its pid no longer held by the recorded process).
fn asked_only(
    entry: &Entry,
    label: &str,
    refused: &str,
    asked: Option<(Instant, &'static str)>,
    deadline: Instant,
    out: &mut Out,
) -> bool {
    let record = &entry.record;
    let Some((until, method)) = asked else {
        cli::warn(
            "stop",
            &format!(
                "{label}: refused: {refused}, and its door did not take session/stop; record kept"
            ),
        );
        return false;
    };
    let give_up = deadline.max(until);
    loop {
        // Gone, or its record removed by the session itself: its last act before it exits
        // (as pid 1 of a container, it waits for this `mur stop` to have seen that).
        if !entry.still_recorded()
            || matches!(
                process::check(record.pid, &record.process_start),
                Err(NotSignallable::Gone(_))
            )
        {
            forget(entry, End::Gone);
            out.line(&format!("stopped: {label}  {method}"));
            return true;
        }
        if Instant::now() >= give_up {
            cli::warn(
                "stop",
                &format!(
                    "{label}: asked at its door ({method}) and still running; not signalled: {refused}; record kept"
                ),
            );
            return false;
        }
        std::thread::sleep(GONE_POLL);
    }
}

/// Remove the record of a process that is gone (kept as ended `end`, unless it kept its own
/// word); a record that cannot be removed is said, and the next `mur ps` will try again.
fn forget(entry: &Entry, end: End) {
    if let Err(err) = running::prune(entry, end) {
        cli::warn(
            "stop",
            &format!("cannot remove {}: {err}", entry.path.display()),
        );
    }
}

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// Stop a formation through its launcher, then any member still running; `true` when all are
/// gone.
fn stop_formation(id: &str, members: &[&Entry], timeout: Duration, out: &mut Out) -> bool {
    let mut ok = true;
    let launchers: Vec<&ProcessIdentity> = members
        .iter()
        .filter_map(|m| m.record.formation_launcher.as_ref())
        .collect();
    for launcher in first_of_each(launchers, |&l| l) {
        ok &= stop_launcher(id, launcher, timeout, out);
    }
    // Members holding a lifeline end on their own once the launcher is gone; give them the
    // timeout to do it before stopping them as sessions.
    let deadline = Instant::now() + timeout;
    for member in members {
        let record = &member.record;
        if record.formation_lifeline {
            if let Ok(target) = Target::open(record.pid, &record.process_start)
                && !target.wait_gone(remaining(deadline))
            {
                ok &= stop_session(member, timeout, out);
                continue;
            }
            forget(member, End::Gone);
            out.line(&format!(
                "stopped: {}  {}  with its formation",
                record.session_id,
                record.capsule()
            ));
        } else {
            ok &= stop_session(member, timeout, out);
        }
    }
    ok
}

fn stop_launcher(id: &str, launcher: &ProcessIdentity, timeout: Duration, out: &mut Out) -> bool {
    let label = format!("{id}  launcher pid {}", launcher.pid);
    let target = match Target::open(launcher.pid, &launcher.process_start) {
        Ok(target) => target,
        Err(NotSignallable::Gone(_)) => return true,
        Err(NotSignallable::Refused(why)) => {
            cli::warn("stop", &format!("{label}: refused: {why}"));
            return false;
        }
    };
    let deadline = Instant::now() + timeout;
    match process::stop(&target, None, !timeout.is_zero(), deadline) {
        Ok(ended) => {
            out.line(&format!("stopped: {label}  {}", ended.name()));
            true
        }
        Err(why) => {
            cli::warn("stop", &format!("{label}: {why}"));
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::first_of_each;

    #[test]
    fn a_name_given_twice_counts_once_where_it_first_appears() {
        let named = vec!["x", "y", "x", "z", "y", "x"];
        assert_eq!(first_of_each(named, |s| s.to_string()), ["x", "y", "z"]);
        assert_eq!(
            first_of_each(Vec::<&str>::new(), |&s| s),
            Vec::<&str>::new()
        );
        assert_eq!(first_of_each(vec![1, 1, 1], |&n| n), [1]);
    }
}
