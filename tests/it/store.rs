//! A named session's task store (issue 34): `mur run --name NAME` journals every task's start
//! and end in `~/.murmur/store/NAME/journal`, and a session started again under that name reads
//! it before its door opens — completed tasks with their exact answers, a task that was running
//! `failed` with a note, a torn tail cut off with a warning, a corrupt journal moved aside and
//! said — whatever killed the session before (SIGKILL here).

use crate::common;

use std::fs;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{
    home::{Home, mode_of},
    http::http,
    session::{Session, artifact_text, send_body, state, status_text},
    wait::{wait_for, wait_until},
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);
/// What a task running when its session died says once it is read back.
const INTERRUPTED: &str = "the session ended while this task ran";

/// The store's directory for instance name `name`.
fn store_dir(home: &Home, name: &str) -> PathBuf {
    home.murmur().join("store").join(name)
}

/// `mur run --json ARGS…` under instance name `name`, started once the last holder of the name
/// has let it go (a SIGKILLed session's lock goes with its last descriptor, which a subreaper
/// may hold a moment longer).
fn start_named(home: &Home, name: &str, args: &[&str]) -> Session {
    released(home, name);
    let mut full = vec!["--name", name];
    full.extend_from_slice(args);
    home.start(&full)
}

/// Once the last holder of instance name `name` has let it go.
fn released(home: &Home, name: &str) {
    let claim = home.running().join(format!("{name}.name"));
    wait_until(WAIT, "the name's claim to be released", || {
        let Ok(file) = fs::File::open(&claim) else {
            return true;
        };
        // SAFETY: flock on a descriptor `file` owns; released when it closes below.
        unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
    });
}

/// What `session` has said on stderr, once it has said `what` (its stderr is written by a
/// thread of its own, maybe after the readiness line).
fn said(session: &Session, what: &str) -> String {
    wait_for(WAIT, &format!("{what:?} on stderr"), || {
        let said = session.stderr();
        said.contains(what).then_some(said)
    })
}

/// The task `text` sent (blocking) to a session under `name`, SIGKILLed once it answered.
fn answered_then_killed(home: &Home, name: &str, text: &str) -> Value {
    let session = start_named(home, name, &[]);
    let task = session.send(None, text, true);
    kill(session);
    task
}

/// Assert `text` holds each of `needed`.
fn says_all(text: &str, needed: &[&str]) {
    for needed in needed {
        assert!(text.contains(needed), "{needed:?} not in: {text}");
    }
}

/// SIGKILL `session` and reap it.
fn kill(mut session: Session) -> String {
    session.signal(libc::SIGKILL);
    session.wait_exit(WAIT);
    session.stderr()
}

/// A capsule whose handler answers `ok TEXT`, or, for `sleep`, sleeps for a minute first.
fn capsule(home: &Home) -> String {
    let script = "#!/bin/sh\nread -r text\n[ \"$text\" = sleep ] && sleep 60\necho \"ok $text\"\n";
    let manifest = home.write_capsule(
        "answers",
        json!({"name": "answers", "version": "1",
               "lifecycle": {"concurrency": 8, "task_acceptance": "queue", "queue_depth": 64}}),
        Some(script),
    );
    manifest.to_str().unwrap().to_string()
}

