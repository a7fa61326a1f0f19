//! `mur cancel` and `mur control` against real sessions (DESIGN.md §6, issue 25): tokens from
//! the record, never from argv; a secret from stdin, never argv.

use crate::common;

use std::path::Path;

use common::{
    home::Home,
    run::{MUR_DEADLINE, run_to_end},
    session::Session,
};
use serde_json::{Value, json};

/// A capsule whose handler holds each task until `<gate>/release` exists.
fn gated(home: &Home, gate: &Path, extra: Value) -> String {
    let script = format!(
        "#!/bin/sh\ninput=$(cat)\nwhile [ ! -e '{}/release' ]; do sleep 0.02; done\necho \"done $input\"\n",
        gate.display()
    );
    let mut manifest = json!({"name": "gated", "version": "1.0.0"});
    if let (Some(m), Some(extra)) = (manifest.as_object_mut(), extra.as_object()) {
        m.extend(extra.clone());
    }
    let path = home.write_capsule("gated", manifest, Some(&script));
    path.to_str().unwrap().to_string()
}

fn state(session: &Session, token: Option<&str>, id: &str) -> String {
    session.get_task(token, id)["status"]["state"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn cancel_ends_one_task_with_the_records_token_and_leaves_the_session_running() {
    let home = Home::new();
    let gate = home.dir("gate");
    let auth = json!({"network": {"authentication": {"credentials": [
        {"name": "reader", "scopes": ["tasks/get"]}
    ]}}});
    let mut session = home.start(&[&gated(&home, &gate, auth)]);
    let operator = home.token(&[&session.id]);
    let task = session.send(Some(&operator), "held", false);
    let id = task["id"].as_str().unwrap().to_string();

    let run = home.mur(&["cancel", "@1", &id]);
    run.expect_code(0);
    assert_eq!(run.stdout, format!("{id}  canceled\n"), "{}", run.stderr);
    assert!(!run.stdout.contains(&operator) && !run.stderr.contains(&operator));
    assert_eq!(state(&session, Some(&operator), &id), "canceled");
    assert!(session.alive(), "the session goes on");

    // Again: the task has ended, so it is not canceled now (exit 1, its state said).
    let again = home.mur(&["cancel", &session.id, &id]);
    again.expect_code(1);
    assert!(again.stderr.contains("already ended"), "{}", again.stderr);
    // With --json, a script gets the task as it ended all the same, and the same exit status.
    let again = home.mur(&["cancel", "--json", &session.id, &id]);
    again.expect_code(1);
    assert!(again.stderr.contains("already ended"), "{}", again.stderr);
    let ended: Value = serde_json::from_str(again.stdout.trim()).unwrap();
    assert_eq!(
        (&ended["id"], &ended["status"]["state"]),
        (&json!(id), &json!("canceled"))
    );

    // An unknown task is named.
    let unknown = home.mur(&["cancel", "tsk_nosuchtask"]);
    unknown.expect_code(1);
    assert!(
        unknown.stderr.contains("tsk_nosuchtask"),
        "{}",
        unknown.stderr
    );

    // --json prints the task; a finished task reads its state.
    std::fs::write(gate.join("release"), "").unwrap();
    let next = session.send(Some(&operator), "next", false);
    let next_id = next["id"].as_str().unwrap();
    std::fs::remove_file(gate.join("release")).unwrap();
    let json_run = home.mur(&["cancel", "--json", next_id]);
    let printed: Value = serde_json::from_str(json_run.stdout.trim()).unwrap();
    assert_eq!(printed["id"], next_id);
    let final_state = printed["status"]["state"].as_str().unwrap();
    assert_eq!(
        json_run.code(),
        Some(i32::from(final_state != "canceled")),
        "{}",
        json_run.stdout
    );
}

/// Task ids are unique, so `mur cancel TASK` needs no address while several sessions run: the
/// one that has the task is found (each door asked with its own token) and cancels it; a task
/// none has is said, naming how many were asked.
#[test]
fn cancel_finds_the_session_that_has_the_task() {
    let home = Home::new();
    let gate = home.dir("gate");
    let auth = json!({"network": {"authentication": {"credentials": []}}});
    let holder = home.start(&[&gated(&home, &gate, auth)]);
    let _other = home.start(&[&gated(&home, &gate, json!({}))]);
    let _newest = home.start(&[]);
    let operator = home.token(&[&holder.id]);
    let task = holder.send(Some(&operator), "held", false);
    let id = task["id"].as_str().unwrap().to_string();

    let run = home.mur(&["cancel", &id]);
    run.expect_code(0);
    assert_eq!(run.stdout, format!("{id}  canceled\n"), "{}", run.stderr);
    assert_eq!(state(&holder, Some(&operator), &id), "canceled");

    let unknown = home.mur(&["cancel", "tsk_nosuchtask"]);
    unknown.expect_code(1);
    assert!(
        unknown
            .stderr
            .contains("none of the 3 running sessions has task tsk_nosuchtask"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn cancel_with_url_asks_a_public_door_and_refuses_bad_input() {
    let home = Home::new();
    let gate = home.dir("gate");
    let session = home.start(&[&gated(&home, &gate, json!({}))]);
    let task = session.send(None, "held", false);
    let id = task["id"].as_str().unwrap();
    let url = home.record(&session.id)["url"]
        .as_str()
        .unwrap()
        .to_string();

    let run = home.mur(&["cancel", "--url", &url, id]);
    run.expect_code(0);
    assert_eq!(run.stdout, format!("{id}  canceled\n"));

    home.mur(&["cancel"]).expect_code(2);
    home.mur(&["cancel", "--url", &url, "@1", id])
        .expect_code(2);
    home.mur(&["cancel", "a", "b", "c"]).expect_code(2);
    let nowhere = home.mur(&["cancel", "nosuchcapsule", id]);
    nowhere.expect_code(1);
}

/// A session with control: one setting, one secret; the handler prints both (so the test sees
/// what a task gets).
fn controlled(home: &Home) -> Session {
    let manifest = home.write_capsule(
        "ctl",
        json!({"name": "ctl", "version": "1.0.0",
               "control": {"settings": ["MODEL"], "secrets": ["API_KEY"]}}),
        Some("#!/bin/sh\ncat >/dev/null\necho \"model=$MODEL key=$API_KEY\"\n"),
    );
    home.start(&[manifest.to_str().unwrap()])
}

#[test]
fn control_sets_shows_and_forgets_with_the_control_token() {
    let home = Home::new();
    let session = controlled(&home);
    let id = session.id.clone();

    let set = home.mur(&["control", &id, "set", "MODEL", "small"]);
    set.expect_code(0);
    assert_eq!(set.stdout, "set: MODEL = small (was not set)\n");
    let mut command = home.command(&["control", "@1", "secret", "API_KEY"]);
    command.stdin(std::process::Stdio::piped());
    let secret = run_to_end(command, Some(b"hunter2-secret\n"), MUR_DEADLINE);
    secret.expect_code(0);
    assert!(!secret.stdout.contains("hunter2") && !secret.stderr.contains("hunter2"));

    let answer = session.send(None, "go", true);
    assert_eq!(
        common::session::artifact_text(&answer),
        "model=small key=hunter2-secret"
    );

    let show = home.mur(&["control", &id, "show"]);
    show.expect_code(0);
    assert!(
        show.stdout.contains("setting  MODEL  = small"),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout.contains("secret  API_KEY  set"),
        "{}",
        show.stdout
    );
    assert!(!show.stdout.contains("hunter2"), "never a secret's value");
    let shown = home.mur(&["control", &id, "show", "--json"]);
    let listing: Value = serde_json::from_str(shown.stdout.trim()).unwrap();
    assert_eq!(
        listing,
        json!({"session_id": id,
               "settings": [{"name": "MODEL", "value": "small"}],
               "secrets": [{"name": "API_KEY", "set": true}]}),
        "the original runtime's listing shape"
    );
    assert!(!shown.stdout.contains("hunter2"));
    let control = std::fs::read_to_string(home.control_path(&id)).unwrap();
    for out in [&set, &secret, &show, &shown] {
        assert!(!out.stdout.contains(control.trim()) && !out.stderr.contains(control.trim()));
    }

    home.mur(&["control", &id, "forget", "API_KEY"])
        .expect_code(0);
    home.mur(&["control", &id, "forget", "MODEL"])
        .expect_code(0);
    let answer = session.send(None, "again", true);
    assert_eq!(common::session::artifact_text(&answer), "model= key=");

    // The door's refusal is said: an undeclared name.
    let undeclared = home.mur(&["control", &id, "set", "OTHER", "x"]);
    undeclared.expect_code(1);
    assert!(undeclared.stderr.contains("OTHER"), "{}", undeclared.stderr);
}

/// `set` prints the door's answer (the value before and after); a value that parses as JSON goes
/// as JSON, as the original runtime's client sends it, and a handler sees a number as its JSON
/// text; a dotted name (the original's `inference.max_tokens`) is the door's to refuse, a name
/// that would leave its path segment is refused before anything is sent.
#[test]
fn control_set_answers_previous_and_value_numbers_and_dotted_names() {
    let home = Home::new();
    let session = controlled(&home);
    let id = session.id.clone();

    let first = home.mur(&["control", &id, "set", "MODEL", "small"]);
    first.expect_code(0);
    assert_eq!(first.stdout, "set: MODEL = small (was not set)\n");
    let number = home.mur(&["control", &id, "set", "MODEL", "5"]);
    number.expect_code(0);
    assert_eq!(number.stdout, "set: MODEL = 5 (was small)\n");
    let listing = home.mur(&["control", &id, "show", "--json"]);
    let listing: Value = serde_json::from_str(listing.stdout.trim()).unwrap();
    assert_eq!(listing["settings"], json!([{"name": "MODEL", "value": 5}]));
    let shown = home.mur(&["control", &id, "show"]);
    assert!(
        shown.stdout.contains("setting  MODEL  = 5\n"),
        "{}",
        shown.stdout
    );
    let answer = session.send(None, "go", true);
    assert_eq!(common::session::artifact_text(&answer), "model=5 key=");

    let dotted = home.mur(&["control", &id, "set", "inference.max_tokens", "1000"]);
    dotted.expect_code(1);
    assert!(
        dotted.stderr.contains("door refused") && dotted.stderr.contains("inference.max_tokens"),
        "{}",
        dotted.stderr
    );
    for bad in ["a/b", "a%2fb", "a?b", "a#b", "a b", "..", ""] {
        let refused = home.mur(&["control", &id, "set", bad, "x"]);
        refused.expect_code(2);
        assert!(
            refused.stderr.contains("not a setting"),
            "{bad}: {}",
            refused.stderr
        );
    }
}

#[test]
fn control_refuses_a_secret_on_argv_and_a_session_without_control() {
    let home = Home::new();
    let session = controlled(&home);
    let refused = home.mur(&["control", &session.id, "secret", "API_KEY", "hunter2"]);
    refused.expect_code(2);
    assert!(refused.stderr.contains("stdin"), "{}", refused.stderr);
    let listing = home.mur(&["control", &session.id, "show", "--json"]);
    let listing: Value = serde_json::from_str(listing.stdout.trim()).unwrap();
    assert_eq!(
        listing["secrets"],
        json!([{"name": "API_KEY", "set": false}]),
        "nothing was sent"
    );
    assert_eq!(
        listing["settings"],
        json!([{"name": "MODEL", "value": null}]),
        "a setting not set yet"
    );

    home.mur(&["control", &session.id]).expect_code(2);
    home.mur(&["control", &session.id, "frob"]).expect_code(2);
    home.mur(&["control", &session.id, "set", "MODEL"])
        .expect_code(2);

    let plain = home.start(&[]);
    let run = home.mur(&["control", &plain.id, "show"]);
    run.expect_code(1);
    assert!(run.stderr.contains("declares no control"), "{}", run.stderr);
}

/// A capsule that streams two lines with a pause between them, then waits for the gate.
fn streaming(home: &Home, gate: &Path) -> String {
    let path = home.write_capsule(
        "streamer",
        json!({"name": "streamer", "version": "1.0.0"}),
        Some(&streaming_script(gate)),
    );
    path.to_str().unwrap().to_string()
}

fn streaming_script(gate: &Path) -> String {
    format!(
        "#!/bin/sh\ncat >/dev/null\necho first\nsleep 0.3\necho second\nwhile [ ! -e '{}/release' ]; do sleep 0.02; done\n",
        gate.display()
    )
}

/// The original runtime's stream extension: the key of `metadata` its frames are carried under.
const STREAM: &str = "https://docs.murmur.nexus/reference/streaming-protocol/#murmur-stream-v1";

/// `murmur.WatchSession` (DESIGN.md §5) in the original runtime's shapes: the ack first, then a
/// task's start and its text as `text` frames while it runs, its answer and end, and
/// `capsule-closed` when the session goes; the door extension echoed.
#[test]
fn watch_session_streams_the_sessions_events_to_an_observer() {
    let home = Home::new();
    let gate = home.dir("gate");
    let mut session = home.start(&[&streaming(&home, &gate)]);
    let mut sse =
        common::sse::Sse::open(&session.url, Some("1.0"), "murmur.WatchSession", json!({}));
    assert!(
        sse.head.to_ascii_lowercase().contains(
            "a2a-extensions: https://docs.murmur.nexus/reference/agent-card/#murmur-door-v1"
        ),
        "{}",
        sse.head
    );
    let result = |sse: &mut common::sse::Sse| sse.next().expect("an event")["result"].take();
    // A frame that belongs to no task: an agent message carrying it under the stream extension.
    let carried = |result: &Value, frame: Value| {
        let message = &result["message"];
        assert_eq!(message["role"], "ROLE_AGENT", "{result}");
        assert_eq!(message["parts"][0]["text"], frame["frame"], "{result}");
        assert_eq!(message["metadata"][STREAM], frame, "{result}");
    };
    carried(
        &result(&mut sse),
        json!({"frame": "connection-ack", "role": "observer", "conversationMode": "stateless"}),
    );
    assert_eq!(sse.last_id, None, "a carrier has no event id");
    let task = session.send(None, "go", false);
    let id = task["id"].as_str().unwrap();
    let started = result(&mut sse);
    assert_eq!(sse.last_id, Some(1), "task events are numbered");
    assert_eq!(started["statusUpdate"]["taskId"], id, "{started}");
    assert_eq!(
        started["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    assert!(
        started["statusUpdate"].get("metadata").is_none(),
        "{started}"
    );
    let mut text = String::new();
    let mut previous = sse.last_id;
    while !text.contains("second") {
        let event = result(&mut sse);
        assert!(sse.last_id > previous, "ascending: {:?}", sse.last_id);
        previous = sse.last_id;
        let update = &event["statusUpdate"];
        assert_eq!(update["taskId"], id, "{event}");
        assert_eq!(update["status"]["state"], "TASK_STATE_WORKING", "{event}");
        let frame = &update["metadata"][STREAM];
        assert_eq!(frame["frame"], "text", "{event}");
        assert_eq!(frame["final"], false, "{event}");
        text.push_str(frame["text"].as_str().unwrap());
    }
    assert_eq!(text, "first\nsecond\n");
    assert_eq!(
        state(&session, None, id),
        "working",
        "the text came while it ran"
    );
    std::fs::write(gate.join("release"), "").unwrap();
    // The answer as the task's artifact has it: one trailing newline dropped.
    let answer = result(&mut sse);
    assert_eq!(
        answer["artifactUpdate"]["artifact"],
        json!({"artifactId": "response", "name": "response",
               "parts": [{"text": "first\nsecond", "mediaType": "text/plain"}]}),
        "{answer}"
    );
    assert_eq!(answer["artifactUpdate"]["taskId"], id);
    let ended = result(&mut sse);
    assert_eq!(ended["statusUpdate"]["taskId"], id, "{ended}");
    assert_eq!(
        ended["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let last = sse.last_id;
    session.signal(libc::SIGTERM);
    carried(&result(&mut sse), json!({"frame": "capsule-closed"}));
    assert!(last > Some(2) && sse.last_id.is_none(), "{last:?}");
    assert!(sse.next().is_none(), "the stream ends");
    session.wait_exit(common::wait::WAIT);
}

/// `murmur.WatchSession` is its own scope: a credential without it is refused, one with it is
/// served; `mur watch` follows with the record's operator token and exits 0 at the end.
#[test]
fn watch_is_its_own_scope_and_mur_watch_follows_to_the_end() {
    let home = Home::new();
    let gate = home.dir("gate");
    let manifest = home.write_capsule(
        "streamer",
        json!({"name": "streamer", "version": "1.0.0",
               "run": ["./handler.sh"],
               "network": {"authentication": {"credentials": [
                   {"name": "stopper", "scopes": ["session/stop", "message/send", "tasks/get"]},
                   {"name": "observer", "scopes": ["murmur.WatchSession"]}]}}}),
        Some(&streaming_script(&gate)),
    );
    let mut session = home.start(&[manifest.to_str().unwrap()]);
    let stopper = home.token(&[&session.id, "stopper"]);
    let observer = home.token(&[&session.id, "observer"]);
    let refused = session.rpc_as(
        Some(&stopper),
        Some("1.0"),
        "murmur.WatchSession",
        json!({}),
    );
    assert_eq!(refused.status, 403, "{}", refused.text());

    let mut watch = home.command(&["watch", &session.id]);
    watch
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = watch.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let task = session.send(Some(&stopper), "go", false);
    let id = task["id"].as_str().unwrap().to_string();
    // The observer's own token is served too.
    let mut http = session.connect();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "murmur.WatchSession", "params": {}});
    http.send_raw(
        format!(
            "POST / HTTP/1.1\r\nHost: x\r\nA2A-Version: 1.0\r\nAuthorization: Bearer {observer}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.to_string().len()
        )
        .as_bytes(),
    )
    .unwrap();
    let mut head = [0u8; 64];
    let n = std::io::Read::read(&mut http.stream, &mut head).unwrap();
    assert!(String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 200"));
    std::thread::sleep(std::time::Duration::from_millis(600));
    std::fs::write(gate.join("release"), "").unwrap();
    session.wait_task(Some(&stopper), &id, common::wait::WAIT);
    session.signal(libc::SIGTERM);
    session.wait_exit(common::wait::WAIT);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout,
        format!("{id}  started\n{id}  | first\n{id}  | second\n{id}  completed\n")
    );
    assert!(!stdout.contains(&stopper) && !stdout.contains("mdt1."));
}
