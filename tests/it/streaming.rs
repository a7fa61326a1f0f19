//! Streaming (DESIGN.md §5): `message/stream` / `SendStreamingMessage` send the task, its status,
//! the handler's stdout in chunks as it is written, and the settled status, then end; a task can
//! be resubscribed to mid-way; a reader that never reads costs only its own stream; and
//! `mur run --task` prints the answer as it comes.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;

use common::{
    gate::Gate,
    home::Home,
    session::{send_params, v1_send},
    sse::Sse,
    wait::{WAIT, wait_for, wait_until},
};
use serde_json::{Value, json};

/// Writes `first`, waits at `gate`, writes `second`.
fn two_step_capsule(home: &Home, gate: &Gate) -> String {
    let manifest = json!({"name": "steps", "version": "1.0.0"});
    let path = home.write_capsule("steps", manifest, Some(&gate.two_steps()));
    path.to_str().unwrap().to_string()
}

/// The text of an artifact update's parts, in either generation.
fn chunk_text(update: &Value) -> String {
    update["artifact"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect()
}

#[test]
fn the_first_chunk_arrives_before_the_handler_ends_in_0_3() {
    let home = Home::new();
    let gate = Gate::new(&home);
    let session = home.start(&[&two_step_capsule(&home, &gate)]);
    let mut sse = Sse::open(
        &session.url,
        None,
        "message/stream",
        send_params(&["go"], true),
    );
    assert!(sse.head.starts_with("HTTP/1.1 200"), "{}", sse.head);
    assert!(sse.head.contains("text/event-stream"), "{}", sse.head);
    let task = sse.next().unwrap();
    assert_eq!(task["id"], 7, "each event answers the request's id");
    assert_eq!(task["result"]["kind"], "task", "{task}");
    let working = sse.next().unwrap()["result"].clone();
    assert_eq!(
        (&working["kind"], &working["status"]["state"]),
        (&json!("status-update"), &json!("working"))
    );
    let first = sse.next().unwrap()["result"].clone();
    assert_eq!(first["kind"], "artifact-update", "{first}");
    assert_eq!(
        chunk_text(&first),
        "first",
        "the chunk came while the handler still runs (its newline waits for more output)"
    );
    assert_eq!(first["append"], false);
    gate.open();
    let rest = sse.rest();
    let text: String = rest
        .iter()
        .filter(|e| e["kind"] == "artifact-update")
        .map(chunk_text)
        .collect();
    assert_eq!(
        text, "\nsecond",
        "the chunks are stdout as written, less the newline that ends it"
    );
    let last_chunk = rest
        .iter()
        .rfind(|e| e["kind"] == "artifact-update")
        .unwrap();
    assert_eq!(
        (&last_chunk["lastChunk"], &last_chunk["append"]),
        (&json!(true), &json!(true))
    );
    let settled = rest.last().unwrap();
    assert_eq!(settled["status"]["state"], "completed", "{rest:?}");
    assert_eq!(settled["final"], true);
    // The stream ended with the settled status; the task reads back whole.
    let read = session.get_task(None, task["result"]["id"].as_str().unwrap());
    assert_eq!(read["artifacts"][0]["parts"][0]["text"], "first\nsecond");
}

#[test]
fn the_first_chunk_arrives_before_the_handler_ends_in_1_0() {
    let home = Home::new();
    let gate = Gate::new(&home);
    let session = home.start(&[&two_step_capsule(&home, &gate)]);
    let params = v1_send(json!([{"text": "go"}]));
    let mut sse = Sse::open(&session.url, Some("1.0"), "SendStreamingMessage", params);
    let task = sse.next().unwrap()["result"].clone();
    assert_eq!(
        task["task"]["status"]["state"], "TASK_STATE_SUBMITTED",
        "{task}"
    );
    let working = sse.next().unwrap()["result"].clone();
    assert_eq!(
        working["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    let first = sse.next().unwrap()["result"].clone();
    assert_eq!(chunk_text(&first["artifactUpdate"]), "first", "{first}");
    gate.open();
    let rest = sse.rest();
    let settled = &rest.last().unwrap()["statusUpdate"];
    assert_eq!(
        settled["status"]["state"], "TASK_STATE_COMPLETED",
        "{rest:?}"
    );
    assert!(
        settled.get("final").is_none(),
        "1.0 has no final flag: the stream just ends"
    );
    assert!(rest.iter().all(|e| e.get("kind").is_none()));
}

#[test]
fn a_live_task_can_be_resubscribed_and_an_ended_one_cannot() {
    let home = Home::new();
    let gate = Gate::new(&home);
    let session = home.start(&[&two_step_capsule(&home, &gate)]);
    let task = session.send(None, "go", false);
    let id = task["id"].as_str().unwrap().to_string();
    // Once the first chunk has streamed, the task shows it, and a new reader starts from it.
    let so_far = wait_for(WAIT, "the first chunk", || {
        let task = session.get_task(None, &id);
        task.get("artifacts").is_some().then_some(task)
    });
    assert_eq!(
        so_far["artifacts"][0]["parts"][0]["text"], "first",
        "the answer so far, less its trailing newline: {so_far}"
    );
    let mut sse = Sse::open(&session.url, None, "tasks/resubscribe", json!({"id": id}));
    let now = sse.next().unwrap()["result"].clone();
    assert_eq!(now["id"], id.as_str(), "first the task as it stands: {now}");
    assert_eq!(
        now["artifacts"][0]["parts"][0]["text"], "first",
        "with its answer so far"
    );
    gate.open();
    let rest = sse.rest();
    assert_eq!(
        rest.last().unwrap()["status"]["state"],
        "completed",
        "{rest:?}"
    );
    let second = rest.iter().find(|e| chunk_text(e).contains("second"));
    let second = second.unwrap_or_else(|| panic!("the next chunk: {rest:?}"));
    assert_eq!(second["append"], true, "it appends to what the reader has");
    // Ended, or unknown: nothing to stream. 0.3 says so as the stream's one event (its
    // streaming response is a success or an error response); 1.0 before any stream opens.
    let unknown = json!({"id": "tsk_0190f0f0f0f07000800000000000abcd"});
    for (params, code) in [(json!({"id": id}), -32004), (unknown, -32001)] {
        let mut old = Sse::open(&session.url, None, "tasks/resubscribe", params.clone());
        let only = old.next().expect("one event");
        assert_eq!(only["error"]["code"], code, "{only}");
        assert!(old.next().is_none(), "then the stream ends");
        let new = session.rpc(None, "SubscribeToTask", params);
        assert_eq!(new["error"]["code"], code, "{new}");
        let info = &new["error"]["data"][0]["@type"];
        assert_eq!(info, "type.googleapis.com/google.rpc.ErrorInfo");
    }
}

#[test]
fn a_reader_that_never_reads_costs_only_its_own_stream() {
    let home = Home::new();
    // About 3.8 MB of stdout in lines: far more than the reader's buffer and the socket's.
    let script = "#!/bin/sh\ncat >/dev/null\ni=0\nwhile [ $i -lt 30000 ]; do echo 'a line of chatter from a busy handler that goes on and on and on and on and on and'; i=$((i+1)); done\n";
    let manifest = json!({"name": "chatty", "version": "1.0.0", "lifecycle": {"concurrency": 2}});
    let path = home.write_capsule("chatty", manifest, Some(script));
    let mut session = home.start(&[path.to_str().unwrap()]);
    let stalled = Sse::send(
        &session.url,
        None,
        "message/stream",
        send_params(&["go"], true),
    );
    // Meanwhile the door serves others, and the stalled task itself completes.
    let other = session.send(None, "me too", true);
    assert_eq!(other["status"]["state"], "completed", "{other}");
    session.assert_still_serving();
    // (Both tasks run at once; the stalled reader's may end a moment after the other.)
    wait_until(WAIT, "the stalled reader's task completed too", || {
        let listed = session.call(None, "ListTasks", json!({"status": "TASK_STATE_COMPLETED"}));
        listed["totalSize"] == 2
    });
    drop(stalled);
}

#[test]
fn mur_run_task_prints_the_answer_as_it_comes() {
    let home = Home::new();
    let gate = Gate::new(&home);
    let capsule = two_step_capsule(&home, &gate);
    let said = home.path().join("stderr");
    let mut child = home
        .command(&["run", &capsule, "--task", "go"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&said).unwrap())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap());
        }
    });
    let first = lines.recv_timeout(WAIT);
    // Let the handler end whatever happened, so nothing is left waiting on the gate.
    gate.open();
    assert_eq!(
        first.as_deref(),
        Ok("first"),
        "printed while the handler still waits; stderr: {}",
        std::fs::read_to_string(&said).unwrap_or_default()
    );
    let rest: Vec<String> = lines.iter().collect();
    assert_eq!(rest, ["second"]);
    assert!(child.wait().unwrap().success());
}

