//! What a hostile record, handler or client can make `mur` do (DESIGN.md §2, §4, §5): one
//! regression test per finding of the hardening review, each failing on the code before it.

use crate::common;

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::home::Home;
use common::http::Http;
use common::process::{Proc, alive, start_token};
use common::records::{record, session_id, status_of};
use common::skip::skipped;
use common::wait::wait_until;

/// A port nothing listens on: the door of a record that is never reached.
const SILENT_DOOR: &str = "127.0.0.1:9";

/// A record naming (`pid`, its real start time) is refused by `mur stop --all` (exit 1, the
/// reason on stderr, the record kept) and listed `unreachable` by `mur ps` — with `why` in its
/// reason when `pid` could not be a session at all (a thread, a kernel thread, another user's),
/// with its silent door's when it merely may not be signalled (pid 1, an ancestor: a live
/// session can be either); `pid` is still alive.
#[track_caller]
fn refused_everywhere(home: &Home, pid: u32, why: &str) {
    refused(home, pid, why, true);
}

/// [`refused_everywhere`] for a pid mur never signals that may still be a live session.
#[track_caller]
fn never_signalled(home: &Home, pid: u32, why: &str) {
    refused(home, pid, why, false);
}

#[track_caller]
fn refused(home: &Home, pid: u32, why: &str, ps_says_why: bool) {
    let start = start_token(pid).expect("the target's start time");
    let sid = session_id();
    let path = home.write_record(&record(&sid, pid, &start, SILENT_DOOR));
    let stop = home.mur(&["stop", "--all", "--timeout", "1"]);
    stop.expect_code(1);
    assert!(stop.stderr.contains(why), "stop said: {}", stop.stderr);
    assert!(path.exists(), "the refused record was removed");
    assert!(alive(pid), "pid {pid} was signalled");
    let ps = home.mur(&["ps", "--json"]);
    ps.expect_code(0);
    assert_eq!(
        status_of(&ps.json(), &sid).as_deref(),
        Some("unreachable"),
        "{}",
        ps.stdout
    );
    let reason = if ps_says_why { why } else { "cannot connect" };
    assert!(ps.stdout.contains(reason), "ps listed: {}", ps.stdout);
}

#[test]
fn a_record_naming_an_ancestor_of_mur_is_never_signalled() {
    // The test process is the parent of every `mur` it runs.
    never_signalled(
        &Home::new(),
        std::process::id(),
        "this mur or one of its ancestors",
    );
}

/// Linux alone gives a thread an id from the pid space (macOS thread ids are no pids).
#[cfg(target_os = "linux")]
#[test]
fn a_record_naming_a_thread_is_never_signalled() {
    // A thread of this test process that lives until the test ends.
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (end_tx, end_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        // SAFETY: gettid(2) takes nothing and cannot fail.
        tid_tx.send(unsafe { libc::gettid() } as u32).unwrap();
        let _ = end_rx.recv();
    });
    let tid = tid_rx.recv().unwrap();
    let me = std::process::id();
    refused_everywhere(&Home::new(), tid, &format!("a thread of process {me}"));
    drop(end_tx);
    thread.join().unwrap();
}

#[test]
fn a_record_naming_pid_1_is_never_signalled() {
    never_signalled(&Home::new(), 1, "pid 1 (init) is never signalled");
}

#[test]
fn a_record_naming_a_kernel_thread_is_never_signalled() {
    // kthreadd is pid 2 with parent 0 where the kernel's threads are visible.
    let visible = std::fs::read_to_string("/proc/2/status")
        .is_ok_and(|s| s.lines().any(|l| l.split_whitespace().eq(["PPid:", "0"])));
    if !visible {
        return skipped(
            "hardening::a_record_naming_a_kernel_thread_is_never_signalled",
            "no kernel thread is visible in this pid namespace",
        );
    }
    refused_everywhere(&Home::new(), 2, "pid 2 is a kernel thread");
}

