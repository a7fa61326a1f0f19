//! Every process attributed to its task, at any depth, and nothing else ever touched (DESIGN.md
//! §4, §5): what a task's end, a cancel or the session's end does to the processes around it.
//! Each test fails on a session that sweeps its own orphans instead of each task's.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use common::home::Home;
use common::http::post;
use common::process::{alive, children_of, processes_with_env};
use common::run::mur_bin;
use common::session::{Session, send_body, send_params, state};
use common::skip::skipped;
use common::wait::{wait_for, wait_until};

const WAIT: Duration = Duration::from_secs(20);

/// A `sleep` argument no other process has: `seconds`, then a fraction unique to this test
/// process and `tag`.
fn marker(seconds: u32, tag: u32) -> String {
    format!("{seconds}.{}{tag}", std::process::id())
}

/// The live `sleep MARKER` processes. Exactly that command line: a shell that starts them holds
/// the marker in its script, and so does each of its forks until it has exec'd `sleep`.
fn with_marker(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let args: Vec<&[u8]> = c.split(|&b| b == 0).collect();
                args.first().is_some_and(|a| a.ends_with(b"sleep"))
                    && args.get(1) == Some(&marker.as_bytes())
            })
        })
        .filter(|&pid| alive(pid))
        .collect()
}

/// The one process holding `marker`, once it exists.
fn one_with(marker: &str) -> u32 {
    wait_for(WAIT, &format!("a process with {marker}"), || {
        with_marker(marker).first().copied()
    })
}

fn kill(pid: u32, signal: i32) {
    // SAFETY: kill(2) on a pid this test found and still holds (or that is gone: ESRCH); no
    // pointers.
    unsafe { libc::kill(pid as libc::pid_t, signal) };
}

/// A capsule named `name` whose handler is `script`, with `lifecycle` as given.
fn capsule(home: &Home, name: &str, lifecycle: serde_json::Value, script: &str) -> PathBuf {
    let manifest = json!({"name": name, "version": "1", "lifecycle": lifecycle});
    home.write_capsule(name, manifest, Some(script))
}

/// `sh -c SCRIPT mur CAPSULE` under `home`'s environment: a wrapper that ends in `exec mur`.
fn wrapper(home: &Home, script: &str, capsule: &Path) -> Command {
    let mut command = Command::new("sh");
    command
        .args(["-c", script, mur_bin()])
        .arg(capsule)
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .current_dir(home.path());
    command
}

