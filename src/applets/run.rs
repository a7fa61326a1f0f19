//! `mur run`: one capsule session behind an A2A door.

use super::Applet;
use crate::cli::{self, Failure, Outcome};
use crate::session::{self, Options};

pub const APPLET: Applet = Applet {
    name: "run",
    summary: "run one capsule session behind an A2A door",
    usage: "\
Usage: mur run [--json] [--bind ADDR] [--port N] [--workdir DIR]

Run one capsule session: an A2A door (HTTP, JSON-RPC 2.0) on loopback, listed
by 'mur ps' for as long as it runs, ended by 'mur stop', ^C or SIGTERM.

This version runs the embedded 'echo' capsule, which answers each task with its
text. Capsules with a handler (murmur.json) are not built yet: naming a
manifest is refused.

Options:
  --json          print one readiness line on stdout:
                  {\"session_id\",\"url\",\"pid\",\"name\",\"version\",\"workdir\"}
                  (without it, a human line on stderr)
  --bind ADDR     listen address (default 127.0.0.1; a wildcard only if given)
  --port N        listen port (default 0: any free port)
  --workdir DIR   the session's working directory (default: the current one)
  -h, --help      this text

When NOTIFY_SOCKET is set, READY=1 is sent to it once the door listens and the
record is written (systemd Type=notify).

Exit status: 143 after SIGTERM, SIGHUP or session/stop, 130 after SIGINT (the
record removed); 1 if the session could not start; 2 on a usage error. A
second signal ends it at once.
",
    main,
};

fn main(args: Vec<std::ffi::OsString>) -> Outcome {
    let mut options = Options {
        bind: std::net::Ipv4Addr::LOCALHOST.into(),
        port: 0,
        workdir: std::env::current_dir()
            .map_err(|err| Failure::Failed(format!("cannot read the current directory: {err}")))?,
        json: false,
    };
    let mut parser = lexopt::Parser::from_args(args);
    while let Some(arg) = parser.next()? {
        match arg {
            lexopt::Arg::Long("json") => options.json = true,
            lexopt::Arg::Long("bind") => {
                let text = cli::utf8(parser.value()?)?;
                options.bind = text.parse().map_err(|_| {
                    Failure::Usage(format!("--bind wants an IP address, not '{text}'"))
                })?;
            }
            lexopt::Arg::Long("port") => options.port = cli::number("--port", parser.value()?)?,
            lexopt::Arg::Long("workdir") => options.workdir = parser.value()?.into(),
            lexopt::Arg::Value(manifest) => {
                return Err(Failure::Failed(format!(
                    "{}: capsules with a handler are not built yet in this version; run 'mur run' alone for the embedded echo capsule",
                    std::path::Path::new(&manifest).display()
                )));
            }
            other => return Err(other.unexpected().into()),
        }
    }
    if !options.workdir.is_dir() {
        return Err(Failure::Failed(format!(
            "--workdir {}: not a directory",
            options.workdir.display()
        )));
    }
    options.workdir = std::fs::canonicalize(&options.workdir).unwrap_or(options.workdir);
    session::run_echo(&options).map_err(Failure::Failed)
}