/// A reader that keeps up gets the whole of a large answer, to its final status: 4 MiB written in
/// 64 KiB pieces (paced, so the reader keeps within its 1 MiB buffer however loaded the machine
/// is) all arrive, and the settled status does not repeat the answer.
#[test]
fn a_reader_that_keeps_up_gets_a_four_mib_answer_to_the_end() {
    let home = Home::new();
    let script = "#!/bin/sh\ncat >/dev/null\ni=0\nwhile [ $i -lt 64 ]; do head -c 65536 /dev/zero | tr '\\0' x; sleep 0.01; i=$((i+1)); done\n";
    let manifest = json!({"name": "chatty", "version": "1.0.0"});
    let path = home.write_capsule("chatty", manifest, Some(script));
    let session = home.start(&[path.to_str().unwrap()]);
    let params = send_params(&["go"], true);
    let mut sse = Sse::open(&session.url, None, "message/stream", params);
    let events = sse.rest();
    let settled = events.last().unwrap_or_else(|| panic!("no events"));
    assert_eq!(settled["status"]["state"], "completed", "ran to its end");
    assert_eq!(settled["final"], true);
    assert!(
        settled["status"].get("message").is_none(),
        "the answer is not repeated"
    );
    let chunks = events.iter().filter(|e| e["kind"] == "artifact-update");
    let streamed: usize = chunks.map(|e| chunk_text(e).len()).sum();
    assert_eq!(streamed, 4 << 20, "the whole answer, to its 4 MiB bound");
}

