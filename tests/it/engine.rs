//! The task engine's concurrency (issue 30): its lock is never held across I/O — a session whose
//! stderr nobody reads keeps answering, drops (and counts) its log lines, and ends on one
//! SIGTERM — and a watcher of the session is told every task, however briefly it lives.

use std::collections::BTreeMap;
use std::os::unix::fs::OpenOptionsExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::home::Home;
use crate::common::http::post;
use crate::common::session::{Session, send_body};
use crate::common::wait::{WAIT, wait_until};

/// The stream extension's URI, under which a watch frame rides in a `statusUpdate`'s metadata.
const STREAM: &str = "https://docs.murmur.nexus/reference/streaming-protocol/#murmur-stream-v1";

/// A FIFO at `path` with its read end open — so writing to it never fails with ENXIO or EPIPE —
/// and never read: the read end (keep it open), and the write end as a child's stderr.
fn unread_fifo(path: &std::path::Path) -> (std::fs::File, Stdio) {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo(3) on a NUL-terminated path we own; no other pointers.
    let rc = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo {}", path.display());
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .unwrap();
    let writer = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    (reader, Stdio::from(writer))
}

/// A `/bin/cat` capsule: every task answers its own text, and each one's start and end is a
/// line on the session's stderr.
fn cat_capsule(home: &Home) -> String {
    let manifest = json!({"name": "cat", "version": "1.0.0", "run": ["/bin/cat"]});
    let path = home.write_capsule("cat", manifest, None);
    path.to_str().unwrap().to_string()
}

/// Issue 30's wedge: with stderr a pipe nobody reads, a session used to write its task events
/// to it under the engine lock — after ~520 sends the task thread sat in a pipe write, every
/// request waited on the lock, and SIGTERMs did nothing. Now the lines it cannot write at once
/// are dropped and counted (`mur ps -v` says how many), and nothing else waits.
#[test]
fn a_session_whose_stderr_nobody_reads_keeps_answering_and_ends_on_one_sigterm() {
    let home = Home::new();
    let capsule = cat_capsule(&home);
    let (_unread, stderr) = unread_fifo(&home.dir("fifo").join("stderr"));
    let command = home.command(&["run", "--json", &capsule]);
    let mut session = Session::spawn_with_stderr(command, Some(stderr));
    let mut http = session.connect();
    // A hang guard per request: the wedged session never answered.
    http.set_read_timeout(Duration::from_secs(10));
    for n in 0..2_000 {
        let text = format!("task {n}");
        let body = send_body(&text).to_string();
        let answer = http.post("/", None, body.as_bytes()).json();
        assert_eq!(answer["result"]["status"]["state"], "completed", "{answer}");
    }
    let task = session.send(None, "last", true);
    let read = session.get_task(None, task["id"].as_str().unwrap());
    assert_eq!(read["status"]["state"], "completed", "{read}");

    // The record says how many lines were dropped, within the main loop's round (a hang
    // guard, not a timing assertion).
    let until = Instant::now() + Duration::from_secs(10);
    let said = loop {
        let out = home.mur(&["ps", "-v"]);
        out.expect_code(0);
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("stderr {}: ", session.id)))
            .map(str::to_string);
        match line {
            Some(line) => break line,
            None if Instant::now() < until => std::thread::sleep(Duration::from_millis(100)),
            None => panic!("ps -v never named the dropped lines:\n{}", out.stdout),
        }
    };
    let count: u64 = said
        .split_whitespace()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {said:?}"));
    assert!(count > 0, "{said}");
    assert!(
        said.ends_with("log lines dropped: stderr not read"),
        "{said}"
    );
    let json = home.mur(&["ps", "--json"]).json();
    assert!(
        json["capsules"][0]["log_lines_dropped"].as_u64() >= Some(count),
        "{json}"
    );

    // ONE SIGTERM ends it (a hang guard: the bar is 1 s).
    session.signal(libc::SIGTERM);
    let status = session.wait_exit(Duration::from_secs(5));
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), None);
    assert_eq!(status.code(), Some(143));
}

/// What a watcher saw of one task.
#[derive(Default, Debug)]
struct Seen {
    started: bool,
    text: String,
    response: Option<String>,
    end: Option<String>,
}

/// Read a watch stream until `count` tasks have ended; what it said of each, by task id.
fn watch_until(sse: &mut crate::common::sse::Sse, count: usize) -> BTreeMap<String, Seen> {
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    let mut ended = 0;
    while ended < count {
        let event = sse
            .next()
            .expect("the watch went on until every task ended");
        let result = &event["result"];
        if let Some(update) = result.get("statusUpdate") {
            let task = seen
                .entry(update["taskId"].as_str().unwrap().into())
                .or_default();
            let state = update["status"]["state"].as_str().unwrap();
            match &update["metadata"][STREAM] {
                Value::Null if state == "TASK_STATE_WORKING" => task.started = true,
                Value::Null => {
                    assert!(task.end.is_none(), "one end each: {update}");
                    task.end = Some(state.into());
                    ended += 1;
                }
                frame => {
                    assert_eq!(frame["frame"], "text", "{update}");
                    task.text.push_str(frame["text"].as_str().unwrap());
                }
            }
        } else if let Some(update) = result.get("artifactUpdate") {
            let task = seen
                .entry(update["taskId"].as_str().unwrap().into())
                .or_default();
            let text = update["artifact"]["parts"][0]["text"].as_str().unwrap();
            task.response = Some(text.into());
        }
    }
    seen
}