#[test]
fn root_never_signals_another_users_process_through_a_record() {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skipped(
            "hardening::root_never_signals_another_users_process_through_a_record",
            "not root: another user's process cannot be started",
        );
    }
    let mut nobody = Command::new("sleep");
    nobody
        .arg("60")
        .uid(65534)
        .gid(65534)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _alone = common::alone::as_nobody();
    let child = Proc::from_command(nobody);
    wait_until(Duration::from_secs(5), "the sleep's start time", || {
        start_token(child.pid()).is_some()
    });
    refused_everywhere(
        &Home::new(),
        child.pid(),
        "belongs to uid 65534, not to uid 0",
    );
}

/// `HOME=<home>`: the entry every process `mur` starts under this home inherits.
fn home_env(home: &Home) -> String {
    format!("HOME={}", home.path().display())
}

#[test]
fn nothing_a_handler_starts_outlives_the_session_however_deep_it_hides() {
    // A double fork out of a new session: the sleep is the handler's great-grandchild, and is
    // reparented to the session only once its parent dies.
    let home = Home::new();
    let manifest = home.write_capsule(
        "deep",
        serde_json::json!({"name": "deep", "version": "1"}),
        Some(concat!(
            "#!/bin/sh\n",
            "setsid sh -c 'sh -c \"sleep 4242 & echo \\$! > sleep.pid; wait; :\"; :' ",
            "</dev/null >/dev/null 2>&1 &\n",
            "while [ ! -s sleep.pid ]; do sleep 0.01; done\n",
            "echo started\n",
        )),
    );
    // A workdir of its own: its sandbox lets it add files there (the home holds ~/.murmur).
    let work = home.dir("work");
    let args = [
        "run",
        manifest.to_str().unwrap(),
        "--task",
        "go",
        "--workdir",
    ];
    let run = home.mur(&[&args[..], &[work.to_str().unwrap()]].concat());
    run.expect_code(0);
    assert_eq!(run.stdout, "started\n");
    let sleep: u32 = std::fs::read_to_string(work.join("sleep.pid"))
        .expect("the handler wrote the sleep's pid")
        .trim()
        .parse()
        .expect("a pid");
    assert!(
        !alive(sleep),
        "the handler's great-grandchild {sleep} outlived the session"
    );
    // No waiting: `mur run` returned, so everything it started (the sleep, and the session's
    // group reaper) must already be gone.
    let left = common::process::processes_with_env(&home_env(&home));
    assert!(left.is_empty(), "left behind: {:?}", describe(&left));
}

/// `pid: cmdline` for each pid, for a failure message.
fn describe(pids: &[u32]) -> Vec<String> {
    pids.iter()
        .map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            format!(
                "{pid}: {}",
                String::from_utf8_lossy(&cmdline).replace('\0', " ")
            )
        })
        .collect()
}

#[test]
fn a_duration_too_long_to_add_to_a_clock_is_a_usage_error() {
    let home = Home::new();
    for args in [
        ["stop", "--all", "--timeout", "18446744073709551615"],
        [
            "formation",
            "roster.json",
            "--ready-timeout",
            "18446744073709551615",
        ],
    ] {
        let out = home.mur(&args);
        out.expect_code(2);
        assert!(
            out.stderr.contains("(a year)") && out.stderr.contains("not '18446744073709551615'"),
            "{args:?}: {}",
            out.stderr
        );
    }
}

#[test]
fn an_http_1_0_request_is_answered_and_closed_unless_it_asks_to_stay() {
    use std::io::{Read, Write};
    let home = Home::new();
    let session = home.start(&[]);
    let ask = |head: &str| {
        let mut stream = std::net::TcpStream::connect(&session.url).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        stream.write_all(head.as_bytes()).unwrap();
        // Read to EOF: only a closed connection ends this before the read timeout.
        let mut answer = Vec::new();
        let closed = stream.read_to_end(&mut answer).is_ok();
        (String::from_utf8_lossy(&answer).into_owned(), closed)
    };
    let (answer, closed) = ask("GET /.well-known/agent-card.json HTTP/1.0\r\n\r\n");
    assert!(closed, "an HTTP/1.0 connection was held open: {answer}");
    assert!(answer.contains("Connection: close"), "{answer}");
    let (answer, closed) =
        ask("GET /.well-known/agent-card.json HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert!(
        !closed,
        "an HTTP/1.0 keep-alive connection was closed: {answer}"
    );
    assert!(answer.contains("Connection: keep-alive"), "{answer}");
}

