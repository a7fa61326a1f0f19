//! `mur formation`: launch a roster of capsules as one all-or-nothing unit, and `mur formation
//! call`, which a member's handler uses to ask a peer.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;

use super::Applet;
use crate::cli::{self, Failure, Outcome};
use crate::formation::launch::{self, Options};

pub const APPLET: Applet = Applet {
    name: "formation",
    summary: "launch a roster of capsules that may call each other, as one unit",
    usage: "\
Usage: mur formation [ROSTER] [--task TEXT|-] [--json] [--ready-timeout SECS]
       mur formation call PEER [TEXT|-]

Launch every member of ROSTER (default ./roster.json) as a 'mur run' session:
the peers all at once, each in its own process group, then -- once every peer's
door answers as its session -- the entry member, which takes the formation's
tasks. All or nothing: if any peer fails to come up, every started member is
stopped and the refusal names each failed member and why.

Every member holds a lifeline (a pipe only the launcher can close), so however
the launcher ends -- its entry member finishing, ^C, mur stop, SIGKILL -- no
member outlives it. On the way out it says on stderr which members were still
running: 'stopped: reviewer (pid 4242), ...' or 'stopped: none' -- except after
a --task that completed (exit 0), which prints nothing on stderr.

roster.json:
  {\"members\": [{\"name\": \"lead\", \"capsule\": \"lead/\", \"entry\": true},
               {\"name\": \"reviewer\", \"capsule\": \"reviewer/murmur.json\"}],
   \"reachability\": [{\"from\": \"lead\", \"to\": [\"reviewer\"]}]}   (or \"all\")
Member names: a lowercase letter, then up to 31 of a-z, 0-9, -. A callee must
accept peer tasks (exports.peer_tasks.accept); if anyone calls anyone, every
member's door must authenticate (network.authentication).

Options:
  --task TEXT          give the entry member this one task, print the
                       formation's answer on stdout, and exit with its outcome;
                       '-' reads the task from stdin (one trailing
                       newline dropped)
  --json               print one line once the formation is ready:
                       {\"formation_id\",\"members\":[{\"name\",\"entry\",\"session_id\",\"url\",\"pid\"}]}
  --ready-timeout SECS how long each member has to come up (default 180;
                       1 to 31622400, a year)
  -h, --help           this text

mur formation call PEER [TEXT|-]
  From inside a member's handler: ask PEER (a member the roster lets this one
  call) to run TEXT as a task and print its answer as the peer writes it
  (each piece at once, so a pipe sees progress). The handler never sees a
  token or an address: its own session makes the call. Exit 0 when the
  peer's task completed, 1 otherwise.

Exit status: the entry member's code (with --task: 0 completed, 1 not);
128+N if it died of signal N; 130, 143, 129 when the launcher got SIGINT,
SIGTERM, SIGHUP; 1 when the roster was refused or a member failed to come up;
2 on a usage error.
",
    main,
};

fn main(args: Vec<std::ffi::OsString>) -> Outcome {
    if args.first().is_some_and(|a| a == "call") {
        return call(args.into_iter().skip(1).collect());
    }
    let mut roster: Option<PathBuf> = None;
    let mut options = Options {
        roster: PathBuf::from("roster.json"),
        task: None,
        json: false,
        ready_timeout: launch::MEMBER_READY_TIMEOUT,
    };
    let mut parser = lexopt::Parser::from_args(args);
    while let Some(arg) = parser.next()? {
        match arg {
            lexopt::Arg::Long("task") => {
                // One --task per run; keeping the last would drop the others silently.
                if options.task.is_some() {
                    return Err(Failure::Usage("--task given twice".into()));
                }
                options.task = Some(cli::utf8(parser.value()?)?);
            }
            lexopt::Arg::Long("json") => options.json = true,
            lexopt::Arg::Long("ready-timeout") => {
                options.ready_timeout = cli::seconds("--ready-timeout", parser.value()?, 1)?;
            }
            lexopt::Arg::Value(path) if roster.is_none() => roster = Some(path.into()),
            other => return Err(other.unexpected().into()),
        }
    }
    if let Some(path) = roster {
        options.roster = if path.is_dir() {
            path.join("roster.json")
        } else {
            path
        };
    }
    if options.task.as_deref() == Some("-") {
        options.task = Some(cli::task_from_stdin()?);
    }
    launch::launch(&options).map_err(Failure::Failed)
}

/// `mur formation call PEER [TEXT|-]`: one call through the handler's call socket.
fn call(args: Vec<std::ffi::OsString>) -> Outcome {
    let mut positional = vec![];
    let mut parser = lexopt::Parser::from_args(args);
    while let Some(arg) = parser.next()? {
        match arg {
            lexopt::Arg::Value(value) => positional.push(cli::utf8(value)?),
            other => return Err(other.unexpected().into()),
        }
    }
    let (peer, text) = match positional.as_slice() {
        [peer] => (peer.clone(), cli::task_from_stdin()?),
        [peer, dash] if dash == "-" => (peer.clone(), cli::task_from_stdin()?),
        [peer, text] => (peer.clone(), text.clone()),
        _ => {
            return Err(Failure::Usage(
                "call wants PEER and optionally TEXT (or - for stdin)".into(),
            ));
        }
    };
    let env = crate::json::contract::env::CALL_FD;
    let fd = std::env::var(env)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
        .ok_or_else(|| {
            Failure::Failed(match std::env::var(crate::json::contract::env::FORMATION_ID) {
                Ok(formation) => format!(
                    "this member of {formation} may call no one: the roster grants it no calls"
                ),
                Err(_) => format!(
                    "{env} is not set: 'mur formation call' works only inside a formation member's handler"
                ),
            })
        })?;
    let socket = crate::sys::pipe::take_inherited(fd)
        .map_err(|why| Failure::Failed(format!("{env}: {why}")))?;
    let mut request = serde_json::json!({"peer": peer, "text": text})
        .to_string()
        .into_bytes();
    request.push(b'\n');
    let mut writer = socket
        .try_clone()
        .map_err(|err| Failure::Failed(format!("{env}: {err}")))?;
    writer
        .write_all(&request)
        .map_err(|err| Failure::Failed(format!("the session did not take the call: {err}")))?;
    relay_answer(BufReader::new(socket))
}

/// Print a call's answer as the session relays it: each `{"chunk"}` line's text at once (the
/// peer's answer as its handler writes it), then the closing `{"ok","answer"}` — whose answer is
/// printed only when nothing streamed before it — or `{"ok":false,"error"}`.
fn relay_answer(mut lines: impl BufRead) -> Outcome {
    let mut out = std::io::stdout().lock();
    // Whether the last text printed left a line open.
    let mut streamed: Option<bool> = None;
    loop {
        let mut line = String::new();
        match lines.read_line(&mut line) {
            Ok(0) => {
                return Err(Failure::Failed(
                    "the session closed the call unanswered".into(),
                ));
            }
            Ok(_) => {}
            Err(err) => {
                return Err(Failure::Failed(format!(
                    "no answer from the session: {err}"
                )));
            }
        }
        let said = crate::json::strict::from_slice(line.as_bytes())
            .map_err(|_| Failure::Failed("the session's answer is not JSON".into()))?;
        if let Some(chunk) = said.get("chunk").and_then(serde_json::Value::as_str) {
            if !chunk.is_empty() {
                streamed = Some(!chunk.ends_with('\n'));
                let _ = out.write_all(chunk.as_bytes()).and_then(|()| out.flush());
            }
            continue;
        }
        return if said["ok"] == true {
            match streamed {
                Some(true) => drop(writeln!(out)),
                Some(false) => {}
                None => drop(writeln!(out, "{}", said["answer"].as_str().unwrap_or(""))),
            }
            let _ = out.flush();
            Ok(0)
        } else {
            let error = said["error"].as_str().unwrap_or("the call failed");
            Err(Failure::Failed(error.to_string()))
        };
    }
}