/// Issue 30: the watcher looked for new tasks every 25 ms, so a task that started and ended
/// between two looks was never shown. Now the engine tells every watcher each task's start,
/// text and end: 1,000 back-to-back instant (echo) tasks are each shown whole.
#[test]
fn a_watcher_sees_every_one_of_a_thousand_instant_tasks_with_its_text_and_end() {
    let home = Home::new();
    let session = home.start(&[]);
    let mut sse =
        crate::common::sse::Sse::open(&session.url, Some("1.0"), "murmur.WatchSession", json!({}));
    let ack = sse.next().expect("the ack");
    assert_eq!(
        ack["result"]["message"]["metadata"][STREAM]["frame"],
        "connection-ack"
    );
    // Read as the tasks run, on a thread of its own: a reader that took nothing until the end
    // would be one too far behind.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(watch_until(&mut sse, 1_000)));
    let mut http = session.connect();
    let mut sent = BTreeMap::new();
    for n in 0..1_000 {
        let text = format!("instant {n}");
        let answer = http
            .post("/", None, send_body(&text).to_string().as_bytes())
            .json();
        let id = answer["result"]["id"].as_str().expect("a task").to_string();
        sent.insert(id, text);
    }
    // A hang guard, not a timing assertion: a watch that missed a task never sees 1,000 end.
    let seen = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the watch showed 1,000 tasks ending");
    assert_eq!(seen.len(), 1_000, "every task, and none twice");
    for (id, text) in &sent {
        let task = seen
            .get(id)
            .unwrap_or_else(|| panic!("task {id} was never shown"));
        assert!(task.started, "{id}: {task:?}");
        assert_eq!(&task.text, text, "{id}: its text");
        assert_eq!(
            task.response.as_deref(),
            Some(text.as_str()),
            "{id}: its answer"
        );
        assert_eq!(
            task.end.as_deref(),
            Some("TASK_STATE_COMPLETED"),
            "{id}: its end"
        );
    }
}

/// The scheduling policy of a thread or process, `/proc/.../stat`'s 41st field (0
/// `SCHED_OTHER`, 3 `SCHED_BATCH`). The name in parentheses is the second field and may hold
/// spaces: the fields are counted after its closing parenthesis.
fn policy_of(stat_path: &str) -> String {
    let stat = std::fs::read_to_string(stat_path).unwrap_or_default();
    let after = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
    after.split(' ').nth(41 - 3).unwrap_or("").to_string()
}

/// The subreapers of session `pid` (its threads' children named `mur-subreaper`).
fn subreapers(pid: u32) -> Vec<u32> {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return vec![];
    };
    threads
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|children| {
            children
                .split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/comm"))
                .is_ok_and(|name| name.trim() == "mur-subreaper")
        })
        .collect()
}

/// Task threads run `SCHED_BATCH`, so a handler waking one (its output, its end) is not
/// preempted by it; handlers keep the session's class — a queued task's too, when the task
/// thread that starts it must clone it a new subreaper (the last one was killed).
#[test]
fn task_threads_yield_to_handlers_and_every_handler_keeps_the_sessions_class() {
    let home = Home::new();
    let state = home.dir("state");
    // The first handler waits to have its subreaper killed; each other prints its class.
    let script = format!(
        "#!/bin/sh\ncat >/dev/null\nif mkdir {}/first 2>/dev/null; then exec sleep 5; fi\n\
         sed 's/.*) //' /proc/$$/stat | cut -d' ' -f39\n",
        state.display()
    );
    let manifest = json!({"name": "policy", "version": "1.0.0",
        "lifecycle": {"concurrency": 1, "queue_depth": 8}});
    let capsule = home.write_capsule("policy", manifest, Some(&script));
    let session = home.start(&[capsule.to_str().unwrap()]);
    let url = session.url.clone();
    let answers: Vec<Value> = std::thread::scope(|scope| {
        let first = scope.spawn(|| post(&url, None, &send_body("x")).json()["result"].clone());
        wait_until(WAIT, "the first handler running", || {
            state.join("first").exists()
        });
        // The two others queue, and the first's task thread starts them.
        let sends: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| post(&url, None, &send_body("x")).json()["result"].clone()))
            .collect();
        wait_until(WAIT, "one subreaper", || subreapers(session.pid).len() == 1);
        // SAFETY: kill(2) on the session's own subreaper, found just above.
        let killed = unsafe { libc::kill(subreapers(session.pid)[0] as i32, libc::SIGKILL) };
        assert_eq!(killed, 0);
        let first = first.join().unwrap();
        assert_ne!(first["status"]["state"], "completed", "{first}");
        sends.into_iter().map(|send| send.join().unwrap()).collect()
    });
    let ours = policy_of("/proc/self/stat");
    assert!(!ours.is_empty());
    for answer in &answers {
        assert_eq!(answer["status"]["state"], "completed", "{answer}");
        let text = answer["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap_or("");
        assert_eq!(
            text.trim(),
            ours,
            "a handler in the session's class: {answer}"
        );
    }
    let task_threads: Vec<String> = std::fs::read_dir(format!("/proc/{}/task", session.pid))
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|name| name.trim() == "task")
        })
        .map(|t| policy_of(&t.path().join("stat").to_string_lossy()))
        .collect();
    assert!(
        !task_threads.is_empty(),
        "task threads linger after their turns"
    );
    let batch = if ours == "0" { "3" } else { ours.as_str() };
    assert!(task_threads.iter().all(|p| p == batch), "{task_threads:?}");
}
