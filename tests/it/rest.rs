//! The HTTP+JSON (REST) binding at a real `mur run` door, both generations: 1.0's unprefixed
//! paths with its proto JSON, 0.3's `/v1` paths with its own; answers the bare objects, errors
//! HTTP statuses with a `google.rpc.Status` body, streams server-sent events of bare objects;
//! the same tasks, scopes and budget as JSON-RPC (one engine: a task sent by one binding is read
//! by the other), the token checked and the body counted from the head.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common;

use common::{
    gate::Gate,
    home::Home,
    http::{HttpResponse, find},
    session::{Session, v1_send},
    sse::Sse,
};
use serde_json::{Value, json};

/// `method` `path` with `body` (`A2A-Version: version` and a bearer `token` when given), on a
/// fresh connection.
fn rest(
    session: &Session,
    method: &str,
    path: &str,
    version: Option<&str>,
    token: Option<&str>,
    body: Option<&Value>,
) -> HttpResponse {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Content-Type", "application/a2a+json")];
    if let Some(version) = version {
        headers.push(("A2A-Version", version));
    }
    if let Some(auth) = &auth {
        headers.push(("Authorization", auth.as_str()));
    }
    let body = body.map(Value::to_string).unwrap_or_default();
    session
        .connect()
        .request(method, path, &headers, body.as_bytes())
}

/// A 1.0 call that must succeed: its JSON.
#[track_caller]
fn ok(response: HttpResponse) -> Value {
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    assert!(answer.get("jsonrpc").is_none(), "a bare object: {answer}");
    answer
}

