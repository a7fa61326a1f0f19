//! `mur formation`: launch a roster of capsules as one all-or-nothing unit, and `mur formation
//! call`, which a member's handler uses to ask a peer.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::PathBuf;

use super::Applet;
use crate::cli::spec::{Arg, Kind, Opt, Parser, Spec};
use crate::cli::{self, Failure, Outcome};
use crate::formation::launch::{self, Options};

pub const APPLET: Applet = Applet {
    name: "formation",
    summary: "launch a roster of capsules that may call each other, as one unit",
    usage: "\
Usage: mur formation [ROSTER] [--task TEXT|- | -d] [--json] [--ready-timeout DURATION]
       mur formation ROSTER --emit kubernetes --image REF [--namespace NS]
                     [--advertise-domain DOMAIN]
       mur formation call PEER [TEXT|-]
       mur formation ready [--formation-dir DIR] [--door HOST:PORT]

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
  -d, --detach         start the launcher in the background and return once
                       every member is ready, printing the formation id (with
                       --json, the readiness line); exit 1 with the reason if
                       it does not come up. Stop it with 'mur stop FORMATION'.
                       Not with --task.
  --json               print one line once the formation is ready:
                       {\"formation_id\",\"members\":[{\"name\",\"entry\",\"session_id\",\"url\",\"pid\"}]}
  --ready-timeout DURATION
                       how long each member has to come up (default 180s;
                       1s to a year): seconds, or 500ms, 10s, 2m, 1h
  -h, --help           this text

mur formation ROSTER --emit kubernetes --image REF
  Admit ROSTER and, instead of launching it, write to stdout (never to a
  terminal) the Kubernetes manifests that run it (JSON documents separated
  by '---', which kubectl reads as YAML): per member a Secret holding its
  joining material (its door key and its callees' tokens: keep the output as
  secret as a token file), a Deployment, a Service named after the member
  and a NetworkPolicy admitting only the members the roster lets call it;
  all labelled
  murmur.nexus/formation=<frm_id>. REF is an image holding /bin/mur and each
  member's capsule directory at /capsules/<member>/. See docs/kubernetes.md.
  --namespace NS       put every object in NS
  --advertise-domain DOMAIN
                       members reach each other, and cards advertise, as
                       http://<member>.DOMAIN:8080/ (default <member>.NS.svc
                       with --namespace, else <member>)

mur formation ready [--formation-dir DIR] [--door HOST:PORT]
  The readiness probe of a member that joined from its mounted Secret (DIR,
  default $MURMUR_FORMATION_DIR): exit 0 when its own door (default
  127.0.0.1:8080) serves its card and every member it may call takes its
  token -- which only that member of this formation can -- else 1, saying
  which check failed on stderr.

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
    spec: &SPEC,
};

/// `formation`'s command line, the one table its parsers and the shell completions read.
static SPEC: Spec = Spec {
    options: &[
        Opt::value(
            "task",
            None,
            "TEXT|-",
            Kind::Text,
            "give the entry member one task",
        ),
        Opt::flag("detach", Some('d'), "launch in the background"),
        Opt::internal(super::detached::DETACHED),
        Opt::flag("json", None, "print one line once the formation is ready"),
        Opt::value(
            "ready-timeout",
            None,
            "DURATION",
            Kind::Text,
            "how long each member has to come up",
        ),
        Opt::value(
            "emit",
            None,
            "TARGET",
            Kind::Words(&["kubernetes"]),
            "write manifests instead of launching",
        ),
        Opt::value(
            "image",
            None,
            "REF",
            Kind::Text,
            "the image the manifests run",
        ),
        Opt::value(
            "namespace",
            None,
            "NS",
            Kind::Text,
            "the manifests' namespace",
        ),
        Opt::value(
            "advertise-domain",
            None,
            "DOMAIN",
            Kind::Text,
            "members reach each other under DOMAIN",
        ),
    ],
    operands: &[Kind::Path],
    repeats: false,
    subcommands: &[("call", &CALL), ("ready", &READY)],
};