#[test]
fn completed_tasks_read_back_exactly_after_a_sigkill_and_a_restart() {
    let home = Home::new();
    let session = start_named(&home, "keeper", &[]);
    let sent: Vec<(String, String)> = (0..5)
        .map(|n| {
            let task = session.send(None, &format!("answer {n}"), true);
            assert_eq!(state(&task), "completed", "{task}");
            (
                task["id"].as_str().unwrap().to_string(),
                artifact_text(&task),
            )
        })
        .collect();
    let first = session.get_task(None, &sent[0].0);
    kill(session);

    let again = start_named(&home, "keeper", &[]);
    for (n, (id, answer)) in sent.iter().enumerate() {
        let task = again.get_task(None, id);
        assert_eq!(state(&task), "completed", "{task}");
        assert_eq!(&artifact_text(&task), answer);
        assert_eq!(answer, &format!("answer {n}"));
        let v1 = again.call(None, "GetTask", json!({"id": id}));
        assert_eq!(v1["id"], id.as_str(), "{v1}");
    }
    assert_eq!(
        again.get_task(None, &sent[0].0),
        first,
        "the very task, byte for byte"
    );
    // Listing: every task from before, and a new one first (arrival numbers go on).
    let new = again.send(None, "after", true);
    let listed = again.call(None, "ListTasks", json!({}));
    assert_eq!(listed["totalSize"], 6, "{listed}");
    assert_eq!(listed["tasks"][0]["id"], new["id"], "{listed}");
    assert_eq!(listed["tasks"][5]["id"], sent[0].0.as_str(), "{listed}");
    again.stderr_saying("5 task(s) restored");

    // A session without a name keeps nothing on disk.
    let unnamed = home.start(&[]);
    assert_eq!(
        fs::read_dir(home.murmur().join("store")).unwrap().count(),
        1
    );
    assert!(matches!(
        unnamed.rpc(None, "tasks/get", json!({"id": sent[0].0}))["error"]["code"].as_i64(),
        Some(-32001)
    ));
}

#[test]
fn the_store_is_a_0600_file_in_0700_directories_and_a_link_is_never_followed() {
    let home = Home::new();
    let session = start_named(&home, "modes", &[]);
    session.send(None, "x", true);
    let dir = store_dir(&home, "modes");
    assert_eq!(mode_of(&home.murmur().join("store")), 0o700);
    assert_eq!(mode_of(&dir), 0o700);
    assert_eq!(mode_of(&dir.join("journal")), 0o600);
    kill(session);

    // The journal's place taken by a link to a file elsewhere: that file is never written.
    let elsewhere = home.path().join("elsewhere");
    fs::write(&elsewhere, b"not yours").unwrap();
    fs::remove_file(dir.join("journal")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.join("journal")).unwrap();
    let again = start_named(&home, "modes", &[]);
    again.send(None, "y", true);
    assert_eq!(fs::read(&elsewhere).unwrap(), b"not yours");
    let meta = fs::symlink_metadata(dir.join("journal")).unwrap();
    assert!(meta.file_type().is_file(), "the journal is a file again");
}

#[test]
fn a_task_running_when_its_session_died_comes_back_failed_with_a_note() {
    let home = Home::new();
    let manifest = capsule(&home);
    let session = start_named(&home, "runner", &[&manifest]);
    let done = session.send(None, "quick", true);
    let running = session.send(None, "sleep", false);
    let id = running["id"].as_str().unwrap().to_string();
    wait_until(WAIT, "the task to run", || {
        state(&session.get_task(None, &id)) == "working"
    });
    kill(session);

    let again = start_named(&home, "runner", &[&manifest]);
    let task = again.get_task(None, &id);
    assert_eq!(state(&task), "failed", "{task}");
    assert!(status_text(&task).contains(INTERRUPTED), "{task}");
    assert_eq!(task["history"][0]["parts"][0]["text"], "sleep", "{task}");
    let quick = again.get_task(None, done["id"].as_str().unwrap());
    assert_eq!(artifact_text(&quick), "ok quick");
    let said = again.stderr();
    assert!(said.contains("1 of them failed"), "{said}");
    // A resubscribe of the ended task is answered as any ended task's is: not a stream.
    let answer = again
        .rpc_http(None, "tasks/resubscribe", json!({"id": id}))
        .text();
    assert!(answer.contains("has ended (failed)"), "{answer}");
}

