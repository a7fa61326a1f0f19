//! Push notifications (issue 33; docs/door.md "Push notifications"): off unless the manifest
//! declares `network.push`; a receiver on a host the manifest allows gets every update of a task
//! in the shape of the generation its config was set in; a webhook at an address no receiver may
//! be at — loopback, link-local, private, the door itself, a name resolving to loopback — is never
//! connected to; receivers that never answer cost no task its time; a caller reaches only the
//! configs of its own tasks.

use crate::common;

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use common::{
    home::Home,
    session::{Session, send_params, state, v1_send},
    wait::wait_until,
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);
/// Prints two chunks a little apart, so a task has a working status, artifacts and an end.
const TWO_CHUNKS: &str = "#!/bin/sh\nread -r text\necho \"one $text\"\nsleep 0.3\necho two\n";

/// One request a receiver got: its head (lowercased) and its body.
struct Got {
    head: String,
    body: Value,
}

/// A receiver on 127.0.0.1 answering 200 to every POST; what it got, in order.
fn receiver() -> (String, Receiver<Got>) {
    receiver_after(Duration::ZERO)
}

/// A receiver on 127.0.0.1 answering 200 to every POST after `delay`; what it got, in order.
fn receiver_after(delay: Duration) -> (String, Receiver<Got>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://127.0.0.1:{}/hook?k=v",
        listener.local_addr().unwrap().port()
    );
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let Some(got) = read_request(&mut stream) else {
                continue;
            };
            thread::sleep(delay);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
            if tx.send(got).is_err() {
                return;
            }
        }
    });
    (url, rx)
}

fn read_request(stream: &mut TcpStream) -> Option<Got> {
    stream.set_read_timeout(Some(WAIT)).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())?;
            if buf.len() >= end + 4 + length {
                let body = serde_json::from_slice(&buf[end + 4..end + 4 + length]).ok()?;
                return Some(Got { head, body });
            }
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A listener that must see no connection; its port.
fn untouched() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

#[track_caller]
fn assert_never_connected(listener: &TcpListener) {
    match listener.accept() {
        Err(err) if err.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the webhook was connected to: {other:?}"),
    }
}

/// A capsule declaring `push` (the `network.push` value), with `script` as its handler.
fn start(home: &Home, push: Value, script: &str, extra: Value) -> Session {
    let mut manifest = json!({"name": "hooked", "version": "1", "network": {"push": push}});
    if let Value::Object(more) = extra {
        for (key, value) in more {
            manifest["network"][key] = value;
        }
    }
    let path = home.write_capsule("hooked", manifest, Some(script));
    home.start(&[path.to_str().unwrap()])
}

/// A capsule whose webhooks may be on 127.0.0.1, printing [`TWO_CHUNKS`].
fn on_loopback(home: &Home) -> Session {
    start(home, json!({"allow": ["127.0.0.1"]}), TWO_CHUNKS, json!({}))
}

/// Everything the receiver gets until `last` says the task ended.
fn updates_until(rx: &Receiver<Got>, last: impl Fn(&Value) -> bool) -> Vec<Got> {
    let mut got = Vec::new();
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let next = rx
            .recv_timeout(left)
            .expect("the receiver got the task's end in time");
        let done = last(&next.body);
        got.push(next);
        if done {
            return got;
        }
    }
}

