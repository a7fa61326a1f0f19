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
    assert_eq!(listing["settings"]["MODEL"]["value"], "small");
    assert_eq!(listing["secrets"]["API_KEY"]["set"], true);
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
        listing["secrets"]["API_KEY"]["set"], false,
        "nothing was sent"
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

/// `murmur.WatchSession` (DESIGN.md §5): the ack first, then a task's start and its text while
/// it runs, its end, and `capsule-closed` when the session goes; the door extension echoed.
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
    let result = |sse: &mut common::sse::Sse| sse.next().expect("a frame")["result"].take();
    assert_eq!(
        result(&mut sse),
        json!({"type": "connection-ack", "role": "observer", "session_id": session.id})
    );
    let task = session.send(None, "go", false);
    let id = task["id"].as_str().unwrap();
    assert_eq!(
        result(&mut sse),
        json!({"type": "task-started", "task_id": id})
    );
    let mut text = String::new();
    while !text.contains("second") {
        let frame = result(&mut sse);
        assert_eq!(frame["type"], "text", "{frame}");
        assert_eq!(frame["task_id"], id);
        text.push_str(frame["text"].as_str().unwrap());
    }
    assert_eq!(
        state(&session, None, id),
        "working",
        "the text came while it ran"
    );
    std::fs::write(gate.join("release"), "").unwrap();
    assert_eq!(
        result(&mut sse),
        json!({"type": "task-ended", "task_id": id, "state": "completed"})
    );
    session.signal(libc::SIGTERM);
    assert_eq!(
        result(&mut sse),
        json!({"type": "capsule-closed", "session_id": session.id})
    );
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