#[test]
fn a_json_rpc_request_with_a_key_twice_is_refused_naming_it() {
    let home = Home::new();
    let session = home.start(&[]);
    let mut conn = Http::connect(&session.url);
    // A reader keeping the first "method" sees a harmless read; serde_json's default keeps the
    // last. Neither is guessed.
    let body =
        br#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","method":"session/stop","params":{}}"#;
    let answer = conn.request("POST", "/", &[], body).json();
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("duplicate key \"method\""), "{answer}");
    // Nested too, and the session did not stop.
    let body = br#"{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"message":{"role":"user","role":"agent","messageId":"m","parts":[]}}}"#;
    let answer = conn.request("POST", "/", &[], body).json();
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(session.card()["name"], "echo", "the door still serves");
}

#[test]
fn an_ipv4_peer_of_a_dual_stack_door_is_loopback_for_secrets() {
    let home = Home::new();
    let manifest = home.write_capsule(
        "vault",
        serde_json::json!({"name": "vault", "version": "1", "control": {"secrets": ["API_KEY"]}}),
        Some("#!/bin/sh\ncat\n"),
    );
    if std::net::TcpListener::bind("[::]:0").is_err() {
        return skipped(
            "hardening::an_ipv4_peer_of_a_dual_stack_door_is_loopback_for_secrets",
            "no IPv6 here: '--bind ::' cannot listen",
        );
    }
    let session = home.start(&[manifest.to_str().unwrap(), "--bind", "::"]);
    let port = session.url.rsplit(':').next().expect("host:port");
    let control = home.token(&["--control"]);
    // Over IPv4 to the dual-stack socket: the door sees ::ffff:127.0.0.1.
    let mut conn = Http::connect(&format!("127.0.0.1:{port}"));
    let auth = format!("Bearer {control}");
    let put = conn.request(
        "PUT",
        "/control/secrets/API_KEY",
        &[("Authorization", &auth)],
        b"s3cret",
    );
    assert_eq!(put.status, 200, "{}", put.text());
}

/// A home for uid 65534 under `home` (`<home>/nobody`, theirs), with a `cat` capsule in it at
/// `nobody/<name>`: the capsule's manifest path.
fn nobodys_capsule(home: &Home, name: &str) -> std::path::PathBuf {
    nobodys_capsule_running(home, name, "#!/bin/sh\ncat\n")
}

/// [`nobodys_capsule`] with `script` as its handler.
fn nobodys_capsule_running(home: &Home, name: &str, script: &str) -> std::path::PathBuf {
    let nobody = home.dir("nobody");
    let manifest = home.write_capsule(
        &format!("nobody/{name}"),
        serde_json::json!({"name": name, "version": "1"}),
        Some(script),
    );
    for path in [home.path(), &nobody, manifest.parent().unwrap(), &manifest] {
        std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
    }
    std::fs::set_permissions(
        home.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    manifest
}

/// `mur ARGS…` run as uid 65534 in `<home>/nobody`, with at most `threads` processes and
/// threads for that uid (`RLIMIT_NPROC`, which does not bind root), to its end.
fn run_as_nobody(home: &Home, threads: u64, args: &[&str]) -> common::run::Output {
    let _alone = common::alone::as_nobody();
    let nobody = home.path().join("nobody");
    let mut command = common::run::mur_command(&nobody, &nobody, args);
    command.uid(65534).gid(65534);
    // SAFETY: setrlimit(2) with a live struct, async-signal-safe; runs after setuid.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: threads,
                rlim_max: threads,
            };
            if libc::setrlimit(libc::RLIMIT_NPROC, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    common::run::run(command, Duration::from_secs(20))
}

/// Whether this test may become another uid; if not, the skip is recorded.
fn may_become_nobody(test: &str) -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        skipped(
            test,
            "not root: the limit must be set on another uid, which root alone can become",
        );
    }
    root
}

