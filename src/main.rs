//! The multicall entry point: which applet argv names, and the conventions every applet shares —
//! `--help`, `help APPLET`, `--list`, `--version`, and exit codes 0/1/2/127.
//!
//! The applet is the basename of argv[0] with a `mur-` prefix removed (`mur-ps` → `ps`), or, when
//! that is `mur` itself, the first argument. Only exact names match: a typo is exit 127 (with a
//! suggestion, never a guess acted on); an unknown option of `mur` itself is a usage error, 2.

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use mur::applets::{APPLETS, Applet};
use mur::cli::Failure;

/// The static (musl) build's allocator: mimalloc, with a mapping of its own for each large block
/// (`sys::alloc`). musl's own malloc hands freed memory back to the
/// kernel while other threads run, and the door's threads allocate on every request: under load
/// its TLB shootdowns and futex wake-ups made the installed binary's door 7x slower than the glibc
/// build (issue 26, measured in docs/benchmarks.md). The glibc build keeps glibc's allocator.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mur::sys::alloc::Allocator = mur::sys::alloc::ALLOCATOR;

const VERSION: &str = concat!(
    "mur ",
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("MUR_TARGET"),
    ", commit ",
    env!("MUR_GIT_COMMIT"),
    ")"
);

fn main() -> ExitCode {
    mur::sys::alloc::tune();
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_default();
    let rest: Vec<OsString> = args.collect();
    let invoked = std::path::Path::new(&argv0)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let by_link = invoked.strip_prefix("mur-").filter(|name| !name.is_empty());
    ExitCode::from(match by_link {
        Some(name) => dispatch(name, rest),
        None => top_level(rest),
    })
}

/// `mur [ARGS]`: the top-level options, or the applet the first argument names.
fn top_level(args: Vec<OsString>) -> u8 {
    let Some(first) = args.first() else {
        let _ = std::io::stderr().write_all(general_help().as_bytes());
        return 2;
    };
    let first = first.to_string_lossy().into_owned();
    match first.as_str() {
        "--help" | "-h" => print(&general_help()),
        "--version" | "-V" => print(&format!("{VERSION}\n")),
        "--list" => print(
            &APPLETS
                .iter()
                .map(|a| format!("{}\n", a.name))
                .collect::<String>(),
        ),
        unknown if unknown.starts_with('-') => {
            let _ = writeln!(
                std::io::stderr(),
                "mur: unknown option '{}'{}\nTry 'mur --help'",
                unknown.escape_debug(),
                mur::cli::spec::did_you_mean(unknown, TOP_OPTIONS.iter().copied())
            );
            2
        }
        "help" => match args.get(1).map(|a| a.to_string_lossy()) {
            None => print(&general_help()),
            Some(name) => match find(&name) {
                Some(applet) => print(applet.usage),
                None => unknown(&name),
            },
        },
        _ => dispatch(&first, args.into_iter().skip(1).collect()),
    }
}

/// The options of `mur` itself, for suggestions.
const TOP_OPTIONS: &[&str] = &["--help", "--version", "--list", "-h", "-V"];

fn find(name: &str) -> Option<&'static Applet> {
    APPLETS.iter().find(|a| a.name == name)
}

fn dispatch(name: &str, args: Vec<OsString>) -> u8 {
    let Some(applet) = find(name) else {
        return unknown(name);
    };
    // `--help` anywhere before `--` is handled here, once, for every applet.
    if args
        .iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "--help" || a == "-h")
    {
        return print(applet.usage);
    }
    // `--version` as the first argument, so `mur-run --version` answers as `mur --version`
    // does; only first, so a task text or peer argument `--version` later is left alone.
    if args.first().is_some_and(|a| a == "--version" || a == "-V") {
        return print(&format!("{VERSION}\n"));
    }
    match (applet.main)(args) {
        Ok(code) => u8::try_from(code).unwrap_or(1),
        Err(Failure::Failed(message)) => {
            mur::cli::warn(applet.name, &message);
            1
        }
        Err(Failure::Usage(message)) => {
            mur::cli::warn(applet.name, &message);
            let _ = writeln!(std::io::stderr(), "Try 'mur {} --help'", applet.name);
            2
        }
    }
}

fn unknown(name: &str) -> u8 {
    let _ = writeln!(
        std::io::stderr(),
        "mur: '{}' is not an applet (mur --list lists them){}",
        name.escape_debug(),
        mur::cli::spec::did_you_mean(name, APPLETS.iter().map(|a| a.name))
    );
    127
}

/// Write `text` to stdout; exit 0 even if the reader went away.
fn print(text: &str) -> u8 {
    let _ = std::io::stdout().write_all(text.as_bytes());
    0
}

fn general_help() -> String {
    let mut help = format!(
        "{VERSION}: run AI-agent capsules as local processes, and manage them safely.\n\n\
         Usage: mur APPLET [ARGS...]    (or through a link: mur-APPLET [ARGS...])\n\
         \x20      mur help APPLET | mur APPLET --help\n\
         \x20      mur --list | --version | --help\n\nApplets:\n"
    );
    for applet in APPLETS {
        help.push_str(&format!("  {:<10} {}\n", applet.name, applet.summary));
    }
    help.push_str(
        "\nState: the murmur home, $MURMUR_HOME when set (an absolute path), else\n\
         $HOME/.murmur; ps, stop, token and logs see the sessions of that home only.\n\
         \nExit status: 0 success, 1 failure, 2 usage error, 127 unknown applet;\n\
         mur run and mur formation also pass through a task's outcome.\n",
    );
    help
}