#[test]
fn with_retry_interrupted_a_task_running_when_its_session_died_runs_again() {
    let home = Home::new();
    // In a directory of its own: a handler may not add to the workdir that holds the home.
    let marker = home.dir("marks").join("ran-once");
    let script = format!(
        "#!/bin/sh\nread -r text\nif [ ! -e {m} ]; then : > {m}; sleep 60; fi\necho \"again $text\"\n",
        m = marker.display()
    );
    let manifest = home.write_capsule(
        "retrier",
        json!({"name": "retrier", "version": "1", "lifecycle": {"retry_interrupted": true}}),
        Some(&script),
    );
    let manifest = manifest.to_str().unwrap();
    let session = start_named(&home, "retrier", &[manifest]);
    let id = session.send(None, "once more", false)["id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_until(WAIT, "the first run to begin", || marker.exists());
    kill(session);

    let again = start_named(&home, "retrier", &[manifest]);
    let task = again.wait_task(None, &id, WAIT);
    assert_eq!(state(&task), "completed", "{task}");
    assert_eq!(artifact_text(&task), "again once more");
    again.stderr_saying("queued again");
    kill(again);
    // Ended now: a third start finds it completed, not running.
    let third = start_named(&home, "retrier", &[manifest]);
    assert_eq!(state(&third.get_task(None, &id)), "completed");
}

#[test]
fn the_journal_is_compacted_to_its_bound_while_the_session_runs() {
    let home = Home::new();
    let session = start_named(&home, "bounded", &[]);
    let journal = store_dir(&home, "bounded").join("journal");
    let mut door = session.connect();
    let mut send = |n: usize| {
        let answer = door.post(
            "/",
            None,
            send_body(&format!("task {n}")).to_string().as_bytes(),
        );
        answer.json()["result"]["id"].as_str().unwrap().to_string()
    };
    let first = send(0);
    (1..1000).for_each(|n| {
        send(n);
    });
    let thousand = fs::metadata(&journal).unwrap().len();
    let last = (1000..4100).map(&mut send).last().unwrap();
    // Past four times its bound, the writer rewrites it to the newest 1,000 (and what came
    // since).
    wait_until(WAIT, "the journal to be compacted", || {
        fs::metadata(&journal).unwrap().len() < thousand * 3 / 2
    });
    kill(session);
    let again = start_named(&home, "bounded", &[]);
    let listed = again.call(None, "ListTasks", json!({}));
    assert_eq!(listed["totalSize"], 1000, "{listed}");
    assert_eq!(listed["tasks"][0]["id"], last.as_str());
    assert_eq!(artifact_text(&again.get_task(None, &last)), "task 4099");
    let gone = again.rpc(None, "tasks/get", json!({"id": first}));
    assert!(gone.get("error").is_some(), "the oldest went: {gone}");
    assert!(!again.stderr().contains("compacted"), "{}", again.stderr());
}

#[test]
fn a_torn_tail_is_cut_off_with_a_warning() {
    let home = Home::new();
    let session = start_named(&home, "torn", &[]);
    let kept = session.send(None, "kept", true);
    kill(session);
    let journal = store_dir(&home, "torn").join("journal");
    let whole = fs::read(&journal).unwrap();
    // The start of an entry whose length runs past the end: a write cut short.
    let mut torn = whole.clone();
    torn.extend_from_slice(&200u32.to_le_bytes());
    torn.extend_from_slice(&[7; 50]);
    fs::write(&journal, &torn).unwrap();

    let again = start_named(&home, "torn", &[]);
    let said = again.stderr();
    assert!(said.contains("torn") && said.contains("cut off"), "{said}");
    assert!(!said.contains("corrupt"), "{said}");
    assert_eq!(
        fs::read(&journal).unwrap(),
        whole,
        "cut back to its whole entries"
    );
    let task = again.get_task(None, kept["id"].as_str().unwrap());
    assert_eq!(artifact_text(&task), "kept");
}

#[test]
fn a_corrupt_store_is_moved_aside_said_and_the_start_goes_on() {
    let home = Home::new();
    let session = start_named(&home, "broken", &[]);
    let first = session.send(None, "first", true);
    let second = session.send(None, "second", true);
    kill(session);
    let dir = store_dir(&home, "broken");
    let mut bytes = fs::read(dir.join("journal")).unwrap();
    // A byte of the last entry's body flipped: the first entry still reads.
    let last = bytes.len() - 3;
    let mut damaged = bytes.clone();
    damaged.truncate(last);
    damaged.extend_from_slice(b"zz}");
    damaged.extend_from_slice(b"and more after it");
    fs::write(dir.join("journal"), &damaged).unwrap();

    let again = start_named(&home, "broken", &[]);
    let said = again.stderr_saying("moved aside");
    assert!(said.contains("corrupt"), "{said}");
    let aside: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("journal.corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(fs::read(dir.join(&aside[0])).unwrap(), damaged);
    let task = again.get_task(None, first["id"].as_str().unwrap());
    assert_eq!(artifact_text(&task), "first");
    let gone = again.rpc(None, "tasks/get", json!({"id": second["id"]}));
    assert!(gone.get("error").is_some(), "{gone}");
    assert_eq!(state(&again.send(None, "on", true)), "completed");
    kill(again);

    // Not a journal at all: moved aside too, and the start goes on with nothing.
    bytes.clear();
    bytes.extend_from_slice(b"{\"not\": \"a journal\"}");
    fs::write(dir.join("journal"), &bytes).unwrap();
    let third = start_named(&home, "broken", &[]);
    third.stderr_saying("corrupt");
    let listed = third.call(None, "ListTasks", json!({}));
    assert_eq!(listed["totalSize"], 0, "{listed}");
}

/// xorshift64, seeded from the clock (printed, for a replay of the plan).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The answer to a JSON-RPC call, or `None` when the door is gone (the session was killed).
fn call(url: &str, method: &str, params: Value) -> Option<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let answer = http(url, "POST", "/", None, body.to_string().as_bytes()).ok()?;
    serde_json::from_slice::<Value>(&answer.body)
        .ok()?
        .get("result")
        .cloned()
}

/// One client's tasks of one life: each sent without blocking, then read until it ends or the
/// door goes; its id, text and answer (when it was seen completed).
fn client(
    url: &str,
    life: usize,
    tasks: impl Iterator<Item = usize>,
) -> Vec<(String, String, Option<String>)> {
    let mut mine = Vec::new();
    for n in tasks {
        let text = format!("life {life} task {n}");
        let params = json!({"message": {"kind": "message", "role": "user",
            "messageId": "m", "parts": [{"kind": "text", "text": text}]},
            "configuration": {"blocking": false}});
        let Some(task) = call(url, "message/send", params) else {
            break;
        };
        let id = task["id"].as_str().unwrap().to_string();
        let ended = wait_for(WAIT, "a final state or the door gone", || {
            match call(url, "tasks/get", json!({"id": id})) {
                None => Some(None),
                Some(t) if state(&t) == "completed" => Some(Some(t)),
                Some(_) => None,
            }
        });
        let answer = ended.as_ref().map(artifact_text);
        let gone = answer.is_none();
        mine.push((id, text, answer));
        if gone {
            break;
        }
    }
    mine
}

#[test]
fn chaos_a_thousand_tasks_and_twenty_sigkills_lose_no_completed_answer() {
    const TASKS: usize = 1000;
    const KILLS: usize = 20;
    let home = Home::new();
    let manifest = capsule(&home);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("store chaos seed {seed}");
    let mut rng = Rng(seed);
    // Every task id a client was given, and the answer of each it saw completed.
    let mut known: Vec<(String, String)> = Vec::new();
    let mut completed: Vec<(String, String)> = Vec::new();
    let started = Instant::now();
    let mut said = Vec::new();
    // Twenty lives struck at a random moment, then one more that sends what is left and ends
    // in order; each life sends its share of what is left.
    for life in 0..=KILLS {
        let session = start_named(&home, "chaos", &[&manifest]);
        assert!(
            !session.stderr().contains("corrupt"),
            "{}",
            session.stderr()
        );
        let url = session.url.clone();
        said.push(session.stderr());
        let mut session = Some(session);
        let batch = (TASKS - known.len()).div_ceil(KILLS + 1 - life);
        let strike = (life < KILLS).then(|| Duration::from_millis(rng.below(300)));
        let results = std::thread::scope(|scope| {
            let clients: Vec<_> = (0..4)
                .map(|c| {
                    let url = url.clone();
                    scope.spawn(move || client(&url, life, (c..batch).step_by(4)))
                })
                .collect();
            if let Some(after) = strike {
                std::thread::sleep(after);
                kill(session.take().expect("alive until struck"));
            }
            clients
                .into_iter()
                .flat_map(|c| c.join().unwrap())
                .collect::<Vec<_>>()
        });
        // The last life ends in order once its clients are done.
        drop(session);
        for (id, text, answer) in results {
            if let Some(answer) = answer {
                assert_eq!(answer, format!("ok {text}"));
                completed.push((id.clone(), answer));
            }
            known.push((id, text));
        }
    }
    assert_eq!(known.len(), TASKS, "every task was sent in some life");
    let last = start_named(&home, "chaos", &[&manifest]);
    assert!(!last.stderr().contains("corrupt"), "{}", last.stderr());
    let missing = verify(&last, &known, &completed, &said);
    eprintln!(
        "store chaos: {} tasks known, {} completed, {} gone by the bound, {:?}",
        known.len(),
        completed.len(),
        missing,
        started.elapsed()
    );
    assert!(completed.len() > known.len() / 2, "most tasks completed");
}

/// Every task `known` after the chaos, read from the `last` session: each completed with its
/// answer or failed with the note, each seen `completed` with its exact answer; how many went
/// by the store's bound.
fn verify(
    last: &Session,
    known: &[(String, String)],
    completed: &[(String, String)],
    said: &[String],
) -> usize {
    // The store keeps the newest 1,000 ended tasks; a task taken whose answer the kill cut off
    // (at most one per client per kill) is one more, so the oldest few may have gone by the
    // bound, never by the crash: those missing must all be older (ids are UUIDv7, in time
    // order) than every task kept, and the store full.
    let listed = last.call(None, "ListTasks", json!({"pageSize": 100}));
    let kept = listed["totalSize"].as_u64().unwrap();
    let mut missing = Vec::new();
    for (id, text) in known {
        let answer = last.rpc(None, "tasks/get", json!({"id": id}));
        let Some(task) = answer.get("result") else {
            missing.push(id.clone());
            continue;
        };
        match state(task).as_str() {
            "completed" => assert_eq!(artifact_text(task), format!("ok {text}")),
            "failed" => assert!(status_text(task).contains(INTERRUPTED), "{task}"),
            other => panic!("task {id} is {other}: {task}"),
        }
    }
    for (id, answer) in completed {
        if !missing.contains(id) {
            let task = last.get_task(None, id);
            assert_eq!(state(&task), "completed", "{task}");
            assert_eq!(&artifact_text(&task), answer, "{task}");
        }
    }
    if !missing.is_empty() {
        assert_eq!(
            kept,
            1000,
            "{} tasks missing from a store not full",
            missing.len()
        );
        assert!(missing.len() <= 4 * 20, "{missing:?}");
        // An id is minted before the engine's lock is taken and the arrival number given, so
        // four clients' ids may come in another order than their arrival by three places.
        let mut ids: Vec<&String> = known.iter().map(|(id, _)| id).collect();
        ids.sort();
        let oldest = &ids[..missing.len() + 3];
        assert!(
            missing.iter().all(|id| oldest.contains(&id)),
            "only the oldest go: {missing:?}; the sessions said {said:#?}"
        );
    }
    missing.len()
}

#[test]
fn logs_of_a_name_read_its_restarts_as_one_history() {
    let home = Home::new();
    let manifest = capsule(&home);
    let first = start_named(&home, "story", &[&manifest]);
    let before = first.send(None, "before", true)["id"]
        .as_str()
        .unwrap()
        .to_string();
    let first_id = first.id.clone();
    kill(first);
    let second = start_named(&home, "story", &[&manifest]);
    let after = second.send(None, "after", true)["id"]
        .as_str()
        .unwrap()
        .to_string();

    let out = home.mur(&["logs", "story"]);
    out.expect_code(0);
    let text = &out.stdout;
    let at = |what: &str| {
        text.find(what)
            .unwrap_or_else(|| panic!("no {what:?} in {text}"))
    };
    let was = at(&format!("session {first_id} of 'story' started; it ended"));
    let now = at(&format!("session {} of 'story' started", second.id));
    assert!(
        was < at(&before) && at(&before) < now && now < at(&after),
        "{text}"
    );
    assert!(text.contains("(gone)"), "{text}");
    // By its id, a session's own log only.
    let own = home.mur(&["logs", &second.id]);
    assert!(!own.stdout.contains(&before), "{}", own.stdout);
    assert!(own.stdout.contains(&after), "{}", own.stdout);
}

#[test]
fn a_task_waiting_for_input_when_its_session_died_waits_again_and_continues_with_its_history() {
    let home = Home::new();
    // Asks at its first turn; then answers with what it was told and what its history began with.
    let script = "#!/bin/sh\ninput=$(cat)\nif [ \"$MUR_TURN\" = 1 ]; then echo 'name?'; exit 10; fi\n\
                  first=$(grep -o 'first words' \"$MUR_TASK_DIR/history.json\" | head -n 1)\n\
                  echo \"turn $MUR_TURN: $input after $first\"\n";
    let manifest = home.write_capsule(
        "asker",
        json!({"name": "asker", "version": "1"}),
        Some(script),
    );
    let manifest = manifest.to_str().unwrap();
    let session = start_named(&home, "asker", &[manifest]);
    let asked = session.send(None, "first words", true);
    assert_eq!(state(&asked), "input-required", "{asked}");
    let id = asked["id"].as_str().unwrap().to_string();
    kill(session);

    let again = start_named(&home, "asker", &[manifest]);
    let task = again.get_task(None, &id);
    assert_eq!(state(&task), "input-required", "{task}");
    said(&again, "1 of them waiting for input again");
    let params = json!({
        "message": {"kind": "message", "role": "user", "messageId": "m-2", "taskId": id,
                    "parts": [{"kind": "text", "text": "Ada"}]},
        "configuration": {"blocking": true},
    });
    let answer = again.call(None, "message/send", params);
    assert_eq!(state(&answer), "completed", "{answer}");
    assert_eq!(artifact_text(&answer), "turn 2: Ada after first words");
    let texts: Vec<&str> = answer["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["parts"][0]["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(texts, ["first words", "name?", "Ada"], "{answer}");
    kill(again);
    // Ended now: a third start finds it completed, with its answer.
    let third = start_named(&home, "asker", &[manifest]);
    let task = third.get_task(None, &id);
    assert_eq!(
        artifact_text(&task),
        "turn 2: Ada after first words",
        "{task}"
    );
}

#[test]
fn a_different_capsule_under_a_stored_name_is_refused_naming_both_and_the_way_out() {
    let home = Home::new();
    let kept = answered_then_killed(&home, "shared", "echo's");
    let dir = store_dir(&home, "shared");
    assert_eq!(fs::read_to_string(dir.join("capsule")).unwrap(), "echo\n");
    assert_eq!(mode_of(&dir.join("capsule")), 0o600);

    let manifest = capsule(&home);
    released(&home, "shared");
    let refused = home.mur(&["run", "--name", "shared", &manifest, "--json"]);
    assert_eq!(
        refused.code,
        Some(1),
        "a different capsule started: {}",
        refused.stderr
    );
    let path = dir.display().to_string();
    says_all(
        &refused.stderr,
        &["'echo'", "'answers'", "another --name", &path],
    );
    assert!(refused.stdout.is_empty(), "no readiness line");
    // The store is as it was: the capsule it is for reads it still.
    let again = start_named(&home, "shared", &[]);
    assert_eq!(
        artifact_text(&again.get_task(None, kept["id"].as_str().unwrap())),
        "echo's"
    );
}

#[test]
fn a_journal_open_to_others_or_not_ours_is_left_unread_and_said() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new();
    let task = answered_then_killed(&home, "loose", "mine");
    let journal = store_dir(&home, "loose").join("journal");
    let before = fs::read(&journal).unwrap();
    fs::set_permissions(&journal, fs::Permissions::from_mode(0o644)).unwrap();

    let again = start_named(&home, "loose", &[]);
    let warned = said(&again, "left unread");
    let path = journal.display().to_string();
    says_all(&warned, &["mode 0644", "chmod 0600", &path]);
    let unread = again.rpc(None, "tasks/get", json!({"id": task["id"]}));
    assert!(unread.get("error").is_some(), "{unread}");
    assert_eq!(state(&again.send(None, "in memory", true)), "completed");
    kill(again);
    assert_eq!(fs::read(&journal).unwrap(), before, "left as it was");
    assert_eq!(mode_of(&journal), 0o644);

    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        fs::set_permissions(&journal, fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::chown(&journal, Some(65534), None).unwrap();
        let third = start_named(&home, "loose", &[]);
        said(&third, "owned by uid 65534");
        kill(third);
        assert_eq!(fs::read(&journal).unwrap(), before, "left as it was");
    }
}

#[test]
fn journals_set_aside_are_pruned_to_the_newest_three() {
    let home = Home::new();
    kill(start_named(&home, "breaking", &[]));
    let dir = store_dir(&home, "breaking");
    for round in 0..5 {
        fs::write(dir.join("journal"), format!("not a journal, round {round}")).unwrap();
        let session = start_named(&home, "breaking", &[]);
        said(&session, "moved aside");
        kill(session);
    }
    let aside: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("journal.corrupt-"))
        .collect();
    assert_eq!(aside.len(), 3, "{aside:?}");
    let kept: Vec<String> = aside
        .iter()
        .map(|p| fs::read_to_string(p).unwrap())
        .collect();
    for round in 2..5 {
        let text = format!("not a journal, round {round}");
        assert!(kept.contains(&text), "{text:?} not kept: {kept:?}");
    }
}