/// The HTTP status and the `ErrorInfo` reason of a refusal, its body a `google.rpc.Status`
/// whose `code` is the HTTP status.
#[track_caller]
fn refused(response: &HttpResponse) -> (u16, String) {
    let body = response.json();
    let error = &body["error"];
    assert_eq!(error["code"], response.status, "{body}");
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
    let info = error["details"]
        .as_array()
        .and_then(|d| {
            d.iter()
                .find(|d| d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo")
        })
        .unwrap_or_else(|| panic!("no ErrorInfo: {body}"));
    assert_eq!(info["domain"], "a2a-protocol.org");
    let reason = info["reason"].as_str().unwrap().to_string();
    (response.status, reason)
}

/// Every event of an HTTP+JSON stream, to its end; none is a JSON-RPC envelope.
fn events(mut stream: Sse) -> Vec<Value> {
    assert!(stream.head.starts_with("HTTP/1.1 200"), "{}", stream.head);
    let all: Vec<Value> = std::iter::from_fn(|| stream.next()).collect();
    assert!(all.iter().all(|e| e.get("jsonrpc").is_none()), "{all:?}");
    all
}

const V1: &str = "A2A-Version: 1.0\r\n";

/// 1.0: send, get, list and stream at the paths the spec gives, the answers 1.0's objects
/// themselves; the task is the JSON-RPC door's too.
#[test]
fn v1_paths_answer_the_proto_json() {
    let home = Home::new();
    let session = home.start(&[]);
    let v1 = Some("1.0");
    let send = v1_send(json!([{"text": "hi"}, {"data": {"k": [1, 2]}}]));
    let answer = ok(rest(
        &session,
        "POST",
        "/message:send",
        v1,
        None,
        Some(&send),
    ));
    let task = &answer["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "hi");
    assert_eq!(
        task["artifacts"][0]["parts"][1]["data"],
        json!({"k": [1, 2]})
    );
    let id = task["id"].as_str().unwrap();

    let got = ok(rest(
        &session,
        "GET",
        &format!("/tasks/{id}?historyLength=1"),
        v1,
        None,
        None,
    ));
    assert_eq!(got["id"], id);
    assert_eq!(got["history"].as_array().unwrap().len(), 1, "{got}");
    let by_rpc = session.call(None, "GetTask", json!({"id": id}));
    assert_eq!(
        by_rpc["artifacts"], got["artifacts"],
        "one engine behind both"
    );

    ok(rest(
        &session,
        "POST",
        "/message:send",
        v1,
        None,
        Some(&send),
    ));
    let listed = ok(rest(
        &session,
        "GET",
        "/tasks?pageSize=1&includeArtifacts=true",
        v1,
        None,
        None,
    ));
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["totalSize"], 2, "{listed}");
    assert_eq!(listed["tasks"][0]["artifacts"][0]["parts"][0]["text"], "hi");
    assert!(!listed["nextPageToken"].as_str().unwrap().is_empty());

    let streamed = events(Sse::http_json(
        &session.url,
        "POST",
        "/message:stream",
        V1,
        send.to_string().as_bytes(),
    ));
    assert!(streamed[0]["task"]["id"].is_string(), "{streamed:?}");
    let last = streamed.last().unwrap();
    assert_eq!(
        last["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert!(
        streamed
            .iter()
            .any(|e| e["artifactUpdate"]["artifact"]["parts"][0]["text"] == "hi")
    );
}

/// 1.0's errors: each its HTTP status and A2A reason, as a2a-1.0.md §5.4 maps them, in a
/// `google.rpc.Status` body naming the field at fault.
#[test]
fn v1_errors_are_http_statuses_with_a_status_body() {
    let home = Home::new();
    let session = home.start(&[]);
    let v1 = Some("1.0");
    let send = v1_send(json!([{"text": "hi"}]));
    let id = session.send(None, "x", true)["id"]
        .as_str()
        .unwrap()
        .to_string();
    let missing = "/tasks/tsk_0190f0f0f0f07000800000000000abcd";
    let agent =
        json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}});
    let (not_found, invalid) = ((404, "TASK_NOT_FOUND"), (400, "INVALID_PARAMS"));
    let cases = [
        ("GET", missing.to_string(), None, not_found),
        ("POST", format!("{missing}:cancel"), None, not_found),
        (
            "POST",
            format!("/tasks/{id}:cancel"),
            None,
            (400, "TASK_NOT_CANCELABLE"),
        ),
        (
            "GET",
            format!("/tasks/{id}:subscribe"),
            None,
            (400, "UNSUPPORTED_OPERATION"),
        ),
        ("GET", "/tasks?pageSize=500".to_string(), None, invalid),
        ("GET", "/tasks?contextId=%zz".to_string(), None, invalid),
        (
            "GET",
            "/extendedAgentCard".to_string(),
            None,
            (400, "UNSUPPORTED_OPERATION"),
        ),
        ("POST", "/message:send".to_string(), Some(agent), invalid),
        (
            "POST",
            "/message:send".to_string(),
            Some(json!([1])),
            invalid,
        ),
    ];
    for (method, path, body, (status, reason)) in cases {
        let response = rest(&session, method, &path, v1, None, body.as_ref());
        assert_eq!(
            refused(&response),
            (status, reason.to_string()),
            "{method} {path}"
        );
    }
    let response = session.connect().request(
        "POST",
        "/message:send",
        &[("A2A-Version", "1.0")],
        b"{not json",
    );
    assert_eq!(refused(&response), (400, "PARSE_ERROR".into()));
    let bad = rest(
        &session,
        "POST",
        "/message:send",
        v1,
        None,
        Some(&json!({"message": {}})),
    );
    let violation = &bad.json()["error"]["details"][1];
    assert_eq!(
        violation["fieldViolations"][0]["field"], "params.message.messageId",
        "{violation}"
    );
    // A 1.0 path without the 1.0 header is 0.3's request, which 1.0's paths do not serve.
    let unversioned = rest(&session, "POST", "/message:send", None, None, Some(&send));
    assert_eq!(refused(&unversioned), (400, "VERSION_NOT_SUPPORTED".into()));
    let nowhere = rest(&session, "DELETE", "/tasks", v1, None, None);
    assert_eq!(nowhere.status, 404);
}