/// `mur formation call PEER [TEXT|-]`.
static CALL: Spec = Spec::new(&[], &[Kind::Text, Kind::Text]);

/// `mur formation ready`.
static READY: Spec = Spec::new(
    &[
        Opt::value(
            "formation-dir",
            None,
            "DIR",
            Kind::Dir,
            "the member's mounted Secret",
        ),
        Opt::value("door", None, "HOST:PORT", Kind::Text, "its own door"),
    ],
    &[],
);

fn main(args: Vec<std::ffi::OsString>) -> Outcome {
    if args.first().is_some_and(|a| a == "call") {
        return call(args.into_iter().skip(1).collect());
    }
    if args.first().is_some_and(|a| a == "ready") {
        return ready(args.into_iter().skip(1).collect());
    }
    let mut roster: Option<PathBuf> = None;
    let mut options = Options {
        roster: PathBuf::from("roster.json"),
        task: None,
        json: false,
        ready_timeout: launch::MEMBER_READY_TIMEOUT,
    };
    let mut kube = Kube::default();
    let mut detach = false;
    let original = args.clone();
    let mut parser = Parser::new(&SPEC, args);
    while let Some(arg) = parser.next_arg()? {
        match arg {
            Arg::Flag("detach") => detach = true,
            // Internal: this process is the launcher `-d` started (see `detached`).
            Arg::Flag(super::detached::DETACHED) => {}
            Arg::Opt(flag @ ("emit" | "image" | "namespace" | "advertise-domain"), value) => {
                kube.take(flag, cli::utf8(value)?)?;
            }
            Arg::Opt("task", task) => {
                // One --task per run; keeping the last would drop the others silently.
                if options.task.is_some() {
                    return Err(Failure::Usage("--task given twice".into()));
                }
                options.task = Some(cli::utf8(task)?);
            }
            Arg::Flag("json") => options.json = true,
            Arg::Opt("ready-timeout", value) => {
                options.ready_timeout =
                    cli::duration("--ready-timeout", value, std::time::Duration::from_secs(1))?;
            }
            Arg::Operand(path) if roster.is_none() => roster = Some(path.into()),
            other => return Err(other.unexpected()),
        }
    }
    if let Some(path) = roster {
        options.roster = if path.is_dir() {
            path.join("roster.json")
        } else {
            path
        };
    }
    if kube.emit && detach {
        return Err(Failure::Usage(
            "--emit kubernetes writes manifests; it starts nothing to --detach".into(),
        ));
    }
    if kube.emit {
        return kube.emit(&options);
    }
    if let Some(flag) = kube.given() {
        return Err(Failure::Usage(format!(
            "{flag} goes with --emit kubernetes"
        )));
    }
    if detach {
        if options.task.is_some() {
            return Err(Failure::Usage(
                "--detach leaves a formation serving; --task runs one task in the foreground"
                    .into(),
            ));
        }
        let detached = super::detached::Detached {
            applet: "formation",
            what: "formation",
            // Its peers come up together, then the entry: two waits of at most this each.
            within: options.ready_timeout * 2 + std::time::Duration::from_secs(5),
            check: |ready| {
                ready["formation_id"]
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| "its readiness line names no formation".to_string())
            },
        };
        return super::detached::start(&detached, original, options.json);
    }
    if options.task.as_deref() == Some("-") {
        options.task = Some(cli::task_from_stdin()?);
    }
    launch::launch(&options).map_err(Failure::Failed)
}

/// `--emit kubernetes` and the flags that go with it.
#[derive(Default)]
struct Kube {
    emit: bool,
    image: Option<String>,
    namespace: Option<String>,
    advertise_domain: Option<String>,
}