/// `mur run --task` whose stdout is read late (a slow consumer): its stream falls more than its
/// 1 MiB behind and is cut, but the task is not — the rest of the answer comes from the task
/// itself, all of it printed once, and the run exits 0.
#[test]
fn mur_run_task_with_a_slow_stdout_still_prints_the_whole_answer() {
    let home = Home::new();
    // 3 MiB of 'x' in one burst, then a line end.
    let script = "#!/bin/sh\ncat >/dev/null\nhead -c 3145728 /dev/zero | tr '\\0' x\necho\n";
    let manifest = json!({"name": "burst", "version": "1.0.0"});
    let path = home.write_capsule("burst", manifest, Some(script));
    let said = home.path().join("stderr");
    let mut child = home
        .command(&["run", path.to_str().unwrap(), "--task", "go"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&said).unwrap())
        .spawn()
        .unwrap();
    // Not reading for a while: the pipe fills, mur's writer blocks, the feed overflows.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    let status = child.wait().unwrap();
    let stderr = std::fs::read_to_string(&said).unwrap_or_default();
    assert!(status.success(), "{status}; stderr: {stderr}");
    assert_eq!(out.len(), 3 * 1024 * 1024 + 1, "stderr: {stderr}");
    assert!(out[..out.len() - 1].iter().all(|&b| b == b'x'));
    assert_eq!(out.last(), Some(&b'\n'));
}