#[test]
fn push_is_off_by_default_and_its_methods_answer_push_not_supported() {
    let home = Home::new();
    let session = home.start(&[]);
    assert_eq!(session.card()["capabilities"]["pushNotifications"], false);
    let (listener, port) = untouched();
    let url = format!("http://127.0.0.1:{port}/");
    let task = session.send(None, "hi", true);
    let id = task["id"].as_str().unwrap();
    for (method, params) in [
        (
            "tasks/pushNotificationConfig/set",
            json!({"taskId": id, "pushNotificationConfig": {"url": url}}),
        ),
        ("tasks/pushNotificationConfig/get", json!({"id": id})),
        ("tasks/pushNotificationConfig/list", json!({"id": id})),
        (
            "tasks/pushNotificationConfig/delete",
            json!({"id": id, "pushNotificationConfigId": "x"}),
        ),
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "url": url}),
        ),
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": id, "id": "x"}),
        ),
        ("ListTaskPushNotificationConfigs", json!({"taskId": id})),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": id, "id": "x"}),
        ),
    ] {
        assert_eq!(session.call_err(None, method, params), -32003, "{method}");
    }
    // A config inside a send is ignored there, and the task runs.
    let mut params = send_params(&["hello"], true);
    params["configuration"]["pushNotificationConfig"] = json!({"url": url});
    assert_eq!(
        state(&session.call(None, "message/send", params)),
        "completed"
    );
    thread::sleep(Duration::from_millis(300));
    assert_never_connected(&listener);
}