/// The push-config resources reach the very methods JSON-RPC names: what one answers, the other
/// does (with this door's configuration, the same refusal).
#[test]
fn push_config_paths_reach_the_json_rpc_methods() {
    let home = Home::new();
    let session = home.start(&[]);
    let task = session.send(None, "x", true);
    let id = task["id"].as_str().unwrap();
    let config = json!({"url": "https://example.com/hook", "id": "c1"});
    let cases = [
        (
            "POST",
            format!("/tasks/{id}/pushNotificationConfigs"),
            Some(config.clone()),
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "url": "https://example.com/hook", "id": "c1"}),
        ),
        (
            "GET",
            format!("/tasks/{id}/pushNotificationConfigs"),
            None,
            "ListTaskPushNotificationConfigs",
            json!({"taskId": id}),
        ),
        (
            "GET",
            format!("/tasks/{id}/pushNotificationConfigs/c1"),
            None,
            "GetTaskPushNotificationConfig",
            json!({"taskId": id, "id": "c1"}),
        ),
        (
            "DELETE",
            format!("/tasks/{id}/pushNotificationConfigs/c1"),
            None,
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": id, "id": "c1"}),
        ),
    ];
    for (method, path, body, rpc_method, params) in cases {
        let by_rest = rest(&session, method, &path, Some("1.0"), None, body.as_ref());
        let by_rpc = session.rpc(None, rpc_method, params);
        match by_rpc.get("error") {
            Some(error) => {
                let reason = error["data"][0]["reason"].as_str().unwrap().to_string();
                assert_eq!(refused(&by_rest).1, reason, "{method} {path}");
            }
            // Both took it (each its own call, so compared by shape, not by value).
            None => {
                let names =
                    |v: &Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
                assert_eq!(
                    names(&ok(by_rest)),
                    names(&by_rpc["result"]),
                    "{method} {path}"
                );
            }
        }
    }
    let old = rest(
        &session,
        "GET",
        &format!("/v1/tasks/{id}/pushNotificationConfigs"),
        None,
        None,
        None,
    );
    let by_rpc = session.rpc(None, "tasks/pushNotificationConfig/list", json!({"id": id}));
    let expected = if by_rpc.get("error").is_some() {
        400
    } else {
        200
    };
    assert_eq!(old.status, expected, "{}", old.text());
}

