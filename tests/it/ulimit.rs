//! Sessions under an address-space limit (`ulimit -v`, `RLIMIT_AS` set in the child before its
//! exec), issue 30 point 6: what the allocator and the threads map must fit, so an allocation
//! never fails — a failed one aborts the session (exit 134, "memory allocation of … bytes
//! failed") and leaves its record and task directories behind. Each mix is answered (a result,
//! or a 503 for what the memory budget cannot take), and the session then ends on SIGTERM with
//! exit 143 (its answer to SIGTERM), nothing on stderr about memory, and nothing left in `~/.murmur`.
//!
//! Run against the test build (glibc) and against the installed static binary (musl and
//! mimalloc), when install.sh has built it for this very commit (`tests/it/install.rs` and the
//! benches build it into `<target dir>/install-sh`); without it those tests skip, loudly.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::home::{Home, list_dir};
use common::run::{binary_command, mur_bin};
use common::session::{Session, send_body};
use common::skip::skipped;
use serde_json::Value;

/// Point 6's limit: `ulimit -v 262144`.
const LIMIT_KIB: u64 = 262_144;
/// The finding: under `ulimit -v 100000` the first request aborted the installed binary.
const TIGHT_KIB: u64 = 100_000;
/// Point 6's connections, each with one blocking `message/send` on it.
const CONNECTIONS: usize = 1000;

/// One test of this module at a time: each opens a thousand connections, and a session starved
/// of CPU by another's holds more of its requests at once than it would alone.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|p| p.into_inner())
}

/// `mur run --json` (the embedded echo capsule) of `binary`, its address space limited to
/// `kib` KiB.
fn limited(home: &Home, binary: &Path, kib: u64) -> Session {
    let mut command = binary_command(binary, home.path(), home.path(), &["run", "--json"]);
    let bytes = kib * 1024;
    // SAFETY: between fork and exec the hook makes one async-signal-safe system call
    // (setrlimit(2)) on a struct on its own stack.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Session::spawn(command)
}