#[test]
fn a_receiver_on_an_allowed_host_gets_every_update_of_a_1_0_task() {
    let home = Home::new();
    let session = on_loopback(&home);
    assert_eq!(session.card()["capabilities"]["pushNotifications"], true);

    // 1.0: the config with the send; each event a StreamResponse, with the token and the
    // authentication as headers.
    let (url, rx) = receiver();
    let mut params = v1_send(json!([{"text": "a"}]));
    params["configuration"] = json!({"returnImmediately": true, "taskPushNotificationConfig": {
        "url": url, "token": "tok-1", "authentication": {"scheme": "Bearer", "credentials": "cred-1"}}});
    let task = session.call(None, "SendMessage", params)["task"].clone();
    let id = task["id"].as_str().unwrap().to_string();
    let got = updates_until(&rx, |b| {
        b["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    });
    for update in &got {
        for header in [
            "post /hook?k=v http/1.1\r\n",
            "\r\nx-a2a-notification-token: tok-1\r\n",
            "\r\nauthorization: bearer cred-1\r\n",
            "\r\ncontent-type: application/a2a+json\r\n",
        ] {
            assert!(update.head.contains(header), "{header}: {}", update.head);
        }
        let inner = update.body.as_object().unwrap().values().next().unwrap();
        assert_eq!(inner["taskId"], id.as_str(), "{}", update.body);
    }
    let kinds: Vec<String> = got
        .iter()
        .map(|g| match &g.body {
            b if b.get("statusUpdate").is_some() => {
                format!(
                    "status {}",
                    b["statusUpdate"]["status"]["state"].as_str().unwrap()
                )
            }
            b if b.get("artifactUpdate").is_some() => "artifact".to_string(),
            other => panic!("not a StreamResponse: {other}"),
        })
        .collect();
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("status TASK_STATE_WORKING"),
        "{kinds:?}"
    );
    assert!(
        kinds.iter().filter(|k| *k == "artifact").count() >= 2,
        "{kinds:?}"
    );
    let text: String = got
        .iter()
        .filter_map(|g| g.body["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert!(text.starts_with("one a\ntwo"), "{text:?}");
    // The config reads back, lists, and is deleted.
    let config = session.call(
        None,
        "GetTaskPushNotificationConfig",
        json!({"taskId": id, "id": id}),
    );
    assert_eq!(
        (config["url"].as_str(), config["taskId"].as_str()),
        (Some(url.as_str()), Some(id.as_str()))
    );
    let listed = session.call(
        None,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
    );
    assert_eq!(listed["configs"].as_array().unwrap().len(), 1, "{listed}");
    session.call(
        None,
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": id, "id": id}),
    );
    session.call(
        None,
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": id, "id": id}),
    );
    let listed = session.call(
        None,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
    );
    assert_eq!(listed["configs"], json!([]));
}

#[test]
fn configs_are_shown_without_their_secrets_and_one_not_found_is_named() {
    let home = Home::new();
    let session = on_loopback(&home);
    let task = session.send(None, "x", true);
    let id = task["id"].as_str().unwrap().to_string();
    let url = "http://127.0.0.1:9/hook";
    let set = session.call(
        None,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "id": "c1", "url": url, "token": "tok-3",
            "authentication": {"scheme": "Bearer", "credentials": "cred-3"}}),
    );
    let got = session.call(
        None,
        "GetTaskPushNotificationConfig",
        json!({"taskId": id, "id": "c1"}),
    );
    let listed = session.call(
        None,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
    );
    let old = session.call(
        None,
        "tasks/pushNotificationConfig/get",
        json!({"id": id, "pushNotificationConfigId": "c1"}),
    );
    // Shown without its token and credentials, to whoever asks; the scheme is no secret.
    for shown in [&set, &got, &listed, &old] {
        let text = shown.to_string();
        assert!(
            text.contains(url) && !text.contains("tok-3") && !text.contains("cred-3"),
            "a config is shown without its secrets: {text}"
        );
    }
    assert_eq!(set["authentication"], json!({"scheme": "Bearer"}), "{set}");
    session.call(
        None,
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": id, "id": "c1"}),
    );
    let gone = session.rpc(
        None,
        "GetTaskPushNotificationConfig",
        json!({"taskId": id, "id": "c1"}),
    );
    let message = gone["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("'c1'") && message.contains(&id),
        "a config not found is named with its task: {message}"
    );
}

#[test]
fn a_receiver_of_a_0_3_config_gets_the_task_at_every_update() {
    let home = Home::new();
    let session = on_loopback(&home);
    // 0.3: the config with the send; each update (status change or artifact) delivers the task
    // as it stands — 0.3's push payload is the Task object.
    let (url, rx) = receiver();
    let mut params = send_params(&["b"], false);
    params["configuration"]["pushNotificationConfig"] =
        json!({"id": "c1", "url": url, "token": "tok-2"});
    let task = session.call(None, "message/send", params);
    let id = task["id"].as_str().unwrap().to_string();
    let mut got = updates_until(&rx, |b| b["status"]["state"] == "completed");
    // The last artifact, then the final status: the task, completed, both times.
    got.push(rx.recv_timeout(WAIT).expect("the final status too"));
    let states: Vec<&str> = got
        .iter()
        .map(|g| g.body["status"]["state"].as_str().unwrap())
        .collect();
    assert_eq!(states[0], "working", "{states:?}");
    assert!(
        states.len() >= 4,
        "a working status, the streamed chunk(s), the last artifact and the final status: {states:?}"
    );
    assert_eq!(
        states[states.len() - 2..],
        ["completed", "completed"],
        "{states:?}"
    );
    let chunked = got.iter().any(|g| {
        g.body["status"]["state"] == "working"
            && g.body["artifacts"][0]["parts"][0]["text"] == "one b"
    });
    assert!(chunked, "a streamed chunk delivered the task as it stood");
    for update in &got {
        assert_eq!(
            (update.body["kind"].as_str(), update.body["id"].as_str()),
            (Some("task"), Some(id.as_str()))
        );
        assert!(
            update.head.contains("x-a2a-notification-token: tok-2"),
            "{}",
            update.head
        );
        assert!(!update.head.contains("authorization"), "{}", update.head);
    }
    let last = &got.last().unwrap().body;
    assert_eq!(
        last["artifacts"][0]["parts"][0]["text"], "one b\ntwo",
        "{last}"
    );
    // Set afterwards on the 0.3 side: shown back in the 0.3 shape.
    let set = session.call(
        None,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": id, "pushNotificationConfig": {"id": "c2", "url": url}}),
    );
    assert_eq!(
        set,
        json!({"taskId": id, "pushNotificationConfig": {"id": "c2", "url": url}})
    );
    let listed = session.call(None, "tasks/pushNotificationConfig/list", json!({"id": id}));
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    let got = session.call(
        None,
        "tasks/pushNotificationConfig/get",
        json!({"id": id, "pushNotificationConfigId": "c2"}),
    );
    assert_eq!(got["pushNotificationConfig"]["id"], "c2");
}

#[test]
fn webhooks_at_addresses_no_receiver_may_be_at_are_never_connected_to() {
    let home = Home::new();
    let session = start(&home, json!(true), TWO_CHUNKS, json!({}));
    let task = session.send(None, "x", true);
    let id = task["id"].as_str().unwrap().to_string();
    let (listener, port) = untouched();
    let v6 = TcpListener::bind("[::1]:0").ok();
    let v6_port = v6.as_ref().map_or(9, |l| l.local_addr().unwrap().port());
    for (url, says) in [
        (format!("http://127.0.0.1:{port}/"), "loopback"),
        (format!("http://[::ffff:127.0.0.1]:{port}/"), "loopback"),
        (
            "http://169.254.169.254/latest/meta-data/".to_string(),
            "link-local",
        ),
        ("http://10.0.0.1/".to_string(), "private"),
        (format!("http://[::1]:{v6_port}/"), "loopback"),
    ] {
        let answer = session.rpc(
            None,
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "url": url}),
        );
        assert_eq!(answer["error"]["code"], -32602, "{url}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(says) && message.contains("network.push.allow"),
            "{url}: {message}"
        );
    }
    // A name resolving to loopback is judged once resolved, at delivery: refused and logged.
    let mut params = send_params(&["y"], true);
    params["configuration"]["pushNotificationConfig"] =
        json!({"url": format!("http://localhost:{port}/secret-path"), "token": "tok-never-logged"});
    let task = session.call(None, "message/send", params);
    let named = task["id"].as_str().unwrap().to_string();
    wait_until(WAIT, "the refusal in the log", || {
        let logs = home.mur(&["logs", &session.id]).stdout;
        logs.lines().any(|l| {
            l.starts_with(&named)
                && l.contains("push to localhost:")
                && l.contains("refused, never connected to")
                && l.contains("loopback")
        })
    });
    let logs = home.mur(&["logs", &session.id]).stdout;
    assert!(
        !logs.contains("tok-never-logged") && !logs.contains("secret-path"),
        "a log line names the host and port only: {logs}"
    );
    assert_never_connected(&listener);
    if let Some(v6) = v6 {
        v6.set_nonblocking(true).unwrap();
        assert_never_connected(&v6);
    }

    // The door itself, even where its host is allowed.
    let home = Home::new();
    let session = on_loopback(&home);
    let task = session.send(None, "x", true);
    let door_port = session.url.rsplit(':').next().unwrap();
    let url = format!("http://127.0.0.1:{door_port}/");
    let answer = session.rpc(
        None,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task["id"], "url": url}),
    );
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("own door"),
        "{answer}"
    );
}

