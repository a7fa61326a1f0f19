//! A session's log and its task events (DESIGN.md §5, §6): a handler's stderr in
//! `~/.murmur/logs/<session>.log`, tagged by task, shown by `mur logs` (`-f`, `--task`, `-n`);
//! one line per task event on the session's own stderr; a failure's stderr never in a caller's
//! answer.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use common::{
    home::{Home, mode_of},
    session::{state, status_text},
    wait::wait_until,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);

const NOISY: &str = "#!/bin/sh\nread -r text\necho \"err: $text\" >&2\n[ \"$text\" = fail ] && { echo 'secret traceback /home/x' >&2; exit 3; }\nprintf 'no newline' >&2\necho \"ok $text\"\n";

fn noisy(home: &Home) -> String {
    let manifest = home.write_capsule(
        "noisy",
        json!({"name": "noisy", "version": "1"}),
        Some(NOISY),
    );
    manifest.to_str().unwrap().to_string()
}

#[test]
fn handler_stderr_reaches_the_log_tagged_by_task_and_events_reach_stderr() {
    let home = Home::new();
    let manifest = noisy(&home);
    let session = home.start(&[&manifest]);
    let task = session.send(None, "hello", true);
    assert_eq!(state(&task), "completed", "{task}");
    let id = task["id"].as_str().unwrap();

    let logs = home.murmur().join("logs");
    let file = logs.join(format!("{}.log", session.id));
    assert_eq!(mode_of(&logs), 0o700);
    assert_eq!(mode_of(&file), 0o600);

    // Each line starts with its task, as docker's logs print no time unless asked (-t).
    let plain = home.mur(&["logs", &session.id]);
    plain.expect_code(0);
    assert!(
        plain
            .stdout
            .starts_with(&format!("{id} mur: started turn 1\n")),
        "{}",
        plain.stdout
    );
    let out = home.mur(&["logs", "-t", &session.id]);
    out.expect_code(0);
    assert!(
        out.stdout.starts_with("20"),
        "with -t each line starts with its time: {}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(" {id} stderr: err: hello\n")),
        "{}",
        out.stdout
    );
    // A last line without its newline is still a line once the handler is done.
    assert!(
        out.stdout.contains(&format!(" {id} stderr: no newline\n")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(" {id} mur: started turn 1\n")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(" {id} mur: completed in ")),
        "{}",
        out.stdout
    );

    wait_until(WAIT, "the end event on stderr", || {
        session
            .stderr()
            .contains(&format!("mur run: {id} completed in "))
    });
    let stderr = session.stderr();
    let started = stderr.find(&format!("mur run: {id} started turn 1"));
    let ended = stderr.find(&format!("mur run: {id} completed in "));
    assert!(
        started.is_some() && started < ended,
        "the start, then the end: {stderr}"
    );
    // Never message contents on the session's stderr: neither the task nor the handler's words.
    assert!(!stderr.contains("hello"), "{stderr}");
}

/// A turn's start line waits for no wake-up of its own (it goes out with the end's), nor its own
/// write to the log (it is written with the next line), but a turn that runs on has it said on
/// stderr and in `mur logs` while it runs: its watcher's next look flushes both.
#[test]
fn a_long_turns_start_is_said_on_stderr_and_in_the_log_while_it_runs() {
    let home = Home::new();
    let manifest = home.write_capsule(
        "slow",
        json!({"name": "slow", "version": "1"}),
        Some("#!/bin/sh\nread -r text\nsleep 30\n"),
    );
    let session = home.start(&[manifest.to_str().unwrap()]);
    let task = session.send(None, "x", false);
    let id = task["id"].as_str().unwrap();
    wait_until(WAIT, "the start line on stderr", || {
        session
            .stderr()
            .contains(&format!("mur run: {id} started turn 1"))
    });
    wait_until(WAIT, "the start line in the log", || {
        home.mur(&["logs", &session.id])
            .stdout
            .contains(&format!("{id} mur: started turn 1\n"))
    });
    let now = session.get_task(None, id);
    assert_eq!(state(&now), "working", "said while the turn runs: {now}");
}