/// The text a stream's artifact updates add up to, read as an SDK assembles them: a chunk with
/// `append: false` starts the artifact over.
fn assembled(events: &[Value], artifact_of: impl Fn(&Value) -> Option<&Value>) -> String {
    let mut text = String::new();
    for update in events.iter().filter_map(artifact_of) {
        if update["append"] != true {
            text.clear();
        }
        text.push_str(&chunk_text(update));
    }
    text
}

/// A stream assembled equals the stored answer byte for byte, in both generations: stdout less
/// one trailing newline (docs/capsules.md, the handler contract). The chunks still come as written.
/// A session of capsule `name` running `script`, and every event of one `message/stream` to it.
fn streamed(home: &Home, name: &str, script: &str) -> (common::session::Session, Vec<Value>) {
    let path = home.write_capsule(
        name,
        json!({"name": name, "version": "1.0.0"}),
        Some(script),
    );
    let session = home.start(&[path.to_str().unwrap()]);
    let events = Sse::open(
        &session.url,
        None,
        "message/stream",
        send_params(&["go"], true),
    )
    .rest();
    (session, events)
}

#[test]
fn the_assembled_stream_equals_the_stored_answer() {
    let home = Home::new();
    let script =
        "#!/bin/sh\ncat >/dev/null\necho 3\nsleep 0.2\necho 2\nsleep 0.2\nprintf 'liftoff\\n'\n";
    let (session, old) = streamed(&home, "countdown", script);
    let id = old[0]["id"].as_str().unwrap().to_string();
    let stored = session.get_task(None, &id);
    let stored = stored["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(stored, "3\n2\nliftoff");
    let streamed = assembled(&old, |e| (e["kind"] == "artifact-update").then_some(e));
    assert_eq!(streamed, stored, "{old:?}");
    let params = v1_send(json!([{"text": "go"}]));
    let new = Sse::open(&session.url, Some("1.0"), "SendStreamingMessage", params).rest();
    let id = new[0]["task"]["id"].as_str().unwrap().to_string();
    let read = session.call(None, "GetTask", json!({"id": id}));
    let streamed = assembled(&new, |e| e.get("artifactUpdate"));
    assert_eq!(
        streamed,
        read["artifacts"][0]["parts"][0]["text"].as_str().unwrap(),
        "{new:?}"
    );
    assert_eq!(streamed, "3\n2\nliftoff");
}

/// Every artifact is closed with `lastChunk` before its status event — a question's too: the
/// input-required status comes after the last chunk, in both generations.
#[test]
fn an_input_required_stream_closes_the_question_before_its_status() {
    let home = Home::new();
    let script = "#!/bin/sh\ncat >/dev/null\necho 'which one?'\nexit 10\n";
    let (session, old) = streamed(&home, "asker", script);
    let last = old.iter().rposition(|e| e["kind"] == "artifact-update");
    let last = last.unwrap_or_else(|| panic!("the question streams: {old:?}"));
    assert_eq!(old[last]["lastChunk"], true, "{old:?}");
    assert_eq!(last + 1, old.len() - 1, "then only the status: {old:?}");
    let settled = old.last().unwrap();
    assert_eq!(settled["status"]["state"], "input-required", "{old:?}");
    assert_eq!(
        assembled(&old, |e| (e["kind"] == "artifact-update").then_some(e)),
        "which one?"
    );
    let params = v1_send(json!([{"text": "go"}]));
    let new = Sse::open(&session.url, Some("1.0"), "SendStreamingMessage", params).rest();
    let last = new
        .iter()
        .rposition(|e| e.get("artifactUpdate").is_some())
        .unwrap();
    assert_eq!(new[last]["artifactUpdate"]["lastChunk"], true, "{new:?}");
    assert_eq!(last + 1, new.len() - 1, "{new:?}");
    let status = &new.last().unwrap()["statusUpdate"]["status"];
    assert_eq!(status["state"], "TASK_STATE_INPUT_REQUIRED", "{new:?}");
}