#[test]
fn receivers_that_never_answer_cost_no_task_its_time() {
    let home = Home::new();
    let session = start(
        &home,
        json!({"allow": ["127.0.0.1"]}),
        "#!/bin/sh\ncat\n",
        json!({}),
    );
    // 100 receivers that take the connection and never answer, each a task's webhook; each of
    // those tasks is answered on time too.
    let stuck: Vec<TcpListener> = (0..100)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let mut slowest = Duration::ZERO;
    for listener in &stuck {
        let mut params = v1_send(json!([{"text": "stuck"}]));
        params["configuration"] = json!({"taskPushNotificationConfig": {
            "url": format!("http://127.0.0.1:{}/", listener.local_addr().unwrap().port())}});
        let began = Instant::now();
        let task = session.call(None, "SendMessage", params)["task"].clone();
        slowest = slowest.max(began.elapsed());
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    }
    assert!(slowest < Duration::from_secs(2), "a send took {slowest:?}");
    // Meanwhile a task with a live receiver is answered at once, and its receiver served.
    let (url, rx) = receiver();
    let began = Instant::now();
    let mut params = send_params(&["on time"], true);
    params["configuration"]["pushNotificationConfig"] = json!({"url": url});
    let task = session.call(None, "message/send", params);
    let took = began.elapsed();
    assert_eq!(state(&task), "completed", "{task}");
    assert!(
        took < Duration::from_secs(2),
        "a blocking send took {took:?} beside 100 stuck receivers"
    );
    // Its receiver is served while the stuck ones still hold their connections (10 s each).
    let got = rx
        .recv_timeout(Duration::from_secs(3))
        .expect("the live receiver served at once");
    assert_eq!(got.body["id"], task["id"], "{}", got.body);
    drop(stuck);
}