impl Kube {
    /// Flag `flag` (without its dashes) given `value`.
    fn take(&mut self, flag: &str, value: String) -> Result<(), Failure> {
        match flag {
            "emit" if value == "kubernetes" => self.emit = true,
            "emit" => {
                return Err(Failure::Usage(format!(
                    "--emit '{}': the one target is 'kubernetes'",
                    value.escape_debug()
                )));
            }
            "image" => self.image = Some(value),
            "namespace" => self.namespace = Some(value),
            _ => self.advertise_domain = Some(value),
        }
        Ok(())
    }

    /// A flag that means something only with `--emit`, if one was given.
    fn given(&self) -> Option<&'static str> {
        [
            (self.image.is_some(), "--image"),
            (self.namespace.is_some(), "--namespace"),
            (self.advertise_domain.is_some(), "--advertise-domain"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }

    /// Write the manifests for `options.roster` to stdout.
    fn emit(self, options: &Options) -> Outcome {
        if options.task.is_some() || options.json {
            return Err(Failure::Usage(
                "--emit writes manifests; --task and --json belong to a launch".into(),
            ));
        }
        // The one place besides `mur token` that prints tokens: never onto a screen.
        if std::io::stdout().is_terminal() {
            return Err(Failure::Failed(
                "the manifests hold the formation's tokens, so they are not written to a terminal: redirect them to a file (chmod 600) or pipe them to 'kubectl apply -f -'".into(),
            ));
        }
        let image = self.image.ok_or_else(|| {
            Failure::Usage(
                "--emit kubernetes needs --image REF: the image holding /bin/mur and each member's capsule at /capsules/<member>/ (see docs/kubernetes.md)".into(),
            )
        })?;
        let yaml = crate::formation::kube::emit(&crate::formation::kube::Options {
            roster: options.roster.clone(),
            image,
            namespace: self.namespace,
            advertise_domain: self.advertise_domain,
        })
        .map_err(Failure::Failed)?;
        let mut out = std::io::stdout().lock();
        out.write_all(yaml.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|err| Failure::Failed(format!("cannot write the manifests: {err}")))?;
        Ok(0)
    }
}

/// `mur formation ready`: a mounted member's readiness probe.
fn ready(args: Vec<std::ffi::OsString>) -> Outcome {
    let mut dir: Option<PathBuf> = None;
    let mut door = format!("127.0.0.1:{}", crate::formation::kube::DOOR_PORT);
    let mut parser = Parser::new(&READY, args);
    while let Some(arg) = parser.next_arg()? {
        match arg {
            Arg::Opt("formation-dir", value) => dir = Some(value.into()),
            Arg::Opt("door", value) => door = cli::utf8(value)?,
            other => return Err(other.unexpected()),
        }
    }
    let dir = crate::mounted::named(dir.as_deref()).ok_or_else(|| {
        Failure::Usage(format!(
            "name the member's formation directory: --formation-dir DIR or {}",
            crate::json::channel::env::FORMATION_DIR
        ))
    })?;
    match crate::formation::kube::ready::check(&dir, &door) {
        Ok(passed) => {
            let mut out = std::io::stdout().lock();
            for line in passed {
                let _ = writeln!(out, "ready: {line}");
            }
            Ok(0)
        }
        Err(failed) => Err(Failure::Failed(format!("not ready: {}", failed.join("; ")))),
    }
}

/// `mur formation call PEER [TEXT|-]`: one call through the handler's call socket.
fn call(args: Vec<std::ffi::OsString>) -> Outcome {
    let mut positional = vec![];
    let mut parser = Parser::new(&CALL, args);
    while let Some(arg) = parser.next_arg()? {
        match arg {
            Arg::Operand(value) => positional.push(cli::utf8(value)?),
            other => return Err(other.unexpected()),
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
    let env = crate::json::channel::env::CALL_FD;
    let fd = std::env::var(env)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
        .ok_or_else(|| {
            Failure::Failed(match std::env::var(crate::json::channel::env::FORMATION_ID) {
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