#[test]
fn a_failed_tasks_stderr_is_in_the_log_not_in_the_answer() {
    let home = Home::new();
    let manifest = noisy(&home);
    let session = home.start(&[&manifest]);
    let ok = session.send(None, "fine", true);
    let task = session.send(None, "fail", true);
    assert_eq!(state(&task), "failed", "{task}");
    let message = status_text(&task);
    assert!(message.contains("exited with code 3"), "{message}");
    assert!(
        !message.contains("traceback"),
        "the caller gets no stderr: {message}"
    );
    let id = task["id"].as_str().unwrap();

    let out = home.mur(&["logs", "@1", "--task", id]);
    out.expect_code(0);
    assert!(
        out.stdout.contains("stderr: secret traceback /home/x"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("mur: failed in ") && out.stdout.contains("exited with code 3"),
        "{}",
        out.stdout
    );
    let other = ok["id"].as_str().unwrap();
    assert!(
        !out.stdout.contains(other),
        "--task keeps to its task: {}",
        out.stdout
    );
    // By suffix, and the last N lines.
    let suffix = &id[id.len() - 6..];
    let last = home.mur(&["logs", "@1", "--task", suffix, "-n", "1"]);
    last.expect_code(0);
    assert_eq!(last.stdout.lines().count(), 1, "{}", last.stdout);
    assert!(last.stdout.contains("mur: failed in "), "{}", last.stdout);
    // --tail is -n by docker's name; --since a duration ago or a time.
    let tail = home.mur(&["logs", "@1", "--task", suffix, "--tail", "1"]);
    assert_eq!(tail.stdout, last.stdout);
    let recent = home.mur(&["logs", "@1", "--since", "10m"]);
    recent.expect_code(0);
    assert!(
        recent.stdout.contains("mur: failed in "),
        "{}",
        recent.stdout
    );
    let future = home.mur(&["logs", "@1", "--since", "2999-01-01T00:00:00Z"]);
    future.expect_code(0);
    assert_eq!(future.stdout, "", "nothing is that recent");
    let bad = home.mur(&["logs", "@1", "--since", "soon"]);
    bad.expect_code(2);
    assert!(bad.stderr.contains("--since wants"), "{}", bad.stderr);

    wait_until(WAIT, "the failure event on stderr", || {
        session
            .stderr()
            .contains(&format!("mur run: {id} failed in "))
    });
    assert!(
        !session.stderr().contains("traceback"),
        "{}",
        session.stderr()
    );
}

#[test]
fn follow_prints_new_lines_and_ends_with_the_session() {
    let home = Home::new();
    let manifest = noisy(&home);
    let mut session = home.start(&[&manifest]);
    let mut follower = home.command(&["logs", "-f", "@1"]);
    follower.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = follower.spawn().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in reader.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    session.send(None, "later", true);
    let seen = loop {
        let line = rx.recv_timeout(WAIT).expect("a followed line");
        if line.contains("stderr: err: later") {
            break line;
        }
    };
    assert!(seen.starts_with("tsk_"), "{seen}");
    session.signal(libc::SIGTERM);
    session.wait_exit(WAIT);
    let status = common::run::wait_child(&mut child, WAIT).expect("logs -f ends with the session");
    assert_eq!(status.code(), Some(0));
    // The log stays with the ended session.
    assert!(
        home.murmur()
            .join("logs")
            .join(format!("{}.log", session.id))
            .exists()
    );
}

#[test]
fn one_shot_failures_show_the_operator_the_handlers_stderr() {
    let home = Home::new();
    let manifest = noisy(&home);
    let out = home.mur(&["run", &manifest, "--task", "fail"]);
    out.expect_code(1);
    assert!(out.stderr.contains("exited with code 3"), "{}", out.stderr);
    assert!(out.stderr.contains("secret traceback"), "{}", out.stderr);
    // A one-shot task says no start/end lines: its stderr is a terminal or a cron mail.
    assert!(!out.stderr.contains("started turn"), "{}", out.stderr);
}

#[test]
fn logs_usage_and_unknown_addresses() {
    let home = Home::new();
    home.mur(&["logs"]).expect_code(2);
    home.mur(&["logs", "@1", "-n", "x"]).expect_code(2);
    let out = home.mur(&["logs", "@1"]);
    out.expect_code(1);
    assert!(out.stderr.starts_with("mur logs: "), "{}", out.stderr);
}