#[test]
fn a_caller_reaches_only_the_configs_of_its_own_tasks() {
    let home = Home::new();
    let scopes = json!([
        "message/send",
        "tasks/get",
        "CreateTaskPushNotificationConfig"
    ]);
    let auth = json!({"authentication": {"credentials": [
        {"name": "alice", "scopes": scopes},
        {"name": "bob", "scopes": scopes},
        {"name": "carol", "scopes": ["message/send", "tasks/get"]},
    ]}});
    let session = start(
        &home,
        json!({"allow": ["127.0.0.1"]}),
        "#!/bin/sh\ncat\n",
        auth,
    );
    let alice = home.token(&[&session.id, "alice"]);
    let bob = home.token(&[&session.id, "bob"]);
    let carol = home.token(&[&session.id, "carol"]);
    let (url, _rx) = receiver();
    let task = session.send(Some(&alice), "mine", true);
    let id = task["id"].as_str().unwrap();
    let set = json!({"taskId": id, "pushNotificationConfig": {"id": "c", "url": url}});
    session.call(
        Some(&alice),
        "tasks/pushNotificationConfig/set",
        set.clone(),
    );
    for (method, params) in [
        (
            "tasks/pushNotificationConfig/get",
            json!({"id": id, "pushNotificationConfigId": "c"}),
        ),
        ("tasks/pushNotificationConfig/list", json!({"id": id})),
        (
            "tasks/pushNotificationConfig/delete",
            json!({"id": id, "pushNotificationConfigId": "c"}),
        ),
        ("tasks/pushNotificationConfig/set", set.clone()),
    ] {
        assert_eq!(
            session.call_err(Some(&bob), method, params),
            -32001,
            "{method}"
        );
    }
    let listed = session.call(
        Some(&alice),
        "tasks/pushNotificationConfig/list",
        json!({"id": id}),
    );
    assert_eq!(
        listed.as_array().unwrap().len(),
        1,
        "bob deleted nothing: {listed}"
    );
    // A credential without the push scope is refused it.
    let refused = session.rpc_http(
        Some(&carol),
        "tasks/pushNotificationConfig/list",
        json!({"id": id}),
    );
    assert_eq!(refused.status, 403, "{}", refused.text());
}

#[test]
fn a_session_stopped_right_after_a_task_ends_still_delivers_its_final_update() {
    let home = Home::new();
    let mut session = on_loopback(&home);
    // Each update takes the receiver 250 ms: when the blocking send returns, the task's last
    // updates are still queued behind the earlier ones.
    let (url, rx) = receiver_after(Duration::from_millis(250));
    let mut params = v1_send(json!([{"text": "late"}]));
    params["configuration"] = json!({"taskPushNotificationConfig": {"url": url}});
    let task = session.call(None, "SendMessage", params)["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    session.signal(libc::SIGTERM);
    session.wait_exit(Duration::from_secs(10));
    let mut got = Vec::new();
    while let Ok(update) = rx.recv_timeout(Duration::from_secs(3)) {
        got.push(update.body);
    }
    let last = got.last().expect("the receiver got updates");
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "the final update reached the receiver after the stop began: {got:?}"
    );
}

