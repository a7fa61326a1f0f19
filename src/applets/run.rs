//! `mur run`: one capsule session behind an A2A door.

use std::path::PathBuf;

use super::Applet;
use super::detached;
use crate::cli::spec::{Arg, Kind, Opt, Parser, Spec};
use crate::cli::{self, Failure, Outcome};
use crate::session::{self, Options, Source};

pub const APPLET: Applet = Applet {
    name: "run",
    summary: "run one capsule session behind an A2A door",
    usage: "\
Usage: mur run [MANIFEST|DIR] [--task TEXT|- [--out DIR]] [-d] [--name NAME] [--json]
               [--workdir DIR]
               [--bind ADDR] [--port N | --listen-fd N] [--advertise-url URL]
               [--capsule-sha256 HEX] [--formation-dir DIR]

Run one capsule session: an A2A door (HTTP/1.1, JSON-RPC 2.0, A2A 1.0 and 0.3) on
loopback whose tasks are run by the capsule's handler, listed by 'mur ps' for
as long as it runs, ended by 'mur stop', ^C or SIGTERM.

MANIFEST is a murmur.json (or a directory holding one); default ./murmur.json.
Only when no MANIFEST is named and the current directory has no murmur.json
does the embedded 'echo' capsule serve (saying so on stderr): it answers each
task with every part it got. The door speaks A2A 1.0 and 0.3 at one URL (JSON-RPC; streaming,
multi-turn, every part kind). See 'man mur' and docs/capsules.md for the
manifest and the handler contract (exit 10 asks for input; MUR_TASK_DIR holds
message.json, history.json and out/).

Options:
  --task TEXT     run this one task (given once), print its answer on stdout as the
                  handler writes it (each piece flushed at once), and exit
                  (0 if it completed, 1 otherwise, saying why on stderr);
                  '-' reads it from stdin (one trailing newline dropped).
                  The answer's files (what the handler left in out/) are
                  named on stderr, or written with --out
  --out DIR       with --task: write the answer's files into DIR (each by
                  its name in out/, mode 0600, replacing one of that name)
  -d, --detach    start the session in the background and return once its
                  record is written and its door answers as it, printing the
                  session id (with --json, the readiness line); exit 1 with
                  the reason (the session's own words) if it does not come up
                  within 30 s. The session's stderr is then gone: its task
                  events are in 'mur logs'. Not with --task.
  --json          print one readiness line on stdout once the door listens:
                  {\"session_id\",\"url\",\"pid\",\"name\",\"version\",\"workdir\"}
                  (without it, a human line on stderr). Never a token.
                  With --task: nothing streamed; one JSON object at the end,
                  {\"task_id\",\"state\",\"answer\",\"reason\",\"files\"}, and
                  nothing else on stdout
  --name NAME     name the session (a lowercase letter, then up to 31 of a-z,
                  0-9, -): an address for every applet, unique among running
                  sessions of this home (a taken name is refused, naming the
                  session that holds it)
  --workdir DIR   the handler's working directory (default: the current one)
  --bind ADDR     listen address: an IP, or localhost (127.0.0.1, the default;
                  a wildcard only if given)
  --port N        listen port, 0-65535 (default 0: any free port)
  --listen-fd N   serve the listening TCP socket inherited as descriptor N
                  instead of binding one (its owner keeps it across restarts:
                  connections wait, none is refused). A service manager's
                  socket activation (LISTEN_PID, LISTEN_FDS; several sockets:
                  the one named 'door') is taken the same way, unasked
  --advertise-url URL
                  the URL the agent card advertises (its url and every
                  supportedInterfaces entry), for clients that reach the door
                  through NAT, a port mapping or a Kubernetes Service, e.g.
                  -p 18080:8080 with --advertise-url http://HOST:18080/;
                  default http://BIND:PORT/; overrides network.advertise_url.
                  The record (and so mur ps, stop) keeps the bind address.
  --capsule-sha256 HEX
                  refuse to start unless the manifest's sha256 is HEX
  --formation-dir DIR
                  join a formation as the member whose mounted Secret DIR is
                  (default: $MURMUR_FORMATION_DIR; see docs/kubernetes.md):
                  callers verified with its key, its callees called with its
                  tokens (files no other user may read), no launcher, no
                  lifeline
  -h, --help      this text

Processes: each handler runs under a subreaper of its own (Linux), so whatever
it starts (setsid, double forks, any depth) is that task's, and is killed when
the handler exits, the task is canceled or times out (SIGTERM, SIGKILL 2 s
later), or the session ends -- even by SIGKILL. A process this session did not
start (a wrapper's sidecar before 'exec mur', an orphan it adopts as pid 1) is
never signalled, only reaped once it exits. Without a subreaper (macOS) only
the handler's process group is reached.

An authenticated door's tokens are never printed: 'mur token' prints them.
When NOTIFY_SOCKET is set (systemd Type=notify), READY=1 is sent to it once the
door listens and the record is written, STATUS= as its tasks change ('2 tasks
running, 0 queued, 0 waiting for input, 17 ended': systemctl status shows it),
and STOPPING=1 when it winds down.

Exit status: 143 after SIGTERM, SIGHUP, session/stop or
lifeline EOF, 130 after SIGINT (live tasks canceled, record removed; a second
signal, or 20 s, ends it at once); with --task 0 or 1; 1 if the session could
not start (bad manifest: the path, key and what is allowed are named); 2 on a
usage error.
",
    main,
    spec: &SPEC,
};

/// `run`'s command line, the one table its parser and the shell completions read.
static SPEC: Spec = Spec::new(
    &[
        Opt::value(
            "task",
            None,
            "TEXT|-",
            Kind::Text,
            "run one task, print its answer",
        ),
        Opt::flag("detach", Some('d'), "serve in the background"),
        Opt::flag("json", None, "print the readiness line"),
        Opt::value(
            "workdir",
            None,
            "DIR",
            Kind::Dir,
            "the handler's working directory",
        ),
        Opt::value(
            "bind",
            None,
            "ADDR",
            Kind::Text,
            "the door's listening address",
        ),
        Opt::value("port", None, "N", Kind::Text, "the door's port"),
        Opt::value(
            "advertise-url",
            None,
            "URL",
            Kind::Text,
            "the URL the card advertises",
        ),
        Opt::value(
            "capsule-sha256",
            None,
            "HEX",
            Kind::Text,
            "refuse another manifest",
        ),
        Opt::value(
            "formation-dir",
            None,
            "DIR",
            Kind::Dir,
            "join a formation from its mounted Secret",
        ),
        Opt::value(
            "name",
            None,
            "NAME",
            Kind::Text,
            "a name for the session, unique among running ones",
        ),
        Opt::value(
            "listen-fd",
            None,
            "N",
            Kind::Text,
            "serve the listening socket inherited as descriptor N",
        ),
        Opt::value(
            "out",
            None,
            "DIR",
            Kind::Dir,
            "with --task: write the answer's files into DIR",
        ),
        Opt::internal(detached::DETACHED),
    ],
    &[Kind::Path],
);

fn main(args: Vec<std::ffi::OsString>) -> Outcome {
    let original = args.clone();
    let (mut options, manifest, detach) = parse(args)?;
    options.source = source(manifest)?;
    // A session keeps its record, log and task directories in the murmur home: with none to
    // name, that is said once, here, and nothing starts — not a warning per thing that needs it
    // and a failure after.
    crate::home::location().map_err(Failure::Failed)?;
    // Said by the command the user ran (the launcher under -d, not the session it starts, whose
    // stderr is gone once it is up), so a script run from the wrong directory is not silent.
    if matches!(options.source, Source::Embedded) && !options.detach {
        cli::warn(
            "run",
            "no MANIFEST named and no ./murmur.json here: serving the embedded 'echo' capsule \
             (name a capsule, e.g. 'mur run ./my-capsule', to run yours)",
        );
    }
    if options.capsule_sha256.is_some() && matches!(options.source, Source::Embedded) {
        return Err(Failure::Usage(
            "--capsule-sha256 needs a MANIFEST to check".into(),
        ));
    }
    if detach {
        if options.task.is_some() {
            return Err(Failure::Usage(
                "--detach runs a serving session; --task runs one task in the foreground".into(),
            ));
        }
        return detached::start(&detached::SESSION, original, options.json);
    }
    if options.task.as_deref() == Some("-") {
        options.task = Some(cli::task_from_stdin()?);
    }
    // The current directory is read only when no --workdir names one: a formation member, or a
    // script, may run from a directory that no longer exists.
    if options.workdir.as_os_str().is_empty() {
        options.workdir = std::env::current_dir().map_err(|err| {
            Failure::Failed(format!(
                "cannot read the current directory ({err}); give --workdir DIR"
            ))
        })?;
    }
    if !options.workdir.is_dir() {
        return Err(Failure::Failed(format!(
            "--workdir {}: not a directory",
            options.workdir.display()
        )));
    }
    options.workdir = std::fs::canonicalize(&options.workdir).unwrap_or(options.workdir);
    session::run(&options).map_err(Failure::Failed)
}

/// The capsule to run: the one named, else `./murmur.json`, else the embedded echo.
///
/// Anything at all named `murmur.json` here — a dangling link, an unreadable file — is taken
/// as the capsule meant, so its error is reported instead of the echo silently answering in
/// its place; only a `murmur.json` that is certainly absent lets the echo serve.
fn source(manifest: Option<PathBuf>) -> Result<Source, Failure> {
    if let Some(path) = manifest {
        return Ok(Source::Manifest(path));
    }
    let here = std::path::Path::new("murmur.json");
    match std::fs::symlink_metadata(here) {
        Ok(_) => Ok(Source::Manifest(here.to_path_buf())),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Source::Embedded),
        Err(err) => Err(Failure::Failed(format!(
            "cannot tell whether ./murmur.json exists ({err}); name the capsule to run"
        ))),
    }
}

/// The command line: the options, the MANIFEST named (if any) and whether `-d` was given.
/// `--bind`: an IP address, or `localhost`, which is the IPv4 loopback (127.0.0.1) — what the
/// default binds, and never a lookup: `/etc/hosts` could map the name anywhere, and a door
/// meant to be local must not end up listening elsewhere.
fn bind_address(text: &str) -> Result<std::net::IpAddr, Failure> {
    if text.eq_ignore_ascii_case("localhost") {
        return Ok(std::net::Ipv4Addr::LOCALHOST.into());
    }
    text.parse().map_err(|_| {
        Failure::Usage(format!(
            "--bind wants an IP address or localhost, not '{text}'"
        ))
    })
}

fn parse(args: Vec<std::ffi::OsString>) -> Result<(Options, Option<PathBuf>, bool), Failure> {
    let mut manifest: Option<PathBuf> = None;
    let mut options = Options {
        source: Source::Embedded,
        task: None,
        bind: std::net::Ipv4Addr::LOCALHOST.into(),
        port: 0,
        workdir: PathBuf::new(),
        json: false,
        capsule_sha256: None,
        advertise_url: None,
        detach: false,
        formation_dir: None,
        out: None,
        listen_fd: None,
        name: None,
    };
    let mut detach = false;
    let mut parser = Parser::new(&SPEC, args);
    while let Some(arg) = parser.next_arg()? {
        match arg {
            Arg::Flag("json") => options.json = true,
            Arg::Flag("detach") => detach = true,
            // Internal: this process is the session `-d` started (see `detach`).
            Arg::Flag(detached::DETACHED) => options.detach = true,
            Arg::Opt("task", task) => {
                // One session runs one --task; keeping the last would drop the others silently.
                if options.task.is_some() {
                    return Err(Failure::Usage(
                        "--task given twice; mur run --task runs one task".into(),
                    ));
                }
                options.task = Some(cli::utf8(task)?);
            }
            Arg::Opt("bind", bind) => options.bind = bind_address(&cli::utf8(bind)?)?,
            Arg::Opt("port", port) => options.port = cli::port("--port", port)?,
            Arg::Opt("advertise-url", url) => {
                let url = cli::utf8(url)?;
                crate::json::manifest::check_advertise_url(&url)
                    .map_err(|why| Failure::Usage(format!("--advertise-url: {why}")))?;
                options.advertise_url = Some(url);
            }
            Arg::Opt("workdir", dir) => options.workdir = dir.into(),
            Arg::Opt("name", name) => {
                let name = cli::utf8(name)?;
                crate::running::names::check(&name).map_err(Failure::Usage)?;
                options.name = Some(name);
            }
            Arg::Opt("formation-dir", dir) => options.formation_dir = Some(dir.into()),
            Arg::Opt("out", dir) => options.out = Some(dir.into()),
            Arg::Opt("listen-fd", value) => {
                let value = cli::utf8(value)?;
                let fd = value
                    .parse::<i32>()
                    .ok()
                    .filter(|&fd| fd >= 3)
                    .ok_or_else(|| {
                        Failure::Usage(format!(
                            "--listen-fd wants an inherited descriptor number (3 or more), not \
                         '{value}'"
                        ))
                    })?;
                options.listen_fd = Some(fd);
            }
            Arg::Opt("capsule-sha256", hex) => {
                let hex = cli::utf8(hex)?;
                if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(Failure::Usage(format!(
                        "--capsule-sha256 wants 64 hex digits, not '{hex}'"
                    )));
                }
                options.capsule_sha256 = Some(hex);
            }
            Arg::Operand(path) if manifest.is_none() => manifest = Some(path.into()),
            other => return Err(other.unexpected()),
        }
    }
    if options.listen_fd.is_some() && options.port != 0 {
        return Err(Failure::Usage(
            "--port and --listen-fd both name the door: give one".into(),
        ));
    }
    if options.out.is_some() && options.task.is_none() {
        return Err(Failure::Usage(
            "--out DIR is where a --task's answer files go; give --task too".into(),
        ));
    }
    Ok((options, manifest, detach))
}