#[test]
fn a_task_whose_thread_cannot_be_spawned_fails_instead_of_hanging() {
    if !may_become_nobody(
        "hardening::a_task_whose_thread_cannot_be_spawned_fails_instead_of_hanging",
    ) {
        return;
    }
    let home = Home::new();
    let manifest = nobodys_capsule(&home, "cap");
    // The session's threads before its task's, started in this order: main, the stderr
    // writer, the door's workers (two per core, four to eight: net/server/worker.rs) and the
    // one-shot task waiter; the task's own thread is the next, and the kernel refuses it.
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    let door_workers = (2 * cores).clamp(4, 8);
    let out = run_as_nobody(
        &home,
        2 + door_workers + 1,
        &["run", manifest.to_str().unwrap(), "--task", "hi"],
    );
    out.expect_code(1);
    assert!(
        out.stderr.contains("no thread to run the task"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_launcher_without_a_thread_refuses_instead_of_panicking() {
    if !may_become_nobody("hardening::a_launcher_without_a_thread_refuses_instead_of_panicking") {
        return;
    }
    let home = Home::new();
    let entry = nobodys_capsule(&home, "lead");
    let peer = nobodys_capsule(&home, "helper");
    let roster = home.path().join("nobody/roster.json");
    std::fs::write(
        &roster,
        serde_json::json!({"members": [
            {"name": "lead", "capsule": entry, "entry": true},
            {"name": "helper", "capsule": peer},
        ]})
        .to_string(),
    )
    .unwrap();
    std::os::unix::fs::chown(&roster, Some(65534), Some(65534)).unwrap();
    // Two: the launcher and its peer's process; the thread awaiting the peer's readiness is
    // the third.
    let out = run_as_nobody(&home, 2, &["formation", roster.to_str().unwrap()]);
    out.expect_code(1);
    assert!(
        out.stderr.contains("cannot await member 'helper'"),
        "{}",
        out.stderr
    );
}

/// Leaves directories chmod-ed to `000`, nested three deep, in `$MUR_TASK_DIR` and in its
/// `out/`, then `out/` and the task directory themselves at `000`; says so only if every step
/// worked.
const LOCKING_HANDLER: &str = r#"#!/bin/sh
set -e
cat >/dev/null
cd "$MUR_TASK_DIR"
for top in . out; do
    mkdir -p "$top/locked/inner/deepest"
    echo x > "$top/locked/inner/deepest/f"
    echo y > "$top/locked/f"
    chmod 000 "$top/locked/inner/deepest" "$top/locked/inner" "$top/locked"
done
chmod 000 out .
echo locked
"#;

/// A handler running as a user modes bind (not root) leaves directories it chmod-ed to `000`,
/// nested, in its task directory and its `out/`: once the session ends, nothing of
/// `~/.murmur/tasks/<session>/` is left.
#[test]
fn directories_a_handler_chmods_to_000_do_not_outlive_the_session() {
    if !may_become_nobody("directories_a_handler_chmods_to_000_do_not_outlive_the_session") {
        return;
    }
    let home = Home::new();
    let manifest = nobodys_capsule_running(&home, "locker", LOCKING_HANDLER);
    let out = run_as_nobody(
        &home,
        4096,
        &["run", manifest.to_str().unwrap(), "--task", "hi"],
    );
    out.expect_code(0);
    assert_eq!(out.stdout, "locked\n", "{}", out.stderr);
    let tasks = home.path().join("nobody/.murmur/tasks");
    assert!(
        tasks.is_dir(),
        "the session made its task directories there"
    );
    assert_eq!(
        common::home::list_dir(&tasks),
        Vec::<String>::new(),
        "{}",
        out.stderr
    );
}