#[test]
fn a_resubscribe_to_an_ended_task_is_refused_alike_before_and_after_a_restart() {
    let home = Home::new();
    let session = start_named(&home, "ended", &[]);
    let id = session.send(None, "over", true)["id"].clone();
    let subscribe = |session: &Session, method: &str| -> Value {
        let text = session.rpc_http(None, method, json!({"id": id})).text();
        let data = text.trim().strip_prefix("data: ").unwrap_or(&text);
        serde_json::from_str(data).unwrap_or_else(|_| panic!("{method}: {text}"))
    };
    let before = subscribe(&session, "tasks/resubscribe");
    let v1_before = subscribe(&session, "SubscribeToTask");
    kill(session);
    let again = start_named(&home, "ended", &[]);
    let after = subscribe(&again, "tasks/resubscribe");
    let v1_after = subscribe(&again, "SubscribeToTask");
    // UnsupportedOperation: 0.3 §7.9 and 1.0 §3.1.6 refuse a subscription to a terminal task.
    assert_eq!(before["error"]["code"], -32004, "{before}");
    assert_eq!(after["error"], before["error"], "{after}");
    assert_eq!(v1_after["error"], v1_before["error"], "{v1_after}");
    assert_eq!(v1_before["error"]["code"], -32004, "{v1_before}");
}