/// The installed static binary of this commit, or why there is none.
fn installed() -> Result<PathBuf, String> {
    let arch = std::env::consts::ARCH;
    let bin = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target dir")
        .join(format!("install-sh/{arch}-unknown-linux-musl/release/mur"));
    let version = |bin: &Path| {
        std::process::Command::new(bin)
            .arg("--version")
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let Ok(built) = version(&bin) else {
        return Err(format!(
            "no installed static binary at {} (run ./install.sh or cargo bench --bench run first)",
            bin.display()
        ));
    };
    let ours = version(Path::new(mur_bin())).unwrap_or_default();
    let commit = |v: &str| v.rsplit("commit ").next().unwrap_or("").to_string();
    if commit(&built) != commit(&ours) {
        return Err(format!(
            "{} is of another commit ({built}; this is {ours}): run ./install.sh again",
            bin.display()
        ));
    }
    Ok(bin)
}

/// One request on each of [`CONNECTIONS`] keep-alive connections, all written before any is
/// read: each answered with a completed task or a 503. How many of each.
fn a_thousand_connections(url: &str) -> (usize, usize) {
    let body = send_body("ping").to_string();
    let request = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut connections: Vec<TcpStream> = (0..CONNECTIONS)
        .map(|_| TcpStream::connect(url).expect("connect"))
        .collect();
    for connection in &mut connections {
        connection
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        connection.write_all(request.as_bytes()).expect("write");
    }
    let (mut answered, mut refused) = (0, 0);
    for connection in connections {
        let (status, body) = read_answer(connection);
        match status {
            200 => {
                let answer: Value = serde_json::from_slice(&body).unwrap();
                assert_eq!(answer["result"]["status"]["state"], "completed", "{answer}");
                answered += 1;
            }
            503 => refused += 1,
            other => panic!("status {other}: {}", String::from_utf8_lossy(&body)),
        }
    }
    (answered, refused)
}

/// One HTTP answer (with a `Content-Length`) from `connection`: its status and body.
fn read_answer(connection: TcpStream) -> (u16, Vec<u8>) {
    let mut reader = BufReader::new(connection);
    let mut line = String::new();
    reader.read_line(&mut line).expect("the status line");
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut length = 0;
    loop {
        line.clear();
        reader.read_line(&mut line).expect("a header");
        if line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("the body");
    (status, body)
}

/// The session still answers, ends on SIGTERM with exit 143, said nothing about memory, and left
/// no record nor task directory.
fn assert_ends_clean(home: &Home, mut session: Session) {
    let task = session.send(None, "still here", true);
    assert_eq!(task["status"]["state"], "completed", "{task}");
    session.signal(libc::SIGTERM);
    let status = session.wait_exit(Duration::from_secs(20));
    let stderr = session.stderr();
    assert_eq!(status.code(), Some(143), "{status:?}; stderr: {stderr}");
    assert!(!stderr.contains("memory allocation"), "{stderr}");
    assert_eq!(home.running_entries(), Vec::<String>::new());
    assert_eq!(list_dir(&home.murmur().join("tasks")), Vec::<String>::new());
}

/// Point 6's mixes, one after the other on one session of `binary` under `ulimit -v 262144`.
fn the_mixes_never_abort(binary: &Path) {
    let _turn = one_at_a_time();
    let home = Home::new();
    let session = limited(&home, binary, LIMIT_KIB);
    let (answered, refused) = a_thousand_connections(&session.url);
    eprintln!("{CONNECTIONS} connections: {answered} answered, {refused} refused");
    assert!(answered > 0);
    let (answered, _) = crate::budget::a_hundred_and_twenty_seven_data_parts(&session.url);
    assert!(answered > 0);
    assert_ends_clean(&home, session);
}

/// [`CONNECTIONS`] connections each holding one byte of a head (a thread per waiting connection
/// would need 4 MiB or more of address space each), and a request beside them still answered.
fn a_thousand_slow_connections(binary: &Path) {
    let _turn = one_at_a_time();
    let home = Home::new();
    let session = limited(&home, binary, LIMIT_KIB);
    let slow: Vec<TcpStream> = (0..CONNECTIONS)
        .map_while(|_| {
            let mut stream = TcpStream::connect(&session.url).ok()?;
            stream.write_all(b"P").ok()?;
            Some(stream)
        })
        .collect();
    assert_eq!(
        slow.len(),
        CONNECTIONS,
        "connections held; stderr: {}",
        session.stderr()
    );
    let answer = session
        .try_send(None, "beside them")
        .unwrap_or_else(|err| panic!("no answer ({err}); stderr: {}", session.stderr()));
    assert!([200, 503].contains(&answer.status), "{}", answer.head);
    drop(slow);
    assert_ends_clean(&home, session);
}

/// The first request under `ulimit -v 100000`, which aborted the installed binary.
fn the_first_request_under_a_tight_limit(binary: &Path) {
    let _turn = one_at_a_time();
    let home = Home::new();
    let session = limited(&home, binary, TIGHT_KIB);
    assert_ends_clean(&home, session);
}

#[test]
fn the_test_build_never_aborts_under_ulimit_v_262144() {
    the_mixes_never_abort(Path::new(mur_bin()));
}

/// A thread per waiting connection would not fit here: the door's workers are a fixed few.
#[test]
fn the_test_build_holds_a_thousand_slow_connections_under_ulimit_v_262144() {
    a_thousand_slow_connections(Path::new(mur_bin()));
}

/// Run `check` on the installed binary, or record why `test` could not.
fn on_installed(test: &str, check: fn(&Path)) {
    match installed() {
        Ok(bin) => check(&bin),
        Err(why) => skipped(test, &why),
    }
}

#[test]
fn the_installed_binary_holds_a_thousand_slow_connections_under_ulimit_v_262144() {
    on_installed(
        "the_installed_binary_holds_a_thousand_slow_connections_under_ulimit_v_262144",
        a_thousand_slow_connections,
    );
}

#[test]
fn the_test_build_answers_under_ulimit_v_100000() {
    the_first_request_under_a_tight_limit(Path::new(mur_bin()));
}

#[test]
fn the_installed_binary_never_aborts_under_ulimit_v_262144() {
    on_installed(
        "the_installed_binary_never_aborts_under_ulimit_v_262144",
        the_mixes_never_abort,
    );
}

#[test]
fn the_installed_binary_answers_under_ulimit_v_100000() {
    on_installed(
        "the_installed_binary_answers_under_ulimit_v_100000",
        the_first_request_under_a_tight_limit,
    );
}