/// Whether `pid` is gone from `/proc` altogether: not even a zombie waiting to be reaped.
fn reaped(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn a_wrappers_sidecar_survives_every_task_and_the_session_and_is_reaped_when_it_exits() {
    let home = Home::new();
    let cap = capsule(&home, "quick", json!({}), "#!/bin/sh\ncat\n");
    let (long, short) = (marker(300, 1), marker(1, 2));
    // `sidecar & exec mur run`: a container entrypoint, an ExecStart= script.
    let script = format!("sleep {long} & sleep {short} & exec \"$0\" run --json \"$1\"");
    let mut session = Session::spawn(wrapper(&home, &script, &cap));
    let sidecar = one_with(&long);
    let passing = one_with(&short);
    for n in 0..3 {
        let task = session.send(None, &format!("task {n}"), true);
        assert_eq!(state(&task), "completed", "{task}");
        assert!(
            alive(sidecar),
            "the sidecar {sidecar} was ended by task {n}'s end"
        );
    }
    // The short one exits on its own: its parent — the session — reaps it, never leaving a
    // zombie behind.
    wait_until(
        WAIT,
        "the exited sidecar to be reaped by the session",
        || reaped(passing),
    );
    session.signal(libc::SIGTERM);
    session.wait_exit(WAIT);
    assert!(
        alive(sidecar),
        "the sidecar {sidecar} was ended by the session's end"
    );
    kill(sidecar, libc::SIGKILL);
}

#[test]
fn as_pid_1_of_a_namespace_mur_never_touches_an_orphan_it_adopts_and_reaps_it_when_it_exits() {
    // SAFETY: geteuid takes no argument.
    if unsafe { libc::geteuid() } != 0 {
        return skipped(
            "as_pid_1_of_a_namespace_mur_never_touches_an_orphan_it_adopts_and_reaps_it_when_it_exits",
            "a PID namespace (unshare -fp) needs root",
        );
    }
    let home = Home::new();
    let cap = capsule(&home, "quick", json!({}), "#!/bin/sh\ncat\n");
    let mut command = Command::new("unshare");
    command
        .args([
            "--fork",
            "--pid",
            "--mount-proc",
            mur_bin(),
            "run",
            "--json",
        ])
        .arg(&cap)
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .current_dir(home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut unshare = command.spawn().expect("unshare");
    let mut line = String::new();
    BufReader::new(unshare.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line).expect(&line);
    assert_eq!(ready["pid"], 1, "mur is pid 1 of its namespace: {ready}");
    let url = ready["url"].as_str().unwrap().to_string();
    // Its pid out here: unshare's one child.
    let mur = wait_for(WAIT, "unshare's child", || {
        children_of(unshare.id()).first().copied()
    });
    // A process entered into the namespace that orphans two sleeps there: both are adopted by
    // the namespace's init, mur.
    let (long, short) = (marker(300, 3), marker(2, 4));
    let entered = Command::new("nsenter")
        .args(["--target", &mur.to_string(), "--pid", "--mount", "--"])
        .args([
            "sh",
            "-c",
            &format!("sleep {long} & sleep {short} & exit 0"),
        ])
        .status()
        .expect("nsenter");
    assert!(entered.success());
    let (orphan, passing) = (one_with(&long), one_with(&short));
    assert!(children_of(mur).contains(&orphan), "adopted by mur");
    assert!(children_of(mur).contains(&passing), "adopted by mur");
    for n in 0..3 {
        let answer = post(&url, None, &send_body(&format!("task {n}"))).json();
        assert_eq!(state(&answer["result"]), "completed", "{answer}");
        assert!(
            alive(orphan),
            "the adopted orphan was ended by task {n}'s end"
        );
    }
    // Reaped: no child of mur holds that pid any more (a zombie still names its parent; a
    // number handed on since would name another parent).
    wait_until(WAIT, "the exited orphan to be reaped by mur", || {
        !children_of(mur).contains(&passing)
    });
    assert!(alive(orphan));
    kill(orphan, libc::SIGKILL);
    kill(mur, libc::SIGTERM);
    let _ = unshare.wait();
}

#[test]
fn a_tasks_helper_outlives_another_tasks_end_and_dies_with_its_own() {
    let home = Home::new();
    let helper = marker(300, 5);
    let script = format!(
        "#!/bin/sh\nread -r what\ncase $what in\n\
         A) setsid -f sleep {helper}; touch a.started\n   \
            while [ ! -e a.go ]; do sleep 0.01; done; echo A ;;\n\
         B) echo B ;;\nesac\n"
    );
    let cap = capsule(&home, "pair", json!({"concurrency": 2}), &script);
    // A workdir of its own: its sandbox lets it add files there (the home holds ~/.murmur).
    let work = home.dir("work");
    let session = home.start(&[cap.to_str().unwrap(), "--workdir", work.to_str().unwrap()]);
    let a = session.send(None, "A", false);
    let a_id = a["id"].as_str().unwrap().to_string();
    wait_until(WAIT, "task A to start its helper", || {
        work.join("a.started").exists()
    });
    let helper_pid = one_with(&helper);
    let b = session.send(None, "B", true);
    assert_eq!(state(&b), "completed", "{b}");
    assert!(
        alive(helper_pid),
        "task B's end killed task A's helper {helper_pid}"
    );
    std::fs::write(work.join("a.go"), "").unwrap();
    let a = session.wait_task(None, &a_id, WAIT);
    assert_eq!(state(&a), "completed", "{a}");
    // No waiting: a task is answered once everything it started is gone.
    assert_eq!(
        with_marker(&helper),
        Vec::<u32>::new(),
        "A's helper outlived A"
    );
}

/// A handler that leaves a chain of `depth` processes, each `setsid` and the parent of the next,
/// then (with `then`) goes on.
fn chain_handler(depth: u32, then: &str) -> String {
    format!(
        "#!/bin/sh\ncat > /dev/null\n\
         printf '%s\\n' 'n=$1' 'if [ \"$n\" -gt 0 ]; then setsid sh \"$0\" $((n-1)) & fi' \
         'exec sleep 1000' > \"$MUR_TASK_DIR/chain.sh\"\n\
         setsid sh \"$MUR_TASK_DIR/chain.sh\" {depth} &\n\
         while [ $(grep -l \"MUR_TASK_ID=$MUR_TASK_ID\" /proc/[0-9]*/environ 2>/dev/null | wc -l) \
         -lt {} ]; do sleep 0.05; done\n{then}\n",
        depth + 2
    )
}

#[test]
fn a_200_deep_setsid_chain_is_gone_when_its_task_is_answered() {
    let home = Home::new();
    let cap = capsule(&home, "chain", json!({}), &chain_handler(200, "echo built"));
    let session = home.start(&[cap.to_str().unwrap()]);
    let task = session.send(None, "go", true);
    assert_eq!(state(&task), "completed", "{task}");
    let left = processes_with_env(&format!("MUR_SESSION_ID={}", session.id));
    assert!(
        left.is_empty(),
        "{} of the chain outlived its task",
        left.len()
    );
}

#[test]
fn a_sigkilled_session_leaves_nothing_of_a_deep_chain() {
    let home = Home::new();
    let handler = chain_handler(50, "touch built; exec sleep 1000");
    let cap = capsule(&home, "chain", json!({}), &handler);
    let work = home.dir("work");
    let mut session = home.start(&[cap.to_str().unwrap(), "--workdir", work.to_str().unwrap()]);
    let task = session.send(None, "go", false);
    assert_eq!(state(&task), "working", "{task}");
    wait_until(WAIT, "the chain to be built", || {
        work.join("built").exists()
    });
    let env = format!("MUR_SESSION_ID={}", session.id);
    // Counted until all are seen: an environment read while its process execs can be missing.
    wait_until(WAIT, "the chain's 52 processes to be seen", || {
        processes_with_env(&env).len() >= 52
    });
    session.signal(libc::SIGKILL);
    session.wait_exit(WAIT);
    // The session ran no teardown: each task's subreaper saw its control socket close.
    wait_until(
        Duration::from_secs(5),
        "the chain to die with its session",
        || processes_with_env(&env).is_empty(),
    );
}

#[test]
fn a_cancel_that_races_a_question_never_reaches_the_next_turn() {
    let home = Home::new();
    // The text is how long to work before asking: 0 to 19 ms.
    let script = "#!/bin/sh\nread -r t\nsleep \"$t\"\necho 'and then?'\nexit 10\n";
    let cap = capsule(&home, "asker", json!({}), script);
    let session = home.start(&[cap.to_str().unwrap()]);
    let tries: u32 = std::env::var("MUR_CANCEL_RACE_TRIES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let began = Instant::now();
    for n in 0..tries {
        let delay = format!("0.{:03}", n % 20);
        let task = session.call(None, "message/send", send_params(&[&delay], false));
        let id = task["id"].as_str().unwrap().to_string();
        std::thread::sleep(Duration::from_millis(u64::from(n % 23)));
        let canceled = session.call(None, "tasks/cancel", json!({"id": id}));
        // Answered once the turn is over, and canceled: whether the handler had asked its
        // question yet or not, the cancel was taken.
        assert_eq!(state(&canceled), "canceled", "try {n}: {canceled}");
        let read = session.get_task(None, &id);
        assert_eq!(state(&read), "canceled", "try {n}: {read}");
        // ... so no next turn can start, let alone be killed by the old cancel.
        let mut next = send_params(&["0"], true);
        next["message"]["taskId"] = json!(id);
        let refused = session.rpc(None, "message/send", next);
        assert!(refused.get("error").is_some(), "try {n}: {refused}");
    }
    eprintln!("{tries} cancel races in {:?}", began.elapsed());
}