#[test]
fn a_receiver_that_never_answers_does_not_hold_up_the_stop_and_what_it_missed_is_logged() {
    let home = Home::new();
    let mut session = on_loopback(&home);
    let stuck = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = stuck.local_addr().unwrap().port();
    let mut params = v1_send(json!([{"text": "stuck"}]));
    params["configuration"] = json!({"taskPushNotificationConfig": {
        "url": format!("http://127.0.0.1:{port}/secret-path"), "token": "tok-never-logged"}});
    let task = session.call(None, "SendMessage", params)["task"].clone();
    let id = task["id"].as_str().unwrap().to_string();
    let began = Instant::now();
    session.signal(libc::SIGTERM);
    session.wait_exit(Duration::from_secs(10));
    let took = began.elapsed();
    assert!(
        took < Duration::from_millis(2500),
        "the stop waited {took:?} for a receiver that never answers"
    );
    let logs = home.mur(&["logs", &session.id]).stdout;
    let missed = format!("push to 127.0.0.1:{port}: ");
    assert!(
        logs.lines().any(|l| l.starts_with(&id)
            && l.contains(&missed)
            && l.contains("update(s) not delivered: the session ended")),
        "every update not delivered is logged with its task and webhook: {logs}"
    );
    assert!(
        !logs.contains("tok-never-logged") && !logs.contains("secret-path"),
        "{logs}"
    );
    drop(stuck);
}

#[test]
fn an_https_webhook_is_kept_said_in_the_log_and_never_delivered_to() {
    let home = Home::new();
    let session = on_loopback(&home);
    let (listener, port) = untouched();
    let url = format!("https://127.0.0.1:{port}/hook");
    // With a send, and set afterwards: both kept, both said in the task's log.
    let mut params = v1_send(json!([{"text": "secure"}]));
    params["configuration"] = json!({"taskPushNotificationConfig": {"url": url, "id": "in-send"}});
    let task = session.call(None, "SendMessage", params)["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    let id = task["id"].as_str().unwrap().to_string();
    let set = session.call(
        None,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "id": "later", "url": url}),
    );
    assert_eq!(set["url"], url.as_str(), "{set}");
    let listed = session.call(
        None,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
    );
    assert_eq!(listed["configs"].as_array().unwrap().len(), 2, "{listed}");
    let said = format!("push to 127.0.0.1:{port}: https, and mur has no TLS client");
    wait_until(WAIT, "both https configs said in the log", || {
        let logs = home.mur(&["logs", &session.id]).stdout;
        logs.lines()
            .filter(|l| l.starts_with(&id) && l.contains(&said))
            .count()
            == 2
    });
    // The task's updates, queued for neither: its allowed host is never connected to.
    thread::sleep(Duration::from_millis(300));
    assert_never_connected(&listener);
}

/// A 0.3 client that set a config without an id cannot know the id it got, so its get of any id
/// that names no config finds that one (the TCK asks for "default"; a2a-sdk answers the first
/// config whatever is asked); a config the client named is found by its name only, and 1.0's
/// get, whose id is required, finds by id alone.
#[test]
fn a_0_3_get_of_an_unknown_id_finds_the_config_set_without_one() {
    let home = Home::new();
    let session = on_loopback(&home);
    let task = session.send(None, "x", true);
    let id = task["id"].as_str().unwrap().to_string();
    let get03 = |config: &str| {
        session.rpc(
            None,
            "tasks/pushNotificationConfig/get",
            json!({"id": id, "pushNotificationConfigId": config}),
        )
    };
    session.call(
        None,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": id, "pushNotificationConfig": {"id": "named", "url": "http://127.0.0.1:9/a"}}),
    );
    let before = get03("default");
    assert_eq!(
        before["error"]["code"], -32001,
        "only a named one: {before}"
    );
    session.call(
        None,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": id, "pushNotificationConfig": {"url": "http://127.0.0.1:9/b"}}),
    );
    let found = get03("default");
    assert_eq!(
        found["result"]["pushNotificationConfig"]["url"], "http://127.0.0.1:9/b",
        "{found}"
    );
    let named = get03("named");
    assert_eq!(
        named["result"]["pushNotificationConfig"]["url"], "http://127.0.0.1:9/a",
        "{named}"
    );
    let v1 = session.rpc(
        None,
        "GetTaskPushNotificationConfig",
        json!({"taskId": id, "id": "default"}),
    );
    assert_eq!(v1["error"]["code"], -32001, "{v1}");
}