/// A live task, both generations: subscribing (GET and POST) gives its events from now on,
/// cancelling it answers the canceled task, and every subscriber's stream ends with that state.
#[test]
fn subscribe_and_cancel_a_live_task_in_both_generations() {
    let home = Home::new();
    let gate = Gate::new(&home);
    let session = home.start(&[&gate.capsule(&home)]);
    let mut send = v1_send(json!([{"text": "slow"}]));
    send["configuration"] = json!({"returnImmediately": true});
    let answer = ok(rest(
        &session,
        "POST",
        "/message:send",
        Some("1.0"),
        None,
        Some(&send),
    ));
    let id = answer["task"]["id"].as_str().unwrap().to_string();
    let new = Sse::http_json(
        &session.url,
        "GET",
        &format!("/tasks/{id}:subscribe"),
        V1,
        b"",
    );
    let old = Sse::http_json(
        &session.url,
        "POST",
        &format!("/v1/tasks/{id}:subscribe"),
        "",
        b"",
    );
    let canceled = ok(rest(
        &session,
        "POST",
        &format!("/tasks/{id}:cancel"),
        Some("1.0"),
        None,
        Some(&json!({})),
    ));
    assert_eq!(
        canceled["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    let new = events(new);
    assert_eq!(new[0]["task"]["id"], id.as_str(), "{new:?}");
    assert_eq!(
        new.last().unwrap()["statusUpdate"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
    let old = events(old);
    assert_eq!(old[0]["task"]["id"], id.as_str(), "{old:?}");
    let last = &old.last().unwrap()["statusUpdate"];
    assert_eq!(
        last["status"]["state"], "TASK_STATE_CANCELLED",
        "0.3's proto spells it so: {old:?}"
    );
    assert_eq!(last["final"], true);
    // Once ended, 0.3's cancel is refused as 1.0's is.
    let again = rest(
        &session,
        "POST",
        &format!("/v1/tasks/{id}:cancel"),
        None,
        None,
        None,
    );
    assert_eq!(refused(&again), (400, "TASK_NOT_CANCELABLE".into()));
    gate.open();
}

/// A door whose handler answers with the text it got, except that a first turn saying `ask`
/// asks `name?` (input required), `slow` is answered after a second, and `parts` is answered with the message it got
/// (`received.json`) and a note (`note.txt`); push notifications on, to 127.0.0.1 only.
fn asker(home: &Home) -> Session {
    let script = "#!/bin/sh\ninput=$(cat)\nif [ \"$MUR_TURN\" = 1 ] && [ \"$input\" = ask ]; then echo 'name?'; exit 10; fi\nif [ \"$input\" = slow ]; then sleep 1; fi\nif [ \"$input\" = parts ]; then cp \"$MUR_TASK_DIR/message.json\" \"$MUR_TASK_DIR/out/received.json\"; echo 'got parts' > \"$MUR_TASK_DIR/out/note.txt\"; fi\necho \"$input\"\n";
    let manifest = home.write_capsule(
        "asker",
        json!({"name": "asker", "version": "1.0.0",
               "network": {"push": {"allow": ["127.0.0.1"]}}}),
        Some(script),
    );
    home.start(&[manifest.to_str().unwrap()])
}

/// 0.3 at `/v1`: its proto's JSON in and out (`ROLE_USER`, `content`, parts without `kind`,
/// a send answered `{task}`), the stream's events `StreamResponse`s; a multi-turn task over
/// both generations' paths; 0.3 has no `ListTasks`, and its paths want no 1.0 header.
#[test]
fn v0_3_paths_speak_the_0_3_proto_json_and_continue_a_task() {
    let home = Home::new();
    let session = asker(&home);
    let message = |text: &str, task: Option<&str>| {
        let mut m = json!({"messageId": format!("m-{text}"), "role": "ROLE_USER",
                           "content": [{"text": text}]});
        if let Some(task) = task {
            m["taskId"] = json!(task);
        }
        json!({"message": m, "configuration": {"blocking": true}})
    };
    let asked = ok(rest(
        &session,
        "POST",
        "/v1/message:send",
        None,
        None,
        Some(&message("ask", None)),
    ));
    let task = &asked["task"];
    assert!(task.get("kind").is_none(), "{asked}");
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{asked}"
    );
    assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
    assert_eq!(task["status"]["message"]["content"][0]["text"], "name?");
    assert_eq!(task["history"][0]["content"][0]["text"], "ask");
    let id = task["id"].as_str().unwrap().to_string();

    // The second turn by 1.0's path: one task, whichever binding and generation.
    let mut turn = v1_send(json!([{"text": "Ada"}]));
    turn["message"]["taskId"] = json!(id);
    let done = ok(rest(
        &session,
        "POST",
        "/message:send",
        Some("1.0"),
        None,
        Some(&turn),
    ));
    assert_eq!(
        done["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
    let got = ok(rest(
        &session,
        "GET",
        &format!("/v1/tasks/{id}"),
        None,
        None,
        None,
    ));
    assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED", "{got}");
    assert_eq!(got["artifacts"][0]["parts"][0]["text"], "Ada");
    assert_eq!(got["history"].as_array().unwrap().len(), 3, "{got}");

    let streamed = events(Sse::http_json(
        &session.url,
        "POST",
        "/v1/message:stream",
        "",
        message("ask", None).to_string().as_bytes(),
    ));
    assert!(streamed[0]["task"]["id"].is_string(), "{streamed:?}");
    let last = &streamed.last().unwrap()["statusUpdate"];
    assert_eq!(
        last["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{streamed:?}"
    );
    assert_eq!(last["final"], true);
    assert!(
        streamed
            .iter()
            .all(|e| e.as_object().unwrap().len() == 1 && e.get("kind").is_none())
    );
}

/// 0.3's errors at `/v1`: 0.3 names no ListTasks; a 1.0 header on a 0.3 path is refused; an
/// unknown task is 404 naming its A2A type as a2a-sdk's 0.3 client reads it; the extended card
/// of a public door is not configured; a part of no kind is invalid.
#[test]
fn v0_3_errors_are_http_statuses() {
    let home = Home::new();
    let session = home.start(&[]);
    let id = session.send(None, "x", true)["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        rest(&session, "GET", "/v1/tasks", None, None, None).status,
        404
    );
    let versioned = rest(
        &session,
        "GET",
        &format!("/v1/tasks/{id}"),
        Some("1.0"),
        None,
        None,
    );
    assert_eq!(refused(&versioned), (400, "VERSION_NOT_SUPPORTED".into()));
    let missing = rest(
        &session,
        "GET",
        "/v1/tasks/tsk_0190f0f0f0f07000800000000000abcd",
        None,
        None,
        None,
    );
    assert_eq!(refused(&missing), (404, "TASK_NOT_FOUND".into()));
    assert_eq!(
        missing.json()["type"],
        "TaskNotFoundError",
        "the name 0.3's SDK reads"
    );
    let card = rest(&session, "GET", "/v1/card", None, None, None);
    assert_eq!(
        refused(&card),
        (400, "EXTENDED_AGENT_CARD_NOT_CONFIGURED".into())
    );
    let bad =
        json!({"message": {"messageId": "m", "role": "ROLE_USER", "content": [{"file": {}}]}});
    let bad = rest(&session, "POST", "/v1/message:send", None, None, Some(&bad));
    assert_eq!(refused(&bad).0, 400, "{}", bad.text());
}

/// A head announcing `len` bytes of body for `method path`, with `headers` (lines ending
/// `\r\n`); the body is not sent.
fn head_only(url: &str, method: &str, path: &str, headers: &str, len: usize) -> TcpStream {
    let mut stream = TcpStream::connect(url).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{headers}Content-Type: application/json\r\nContent-Length: {len}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream
}

/// The status line and headers the door answered on `stream`, and as much body as came.
fn answer_of(stream: &mut TcpStream) -> (u16, String) {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    while find(&bytes, b"\r\n\r\n").is_none() {
        let n = stream.read(&mut chunk).expect("an answer within 20 s");
        assert!(n > 0, "closed without an answer");
        bytes.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let status = text[9..12].parse().unwrap();
    (status, text)
}

/// At an authenticated door every REST path wants the token, checked from the head: a head
/// announcing a megabyte without one is refused 401 before a byte of its body is sent; a
/// credential's token reaches only its scopes (403 past them); the operator reaches all.
#[test]
fn an_authenticated_door_wants_the_token_from_the_head_and_its_scopes() {
    let home = Home::new();
    let manifest = home.write_capsule(
        "guarded",
        json!({"name": "guarded", "version": "1.0.0", "network": {"authentication": {"credentials": [
            {"name": "sender", "scopes": ["message/send"]},
        ]}}}),
        Some("#!/bin/sh\necho \"got $(cat)\"\n"),
    );
    let session = home.start(&[manifest.to_str().unwrap()]);
    let operator = home.token(&[&session.id]);
    let sender = home.token(&[&session.id, "sender"]);
    for (method, path) in [
        ("POST", "/message:send"),
        ("POST", "/v1/message:stream"),
        ("GET", "/tasks"),
    ] {
        let mut stream = head_only(&session.url, method, path, V1, 1 << 20);
        let (status, text) = answer_of(&mut stream);
        assert_eq!(status, 401, "{method} {path}: {text}");
        assert!(text.contains("WWW-Authenticate: Bearer realm="), "{text}");
    }
    let body = v1_send(json!([{"text": "x"}]));
    let unauthenticated = rest(
        &session,
        "POST",
        "/message:send",
        Some("1.0"),
        None,
        Some(&body),
    );
    assert_eq!(refused(&unauthenticated), (401, "UNAUTHENTICATED".into()));
    let sent = ok(rest(
        &session,
        "POST",
        "/message:send",
        Some("1.0"),
        Some(&sender),
        Some(&body),
    ));
    let id = sent["task"]["id"].as_str().unwrap();
    let forbidden = rest(
        &session,
        "GET",
        &format!("/tasks/{id}"),
        Some("1.0"),
        Some(&sender),
        None,
    );
    assert_eq!(refused(&forbidden), (403, "PERMISSION_DENIED".into()));
    assert!(
        forbidden
            .header("www-authenticate")
            .unwrap()
            .contains("insufficient_scope")
    );
    let got = ok(rest(
        &session,
        "GET",
        &format!("/tasks/{id}"),
        Some("1.0"),
        Some(&operator),
        None,
    ));
    assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED");
    let card = ok(rest(
        &session,
        "GET",
        "/extendedAgentCard",
        Some("1.0"),
        Some(&operator),
        None,
    ));
    assert!(card.get("url").is_none(), "1.0's card only: {card}");
    let old_card = ok(rest(
        &session,
        "GET",
        "/v1/card",
        None,
        Some(&operator),
        None,
    ));
    assert_eq!(old_card["protocolVersion"], "0.3.0");
}

/// REST bodies are counted in the memory budget from their heads, as `POST /`'s: heads
/// announcing 1 MiB each, their bodies held back, fill a 16 MiB budget, and the next is
/// refused 503 (`Retry-After`, `UNAVAILABLE`) from its head; once they go, a send is served.
#[test]
fn rest_bodies_are_counted_in_the_budget_from_their_heads() {
    let home = Home::new();
    let manifest = home.write_capsule(
        "small",
        json!({"name": "small", "version": "1.0.0", "lifecycle": {"memory_budget_mib": 16}}),
        Some("#!/bin/sh\ncat\n"),
    );
    let session = home.start(&[manifest.to_str().unwrap()]);
    let mut held = Vec::new();
    let refusal = loop {
        assert!(
            held.len() < 32,
            "16 MiB of budget holds fewer than 32 MiB of bodies"
        );
        let mut stream = head_only(&session.url, "POST", "/message:send", V1, 1 << 20);
        stream
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut peek = [0u8; 1];
        match stream.peek(&mut peek) {
            Ok(n) if n > 0 => {
                stream
                    .set_read_timeout(Some(Duration::from_secs(20)))
                    .unwrap();
                break answer_of(&mut stream);
            }
            _ => held.push(stream),
        }
    };
    assert!(held.len() >= 8, "{} held", held.len());
    let (status, text) = refusal;
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("Retry-After: 1"), "{text}");
    assert!(
        text.contains("\"UNAVAILABLE\"") && text.contains("RESOURCE_EXHAUSTED"),
        "{text}"
    );
    drop(held);
    let body = v1_send(json!([{"text": "after"}]));
    let answer = common::wait::wait_for(Duration::from_secs(10), "room again", || {
        let response = rest(
            &session,
            "POST",
            "/message:send",
            Some("1.0"),
            None,
            Some(&body),
        );
        (response.status == 200).then(|| response.json())
    });
    assert_eq!(answer["task"]["artifacts"][0]["parts"][0]["text"], "after");
}

/// Run an SDK's REST driver (`command`, given whether to take 0.3's transport) against an asker
/// door, once per generation: its one JSON line must say every check passed, through a
/// transport whose name matches the generation's.
fn sdk_over_rest(command: impl Fn(bool) -> std::process::Command, transports: [&str; 2]) {
    let home = Home::new();
    let session = asker(&home);
    for (legacy, transport) in [false, true].into_iter().zip(transports) {
        let out = command(legacy).arg(&session.url).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let last = stdout.lines().last().unwrap_or("");
        let summary: Value = serde_json::from_str(last).unwrap_or_else(|_| {
            panic!(
                "legacy {legacy}: no summary: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert_eq!(summary["ok"], true, "legacy {legacy}: {summary}");
        assert!(
            summary["transport"].as_str().unwrap().ends_with(transport),
            "{summary}"
        );
        assert!(summary["checked"].as_u64().unwrap() >= 34, "{summary}");
    }
}

/// A driver script of `tests/sdk/`.
fn driver(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sdk")
        .join(name)
}

/// The official a2a-sdk 1.x client, its `ClientFactory` allowed only HTTP+JSON, against a real
/// door: `tests/sdk/a2a_rest.py` checks send, get, list, the errors as the SDK's types, a stream,
/// a multi-turn task, a cancel, a resubscription, file and data parts, and push notifications
/// (a receiver of its own gets every update of a task, given with a send or set on the task)
/// through the native 1.0 `RestTransport`, then (`--legacy`) the same but what its 0.3
/// `CompatRestTransport` lacks (ListTasks, listing and deleting push configs) at the `/v1` paths;
/// on the wire no JSON-RPC. Recorded as skipped when the SDK cannot be had (no PyPI).
#[test]
fn a2a_sdk_1_over_http_json_in_both_generations() {
    let test = "a2a_sdk_1_over_http_json_in_both_generations";
    let Some(python) = crate::interop::installed(&crate::interop::PY1, test) else {
        return;
    };
    let command = |legacy: bool| {
        let mut command = std::process::Command::new(&python);
        command
            .arg(driver("a2a_rest.py"))
            .env("PYTHONDONTWRITEBYTECODE", "1");
        command.args(legacy.then_some("--legacy"));
        command
    };
    sdk_over_rest(command, ["RestTransport", "CompatRestTransport"]);
}

/// The official @a2a-js/sdk 1.x client given only its `RestTransportFactory`: the same checks,
/// push notifications included (`tests/sdk/a2a_rest.mjs`), through its `RestTransport`, then
/// with `legacyCompat` its `LegacyRestTransport` at the `/v1` paths. Recorded as skipped when
/// the SDK cannot be had.
#[test]
fn a2a_js_sdk_1_over_http_json_in_both_generations() {
    let test = "a2a_js_sdk_1_over_http_json_in_both_generations";
    let Some(dir) = crate::interop::installed(&crate::interop::JS1, test) else {
        return;
    };
    let command = |legacy: bool| {
        let mut command = std::process::Command::new("node");
        command
            .arg(driver("a2a_rest.mjs"))
            .arg("--sdk-dir")
            .arg(&dir);
        command.args(legacy.then_some("--legacy"));
        command
    };
    sdk_over_rest(command, ["RestTransport", "LegacyRestTransport"]);
}
