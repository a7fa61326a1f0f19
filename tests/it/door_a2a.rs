//! The door's two A2A generations on the wire (DESIGN.md §5, shared/a2a-1.0.md): raw JSON-RPC
//! against a real `mur run` door — the `A2A-Version` rules, 1.0 ProtoJSON shapes and errors,
//! `ListTasks`, the follow-up and validation rules, the methods each generation refuses, scopes
//! that grant their twins, and `murmur.StopSession`.

use crate::common;

use common::{
    gate::Gate,
    home::Home,
    session::{Session, send_params, v1_send},
    wait::WAIT,
};
use serde_json::{Value, json};

/// The JSON-RPC answer to `method` sent with the `A2A-Version` header `version` (none for
/// `None`), whatever generation the method is.
fn ask(session: &Session, version: Option<&str>, method: &str, params: Value) -> Value {
    let response = session.rpc_as(None, version, method, params);
    assert_eq!(response.status, 200, "{method}: {}", response.text());
    response.json()
}

/// The error code of a JSON-RPC answer that must be an error.
#[track_caller]
fn code(answer: &Value) -> i64 {
    assert!(answer.get("result").is_none(), "an error: {answer}");
    answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no code: {answer}"))
}

/// The `google.rpc.ErrorInfo` reason of a 1.0 error (its `data` is an array of `Any`).
#[track_caller]
fn reason(answer: &Value) -> String {
    let info = answer["error"]["data"]
        .as_array()
        .and_then(|data| {
            data.iter()
                .find(|d| d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo")
        })
        .unwrap_or_else(|| panic!("no ErrorInfo: {answer}"));
    assert_eq!(info["domain"], "a2a-protocol.org", "{answer}");
    info["reason"].as_str().unwrap_or("").to_string()
}

/// The field a -32602 names: 0.3 `data.field`, 1.0 the `BadRequest` field violation.
#[track_caller]
fn field(answer: &Value) -> String {
    assert_eq!(code(answer), -32602, "{answer}");
    let data = &answer["error"]["data"];
    let named = match data.as_array() {
        Some(any) => any
            .iter()
            .find(|d| d["@type"] == "type.googleapis.com/google.rpc.BadRequest")
            .map(|d| &d["fieldViolations"][0]["field"]),
        None => Some(&data["field"]),
    };
    named
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no field named: {answer}"))
        .to_string()
}

/// Every task the operator (or a public door's caller) can list: `ListTasks`' `totalSize`.
fn task_count(session: &Session, token: Option<&str>) -> u64 {
    let listed = session.call(token, "ListTasks", json!({}));
    listed["totalSize"].as_u64().expect("totalSize")
}

#[test]
fn both_generations_send_and_read_the_same_task() {
    let home = Home::new();
    let session = home.start(&[]);
    let answer = session.call(None, "SendMessage", v1_send(json!([{"text": "hi"}])));
    let task = &answer["task"];
    assert!(task.get("kind").is_none(), "1.0 has no kind: {answer}");
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
    assert_eq!(task["status"]["message"]["parts"], json!([{"text": "hi"}]));
    assert_eq!(task["artifacts"][0]["parts"], json!([{"text": "hi"}]));
    let told = &task["history"][0];
    assert_eq!(told["role"], "ROLE_USER");
    assert_eq!(
        (&told["taskId"], &told["contextId"]),
        (&task["id"], &task["contextId"])
    );
    assert!(task["status"]["timestamp"].as_str().unwrap().ends_with('Z'));

    // The same task read by a 0.3 client, in 0.3's shapes.
    let id = task["id"].as_str().unwrap();
    let old = session.call(None, "tasks/get", json!({"id": id}));
    assert_eq!(old["kind"], "task");
    assert_eq!(old["status"]["state"], "completed");
    assert_eq!(old["history"][0]["role"], "user");
    assert_eq!(
        old["artifacts"][0]["parts"],
        json!([{"kind": "text", "text": "hi"}])
    );

    // A 0.3 task read by a 1.0 client; historyLength 0 asks for no history at all.
    let sent = session.send(None, "old", true);
    let new = session.call(
        None,
        "GetTask",
        json!({"id": sent["id"], "historyLength": 0}),
    );
    assert_eq!(new["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(new["history"], json!([]));
    assert_eq!(new["artifacts"][0]["parts"], json!([{"text": "old"}]));
}

#[test]
fn return_immediately_answers_before_the_handler_has_ended() {
    let home = Home::new();
    let gate = Gate::new(&home);
    let session = home.start(&[&gate.capsule(&home)]);
    let mut quick = v1_send(json!([{"text": "q"}]));
    quick["configuration"] = json!({"returnImmediately": true});
    let task = session.call(None, "SendMessage", quick)["task"].clone();
    // Answered while the handler still waits on its gate.
    let state = task["status"]["state"].as_str().unwrap().to_string();
    gate.open();
    assert!(
        ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"].contains(&state.as_str()),
        "{task}"
    );
    let id = task["id"].as_str().unwrap();
    let done = session.wait_task(None, id, WAIT);
    assert_eq!(done["status"]["state"], "completed", "{done}");
}

#[test]
fn the_version_header_picks_the_generation() {
    let home = Home::new();
    let session = home.start(&[]);
    let old = || send_params(&["x"], true);
    let new = || v1_send(json!([{"text": "x"}]));
    for (version, method, params, want) in [
        (None, "message/send", old(), None),
        (Some("0.3"), "message/send", old(), None),
        (Some("0.3.9"), "message/send", old(), None),
        (Some(""), "message/send", old(), None),
        (Some("1.0"), "SendMessage", new(), None),
        (Some("1.0.1"), "SendMessage", new(), None),
        (None, "SendMessage", new(), Some(-32009)),
        (Some("0.3"), "GetTask", json!({"id": "x"}), Some(-32009)),
        (Some("1.0"), "message/send", old(), Some(-32601)),
        (Some("1.0"), "tasks/get", json!({"id": "x"}), Some(-32601)),
        (Some("1.1"), "SendMessage", new(), Some(-32009)),
        (Some("2.0"), "message/send", old(), Some(-32009)),
        (Some("garbage"), "message/send", old(), Some(-32009)),
        (Some("1.0"), "NoSuchMethod", json!({}), Some(-32601)),
    ] {
        let answer = ask(&session, version, method, params);
        let what = format!("{method} with A2A-Version {version:?}: {answer}");
        match want {
            None => assert!(answer["result"].is_object(), "{what}"),
            Some(want) => {
                assert_eq!(code(&answer), want, "{what}");
                let expected = if want == -32009 {
                    "VERSION_NOT_SUPPORTED"
                } else {
                    "METHOD_NOT_FOUND"
                };
                // A 1.0 method or a 1.0 header gets 1.0's error shape.
                assert_eq!(reason(&answer), expected, "{what}");
            }
        }
    }
    // Two headers are one too many.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": new()});
    let headers = [
        ("Content-Type", "application/json"),
        ("A2A-Version", "1.0"),
        ("A2A-Version", "0.3"),
    ];
    let response = session
        .connect()
        .request("POST", "/", &headers, body.to_string().as_bytes());
    assert_eq!(code(&response.json()), -32009, "{}", response.text());
}

#[test]
fn unsupported_methods_answer_the_codes_the_spec_names() {
    let home = Home::new();
    let session = home.start(&[]);
    let id = json!({"id": "tsk_0190f0f0f0f07000800000000000abcd"});
    let cases = [
        ("tasks/pushNotificationConfig/set", id.clone(), -32003),
        ("tasks/pushNotificationConfig/get", id.clone(), -32003),
        ("tasks/pushNotificationConfig/list", id.clone(), -32003),
        ("tasks/pushNotificationConfig/delete", id.clone(), -32003),
        ("agent/getAuthenticatedExtendedCard", json!({}), -32007),
        ("CreateTaskPushNotificationConfig", id.clone(), -32003),
        ("GetTaskPushNotificationConfig", id.clone(), -32003),
        ("ListTaskPushNotificationConfigs", id.clone(), -32003),
        ("DeleteTaskPushNotificationConfig", id.clone(), -32003),
        ("GetExtendedAgentCard", json!({}), -32004),
        ("tasks/list", json!({}), -32601),
    ];
    for (method, params, want) in cases {
        let answer = session.rpc(None, method, params);
        assert_eq!(code(&answer), want, "{method}: {answer}");
    }
    let answer = session.rpc(None, "CreateTaskPushNotificationConfig", id.clone());
    assert_eq!(reason(&answer), "PUSH_NOTIFICATION_NOT_SUPPORTED");
    assert_eq!(task_count(&session, None), 0, "nothing was started");
}

/// A push config inside a send is ignored, as both reference servers do (the card says
/// `pushNotifications: false`): the task runs, in either generation.
#[test]
fn a_push_config_inside_a_send_is_ignored_and_the_task_runs() {
    let home = Home::new();
    let session = home.start(&[]);
    let hook = json!({"url": "https://example.com/hook"});
    let mut old = send_params(&["old"], true);
    old["configuration"]["pushNotificationConfig"] = hook.clone();
    let task = session.call(None, "message/send", old);
    assert_eq!(task["status"]["state"], "completed", "{task}");
    let mut new = v1_send(json!([{"text": "new"}]));
    new["configuration"] = json!({"taskPushNotificationConfig": hook});
    let task = session.call(None, "SendMessage", new);
    assert_eq!(
        task["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{task}"
    );
    assert_eq!(task["task"]["artifacts"][0]["parts"][0]["text"], "new");
    assert_eq!(task_count(&session, None), 2);
}

/// ProtoJSON: an enum is read by name or by number; `TASK_STATE_UNSPECIFIED` and `UNRECOGNIZED`
/// (what @a2a-js/sdk 1.x sends for `listTasks({})`) filter nothing; answers spell names.
#[test]
fn enums_are_read_by_name_or_number_and_an_unset_filter_filters_nothing() {
    let home = Home::new();
    let session = home.start(&[]);
    let mut numbered = v1_send(json!([{"text": "by number"}]));
    numbered["message"]["role"] = json!(1);
    let task = session.call(None, "SendMessage", numbered);
    assert_eq!(task["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(task["task"]["history"][0]["role"], "ROLE_USER", "names out");
    session.call(None, "SendMessage", v1_send(json!([{"text": "by name"}])));
    let total = |status: Value| {
        let listed = session.call(None, "ListTasks", json!({"status": status}));
        listed["totalSize"]
            .as_u64()
            .unwrap_or_else(|| panic!("{listed}"))
    };
    for status in [
        json!("UNRECOGNIZED"),
        json!("TASK_STATE_UNSPECIFIED"),
        json!(0),
        json!(3),
        json!("TASK_STATE_COMPLETED"),
    ] {
        assert_eq!(total(status.clone()), 2, "{status}");
    }
    for status in [
        json!(2),
        json!("TASK_STATE_WORKING"),
        json!("TASK_STATE_REJECTED"),
    ] {
        assert_eq!(total(status.clone()), 0, "{status}");
    }
    for status in [json!(42), json!("completed"), json!(true)] {
        let refused = session.rpc(None, "ListTasks", json!({"status": status}));
        assert_eq!(field(&refused), "params.status", "{status}: {refused}");
    }
    let mut agent = v1_send(json!([{"text": "x"}]));
    agent["message"]["role"] = json!(2);
    let refused = session.rpc(None, "SendMessage", agent);
    assert_eq!(field(&refused), "params.message.role", "{refused}");
}

/// A capsule with one credential that may only send, behind a bearer token.
fn guarded(home: &Home) -> Session {
    let manifest = home.write_capsule(
        "guarded",
        json!({"name": "guarded", "version": "1.0.0", "network": {"authentication": {"credentials": [
            {"name": "sender", "scopes": ["message/send"]},
        ]}}}),
        Some("#!/bin/sh\necho \"got $(cat)\"\n"),
    );
    home.start(&[manifest.to_str().unwrap()])
}

/// The sorted member names of a JSON object.
fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    keys
}

/// The extended card answers in the generation that asked: 1.0's `GetExtendedAgentCard` a pure
/// 1.0 card, 0.3's `agent/getAuthenticatedExtendedCard` a pure 0.3 card. The public card keeps
/// both generations' members.
#[test]
fn each_generation_gets_an_extended_card_of_its_own_shape() {
    let home = Home::new();
    let session = guarded(&home);
    let operator = home.token(&[&session.id]);
    let only_0_3 = [
        "url",
        "preferredTransport",
        "protocolVersion",
        "security",
        "supportsAuthenticatedExtendedCard",
    ];
    let only_1_0 = ["supportedInterfaces", "securityRequirements"];
    let new = session.call(Some(&operator), "GetExtendedAgentCard", json!({}));
    for member in only_0_3 {
        assert!(new.get(member).is_none(), "no 0.3 {member} in 1.0: {new}");
    }
    assert_eq!(
        new["securitySchemes"],
        json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}})
    );
    assert_eq!(new["capabilities"]["extendedAgentCard"], true);
    assert_eq!(new["supportedInterfaces"][0]["protocolVersion"], "1.0");
    let old = session.call(
        Some(&operator),
        "agent/getAuthenticatedExtendedCard",
        json!({}),
    );
    for member in only_1_0 {
        assert!(old.get(member).is_none(), "no 1.0 {member} in 0.3: {old}");
    }
    assert!(
        old["capabilities"].get("extendedAgentCard").is_none(),
        "{old}"
    );
    assert_eq!(
        old["securitySchemes"],
        json!({"bearer": {"type": "http", "scheme": "Bearer"}})
    );
    assert_eq!(old["supportsAuthenticatedExtendedCard"], true);
    assert_eq!(old["url"], format!("http://{}/", session.url));
    // Both name the session; the public card, which does not, serves both generations.
    let names = |card: &Value| card["capabilities"]["extensions"][0]["params"]["sessionId"].clone();
    assert_eq!(
        (names(&new), names(&old)),
        (json!(session.id), json!(session.id))
    );
    let public = session.card();
    for member in only_0_3.iter().chain(&only_1_0) {
        assert!(
            public.get(member).is_some(),
            "public card has {member}: {public}"
        );
    }
    assert_eq!(
        keys(&public["securitySchemes"]["bearer"]),
        ["httpAuthSecurityScheme", "scheme", "type"]
    );
}

/// A 401 or 403 on a JSON-RPC POST is a JSON-RPC error too, with the request's id, besides the
/// HTTP status and `WWW-Authenticate`; a missing token, a forged one and a mangled one read
/// alike.
#[test]
fn refusals_at_the_gate_carry_a_json_rpc_error() {
    let home = Home::new();
    let session = guarded(&home);
    let sender = home.token(&[&session.id, "sender"]);
    let post = |token: Option<&str>, version: Option<&str>, method: &str| {
        let body =
            json!({"jsonrpc": "2.0", "id": "req-9", "method": method, "params": {"id": "t"}});
        session
            .connect()
            .post_as("/", token, version, body.to_string().as_bytes())
    };
    let forged = format!("{}x", &sender[..sender.len() - 1]);
    let mut bodies = Vec::new();
    for token in [None, Some("not-a-token"), Some(forged.as_str())] {
        let refused = post(token, None, "tasks/get");
        assert_eq!(refused.status, 401, "{}", refused.text());
        let challenge = refused.header("www-authenticate").unwrap_or_default();
        assert_eq!(challenge, "Bearer realm=\"guarded\"");
        let answer = refused.json();
        assert_eq!(
            (&answer["jsonrpc"], &answer["id"]),
            (&json!("2.0"), &json!("req-9"))
        );
        assert!(answer["error"]["code"].is_i64(), "{answer}");
        assert!(answer["error"]["message"].is_string(), "{answer}");
        bodies.push(answer);
    }
    assert!(
        bodies.windows(2).all(|w| w[0] == w[1]),
        "never says which part failed: {bodies:?}"
    );
    // Under 1.0 the error is ProtoJSON, with an ErrorInfo.
    let refused = post(None, Some("1.0"), "GetTask");
    assert_eq!(reason(&refused.json()), "UNAUTHENTICATED");
    // A body that is not JSON still gets a JSON-RPC answer (id null).
    let refused = session.connect().post("/", None, b"{not json");
    assert_eq!((refused.status, &refused.json()["id"]), (401, &Value::Null));
    // A valid token lacking the scope: 403, the method's generation's shape.
    for (version, method) in [(None, "tasks/get"), (Some("1.0"), "GetTask")] {
        let refused = post(Some(&sender), version, method);
        assert_eq!(refused.status, 403, "{method}: {}", refused.text());
        assert!(
            refused
                .header("www-authenticate")
                .is_some_and(|c| c.contains("insufficient_scope"))
        );
        let answer = refused.json();
        assert_eq!(answer["id"], "req-9", "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains(method),
            "{answer}"
        );
        if version.is_some() {
            assert_eq!(reason(&answer), "PERMISSION_DENIED");
        }
    }
}

/// CORS only where `network.cors` lists origins: a listed origin's preflight is answered and its
/// answers are readable; any other origin gets no CORS header; a door without the list answers
/// as it always did.
#[test]
fn cors_answers_only_the_origins_the_manifest_lists() {
    let home = Home::new();
    let app = "https://app.example.com";
    let manifest = home.write_capsule(
        "browser",
        json!({"name": "browser", "version": "1.0.0", "network": {"cors": [app, "http://localhost:5173"]}}),
        Some("#!/bin/sh\necho \"got $(cat)\"\n"),
    );
    let session = home.start(&[manifest.to_str().unwrap()]);
    let preflight = |session: &Session, origin: &str, path: &str| {
        session.connect().request(
            "OPTIONS",
            path,
            &[
                ("Origin", origin),
                ("Access-Control-Request-Method", "POST"),
                (
                    "Access-Control-Request-Headers",
                    "authorization, content-type, a2a-version",
                ),
            ],
            b"",
        )
    };
    for path in ["/", "/.well-known/agent-card.json"] {
        let allowed = preflight(&session, app, path);
        assert_eq!(allowed.status / 100, 2, "{path}: {}", allowed.text());
        assert_eq!(allowed.header("access-control-allow-origin"), Some(app));
        let headers = allowed
            .header("access-control-allow-headers")
            .unwrap_or_default()
            .to_ascii_lowercase();
        for header in ["authorization", "content-type", "a2a-version"] {
            assert!(headers.contains(header), "{headers}");
        }
        assert!(
            allowed
                .header("access-control-allow-methods")
                .unwrap_or_default()
                .contains("POST")
        );
    }
    let stranger = preflight(&session, "https://evil.example", "/");
    assert_eq!(stranger.status, 403);
    assert_eq!(stranger.header("access-control-allow-origin"), None);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": send_params(&["hi"], true)});
    let call = |origin: &str| {
        session.connect().request(
            "POST",
            "/",
            &[("Content-Type", "application/json"), ("Origin", origin)],
            body.to_string().as_bytes(),
        )
    };
    let answered = call(app);
    assert_eq!(answered.status, 200);
    assert_eq!(answered.header("access-control-allow-origin"), Some(app));
    assert_eq!(answered.json()["result"]["status"]["state"], "completed");
    assert_eq!(
        call("https://evil.example").header("access-control-allow-origin"),
        None
    );
    let card = session.connect().request(
        "GET",
        "/.well-known/agent-card.json",
        &[("Origin", app)],
        b"",
    );
    assert_eq!(card.header("access-control-allow-origin"), Some(app));
    // Without the list nothing changes: no preflight, no CORS header.
    let plain = home.start(&[]);
    assert_eq!(preflight(&plain, app, "/").status, 405);
    let card = plain.connect().request(
        "GET",
        "/.well-known/agent-card.json",
        &[("Origin", app)],
        b"",
    );
    assert_eq!(
        (card.status, card.header("access-control-allow-origin")),
        (200, None)
    );
    // A list entry that is not an origin is refused at admission, naming it.
    let bad = home.write_capsule(
        "bad",
        json!({"name": "bad", "version": "1.0.0", "network": {"cors": [app, "https://app.example.com/"]}}),
        Some("#!/bin/sh\ncat\n"),
    );
    let refused = home.mur(&["run", bad.to_str().unwrap(), "--task", "x"]);
    assert_ne!(refused.code, Some(0));
    assert!(
        refused.stderr.contains("network.cors[1]"),
        "{}",
        refused.stderr
    );
}

#[test]
fn errors_in_1_0_carry_error_info() {
    let home = Home::new();
    let session = home.start(&[]);
    let unknown = session.rpc(
        None,
        "GetTask",
        json!({"id": "tsk_0190f0f0f0f07000800000000000abcd"}),
    );
    assert_eq!(
        (code(&unknown), reason(&unknown)),
        (-32001, "TASK_NOT_FOUND".into())
    );
    let done = session.call(None, "SendMessage", v1_send(json!([{"text": "x"}])));
    let cancel = session.rpc(None, "CancelTask", json!({"id": done["task"]["id"]}));
    assert_eq!(
        (code(&cancel), reason(&cancel)),
        (-32002, "TASK_NOT_CANCELABLE".into())
    );
    let message = cancel["error"]["message"].as_str().unwrap();
    assert!(message.contains("TASK_STATE_COMPLETED"), "{message}");
    // 0.3 errors keep 0.3's shape: no ErrorInfo array.
    let old = session.rpc(
        None,
        "tasks/get",
        json!({"id": "tsk_0190f0f0f0f07000800000000000abcd"}),
    );
    assert_eq!(code(&old), -32001);
    assert!(old["error"].get("data").is_none(), "{old}");
}

#[test]
fn a_message_naming_a_task_never_starts_a_new_one() {
    let home = Home::new();
    let gate = Gate::new(&home);
    let session = home.start(&[&gate.capsule(&home)]);
    let running = session.send(None, "first", false);
    let id = running["id"].as_str().unwrap().to_string();
    let context = running["contextId"].as_str().unwrap().to_string();
    let follow_up = |task: &str, context: Option<&str>, v1: bool| {
        let (version, method, mut params) = if v1 {
            (
                Some("1.0"),
                "SendMessage",
                v1_send(json!([{"text": "more"}])),
            )
        } else {
            (None, "message/send", send_params(&["more"], true))
        };
        params["message"]["taskId"] = json!(task);
        if let Some(context) = context {
            params["message"]["contextId"] = json!(context);
        }
        ask(&session, version, method, params)
    };
    for v1 in [false, true] {
        // Still working: not waiting for input.
        let live = follow_up(&id, None, v1);
        assert_eq!(code(&live), -32004, "{live}");
        // No such task.
        let unknown = follow_up("tsk_0190f0f0f0f07000800000000000abcd", None, v1);
        assert_eq!(code(&unknown), -32001, "{unknown}");
        // The task's context is not the one the message names.
        let other = follow_up(&id, Some("ctx-elsewhere"), v1);
        assert_eq!(field(&other), "params.message.contextId", "{other}");
    }
    gate.open();
    let done = session.wait_task(None, &id, WAIT);
    assert_eq!(done["status"]["state"], "completed", "{done}");
    // Ended: 0.3 names the state in a -32602, 1.0 answers UnsupportedOperation.
    let old = follow_up(&id, Some(&context), false);
    assert_eq!(field(&old), "params.message.taskId", "{old}");
    assert!(
        old["error"]["message"]
            .as_str()
            .unwrap()
            .contains("completed"),
        "{old}"
    );
    let new = follow_up(&id, None, true);
    assert_eq!(
        (code(&new), reason(&new)),
        (-32004, "UNSUPPORTED_OPERATION".into())
    );
    assert_eq!(
        task_count(&session, None),
        1,
        "no refused follow-up started a task"
    );
}

/// One refused request a line: the A2A-Version sent (`-` for none), the method, the field the
/// -32602 must name, and the params.
const REFUSED: &str = r#"
- message/send params.message.messageId {"message":{"kind":"message","role":"user","parts":[{"kind":"text","text":"x"}]}}
- message/send params.message.role {"message":{"kind":"message","messageId":"m","parts":[{"kind":"text","text":"x"}]}}
- message/send params.message.role {"message":{"kind":"message","messageId":"m","role":"robot","parts":[{"kind":"text","text":"x"}]}}
- message/send params.message.parts {"message":{"kind":"message","messageId":"m","role":"user","parts":[]}}
- message/send params.message.parts[0] {"message":{"kind":"message","messageId":"m","role":"user","parts":[{"text":"x","data":{}}]}}
- message/send params.message.parts[0].file {"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"file","file":{"bytes":"aGk=","uri":"https://x"}}]}}
- message/send params.message params.message
- message/send params.message.parts[0] {"message":{"kind":"message","messageId":"m","role":"user","parts":[{}]}}
- message/send params.message.parts[0].file.bytes {"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"file","file":{"bytes":"%%%"}}]}}
- message/send params.message.parts[0].file.uri {"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"file","file":{"uri":"not a url"}}]}}
- message/send params.message.parts[0].file.name {"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"file","file":{"bytes":"aGk=","name":"x/y"}}]}}
- message/send params.message.parts[0].data {"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"data","data":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}]}}
- message/send params.message.contextId {"message":{"kind":"message","messageId":"m","role":"user","contextId":"a\u0000b","parts":[{"kind":"text","text":"x"}]}}
- message/send params.message.metadata {"message":{"kind":"message","messageId":"m","role":"user","metadata":{"deep":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]},"parts":[{"kind":"text","text":"x"}]}}
- tasks/get params.historyLength {"id":"tsk_0190f0f0f0f07000800000000000abcd","historyLength":"two"}
- tasks/get params.id {"taskId":"tsk_0190f0f0f0f07000800000000000abcd"}
1.0 SendMessage params.message.role {"message":{"messageId":"m","role":"user","parts":[{"text":"x"}]}}
1.0 SendMessage params.message.parts[0] {"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x","url":"https://x"}]}}
1.0 SendMessage params.message.parts[0].raw {"message":{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"%%%"}]}}
1.0 SendMessage params.message.parts[0] {"message":{"messageId":"m","role":"ROLE_USER","parts":[{}]}}
1.0 SendMessage params.message.contextId {"message":{"messageId":"m","role":"ROLE_USER","contextId":"ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc","parts":[{"text":"x"}]}}
1.0 SendMessage params.message.parts[0].url {"message":{"messageId":"m","role":"ROLE_USER","parts":[{"url":"not a url"}]}}
1.0 SendMessage params.message.parts[0].filename {"message":{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"aGk=","filename":"a/b"}]}}
1.0 SendMessage params.configuration.returnImmediately {"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"returnImmediately":"yes"}}
1.0 SendMessage params.message.parts[0].data {"message":{"messageId":"m","role":"ROLE_USER","parts":[{"data":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}]}}
1.0 GetTask params.historyLength {"id":"tsk_0190f0f0f0f07000800000000000abcd","historyLength":-1}
1.0 ListTasks params.pageSize {"pageSize":0}
1.0 ListTasks params.pageSize {"pageSize":101}
1.0 ListTasks params.pageToken {"pageToken":"not-one-of-ours"}
1.0 ListTasks params.status {"status":"done"}
"#;

#[test]
fn bad_requests_are_refused_naming_the_field() {
    let home = Home::new();
    let session = home.start(&[]);
    for line in REFUSED.lines().filter(|l| !l.is_empty()) {
        let mut words = line.splitn(4, ' ');
        let (version, method, want) = (words.next(), words.next(), words.next());
        let version = version.filter(|v| *v != "-");
        let params = words.next().unwrap();
        // `params.message` stands for a message that is a string.
        let params: Value = serde_json::from_str(params).unwrap_or(json!({"message": params}));
        let answer = ask(&session, version, method.unwrap(), params);
        assert_eq!(field(&answer), want.unwrap(), "{line}: {answer}");
    }
    assert_eq!(task_count(&session, None), 0, "no refused message was kept");
}

#[test]
fn every_part_kind_round_trips_through_the_echo_door() {
    let home = Home::new();
    let session = home.start(&[]);
    let parts = json!([
        {"kind": "text", "text": "hi"},
        {"kind": "data", "data": {"k": [1, 2], "nested": {"ok": true}}},
        {"kind": "file", "file": {"bytes": "aGVsbG8=", "name": "h.txt", "mimeType": "text/plain"}},
        {"kind": "file", "file": {"uri": "https://example.com/f.png", "name": "f.png"}},
    ]);
    let mut params = send_params(&[], true);
    params["message"]["parts"] = parts.clone();
    let old = session.call(None, "message/send", params);
    assert_eq!(
        old["artifacts"][0]["parts"], parts,
        "echo answers every part: {old}"
    );
    let new = session.call(None, "GetTask", json!({"id": old["id"]}));
    let want = json!([
        {"text": "hi"},
        {"data": {"k": [1, 2], "nested": {"ok": true}}},
        {"raw": "aGVsbG8=", "filename": "h.txt", "mediaType": "text/plain"},
        {"url": "https://example.com/f.png", "filename": "f.png"},
    ]);
    assert_eq!(new["artifacts"][0]["parts"], want, "{new}");
    assert_eq!(new["history"][0]["parts"], want, "{new}");
    // And back: 1.0 in, 0.3 out.
    let sent = session.call(None, "SendMessage", v1_send(want));
    let read = session.call(None, "tasks/get", json!({"id": sent["task"]["id"]}));
    assert_eq!(read["artifacts"][0]["parts"], parts, "{read}");
}

#[test]
fn list_tasks_pages_newest_first_and_filters() {
    let home = Home::new();
    let session = home.start(&[]);
    let mut sent = vec![];
    for i in 0..5 {
        let mut params = v1_send(json!([{"text": format!("t{i}")}]));
        if i % 2 == 0 {
            params["message"]["contextId"] = json!("ctx-even");
        }
        sent.push(session.call(None, "SendMessage", params)["task"]["id"].clone());
    }
    let mut listed = vec![];
    let mut token = json!("");
    loop {
        let page = session.call(
            None,
            "ListTasks",
            json!({"pageSize": 2, "pageToken": token}),
        );
        assert_eq!(
            (&page["pageSize"], &page["totalSize"]),
            (&json!(2), &json!(5)),
            "{page}"
        );
        let tasks = page["tasks"].as_array().unwrap();
        assert!(tasks.len() <= 2 && !tasks.is_empty(), "{page}");
        assert!(
            tasks.iter().all(|t| t.get("artifacts").is_none()),
            "artifacts only when asked"
        );
        listed.extend(tasks.iter().map(|t| t["id"].clone()));
        token = page["nextPageToken"].clone();
        if token == "" {
            break;
        }
    }
    sent.reverse();
    assert_eq!(listed, sent, "every task once, newest first");
    let even = session.call(
        None,
        "ListTasks",
        json!({"contextId": "ctx-even", "includeArtifacts": true}),
    );
    assert_eq!(even["totalSize"], 3, "{even}");
    assert!(
        even["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["artifacts"].is_array())
    );
    let done = session.call(
        None,
        "ListTasks",
        json!({"status": "TASK_STATE_COMPLETED", "historyLength": 0}),
    );
    assert_eq!(done["totalSize"], 5);
    assert_eq!(done["tasks"][0]["history"], json!([]));
    let working = session.call(None, "ListTasks", json!({"status": "TASK_STATE_WORKING"}));
    assert_eq!(
        (&working["totalSize"], &working["tasks"]),
        (&json!(0), &json!([]))
    );
    let later = session.call(
        None,
        "ListTasks",
        json!({"statusTimestampAfter": "2999-01-01T00:00:00Z"}),
    );
    assert_eq!(later["totalSize"], 0);
}

#[test]
fn scopes_grant_their_twin_and_list_tasks_shows_each_credential_its_own() {
    let home = Home::new();
    let manifest = home.write_capsule(
        "guarded",
        json!({"name": "guarded", "version": "1.0.0", "network": {"authentication": {"credentials": [
            {"name": "old", "scopes": ["message/send", "tasks/get"]},
            {"name": "new", "scopes": ["SendMessage", "ListTasks"]},
            {"name": "sender", "scopes": ["SendMessage"]},
        ]}}}),
        Some("#!/bin/sh\necho \"got $(cat)\"\n"),
    );
    let session = home.start(&[manifest.to_str().unwrap()]);
    let token = |credential: &str| home.token(&[&session.id, credential]);
    let (operator, old, new, sender) = (
        home.token(&[&session.id]),
        token("old"),
        token("new"),
        token("sender"),
    );
    // Each scope grants its twin in the other generation.
    session.call(Some(&old), "SendMessage", v1_send(json!([{"text": "a"}])));
    session.send(Some(&old), "b", true);
    let mine = session.send(Some(&new), "c", true);
    session.call(Some(&sender), "message/send", send_params(&["d"], true));
    assert_eq!(
        task_count(&session, Some(&old)),
        2,
        "tasks/get grants ListTasks"
    );
    assert_eq!(
        task_count(&session, Some(&new)),
        1,
        "each credential sees its own"
    );
    assert_eq!(
        task_count(&session, Some(&operator)),
        4,
        "the operator sees every task"
    );
    let got = session.call(Some(&new), "tasks/get", json!({"id": mine["id"]}));
    assert_eq!(got["id"], mine["id"], "ListTasks grants tasks/get");
    let hidden = session.rpc(Some(&old), "GetTask", json!({"id": mine["id"]}));
    assert_eq!(
        code(&hidden),
        -32001,
        "another credential's task is not found: {hidden}"
    );
    for (who, method) in [
        (&sender, "ListTasks"),
        (&sender, "tasks/get"),
        (&new, "CancelTask"),
    ] {
        let refused = session.rpc_http(Some(who), method, json!({"id": mine["id"]}));
        assert_eq!(refused.status, 403, "{method}: {}", refused.text());
    }
}

/// `murmur.StopSession` as the original runtime means it (DESIGN.md §5): every live task
/// canceled and accounted for, the door extension echoed, and the session left running for the
/// caller's signal to end.
#[test]
fn murmur_stop_session_cancels_and_accounts_but_leaves_the_session_to_its_signal() {
    let home = Home::new();
    let gate = Gate::new(&home);
    let mut session = home.start(&[&gate.capsule(&home)]);
    let running = session.send(None, "held", false);
    let queued = session.send(None, "waiting", false);
    let response = session.rpc_as(None, Some("1.0"), "murmur.StopSession", json!({}));
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(
        response.header("a2a-extensions"),
        Some("https://docs.murmur.nexus/reference/agent-card/#murmur-door-v1"),
        "the door extension is echoed"
    );
    let mut result = response.json()["result"].take();
    let mut canceled: Vec<String> = serde_json::from_value(result["canceled"].take()).unwrap();
    canceled.sort();
    let mut expected = vec![
        running["id"].as_str().unwrap().to_string(),
        queued["id"].as_str().unwrap().to_string(),
    ];
    expected.sort();
    assert_eq!(canceled, expected);
    assert_eq!(
        result,
        json!({"session_id": session.id, "canceled": null, "residue": []})
    );
    for task in [&running, &queued] {
        let got = session.get_task(None, task["id"].as_str().unwrap());
        assert_eq!(got["status"]["state"], "canceled", "{got}");
    }

    // Still running: a second call has nothing left to cancel, and new work is taken.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(session.alive(), "an account, not a shutdown");
    let again = ask(&session, None, "murmur.StopSession", json!({}));
    assert_eq!(
        again["result"],
        json!({"session_id": session.id, "canceled": [], "residue": []}),
        "{again}"
    );
    gate.open();
    let later = session.send(None, "after", true);
    assert_eq!(later["status"]["state"], "completed", "{later}");
    assert!(home.record_path(&session.id).exists());

    // The caller's signal ends it, in order.
    session.signal(libc::SIGTERM);
    assert_eq!(session.wait_exit(WAIT).code(), Some(143));
    assert!(!home.record_path(&session.id).exists());

    // mur's own `session/stop` still ends the session, under either header, with no extension.
    let mut echo = home.start(&[]);
    let response = echo.rpc_as(None, Some("1.0"), "session/stop", json!({}));
    assert_eq!(response.json()["result"]["stopping"], true);
    assert_eq!(response.header("a2a-extensions"), None);
    assert_eq!(echo.wait_exit(WAIT).code(), Some(143));
}

/// `session/stop` grants `murmur.StopSession` (the lesser), never the other way round.
#[test]
fn a_stop_session_scope_does_not_reach_session_stop() {
    let home = Home::new();
    let manifest = home.write_capsule(
        "guarded",
        json!({"name": "guarded", "version": "1.0.0", "network": {"authentication": {"credentials": [
            {"name": "account", "scopes": ["murmur.StopSession"]},
            {"name": "stopper", "scopes": ["session/stop"]},
        ]}}}),
        Some("#!/bin/sh\ncat\n"),
    );
    let mut session = home.start(&[manifest.to_str().unwrap()]);
    let account = home.token(&[&session.id, "account"]);
    let stopper = home.token(&[&session.id, "stopper"]);
    let refused = session.rpc_as(Some(&account), Some("1.0"), "session/stop", json!({}));
    assert_eq!(refused.status, 403, "{}", refused.text());
    for who in [&account, &stopper] {
        let ok = session.rpc_as(Some(who), Some("1.0"), "murmur.StopSession", json!({}));
        assert_eq!(ok.json()["result"]["canceled"], json!([]), "{}", ok.text());
    }
    assert!(session.alive());
    let stopped = session.rpc_as(Some(&stopper), None, "session/stop", json!({}));
    assert_eq!(stopped.json()["result"]["stopping"], true);
    assert_eq!(session.wait_exit(WAIT).code(), Some(143));
}

/// 1.0's params are proto JSON, so a field may be named by its proto name too (`message_id`,
/// `history_length`: the TCK sends `task_id`), the client's `metadata` and `data` left as they
/// are; a field named both ways is refused. 0.3's JSON-RPC names each field one way only (a
/// member it does not know is passed over, as before).
#[test]
fn a_1_0_call_may_name_fields_as_the_proto_does() {
    let home = Home::new();
    let session = home.start(&[]);
    let sent = ask(
        &session,
        Some("1.0"),
        "SendMessage",
        json!({"message": {"message_id": "m1", "role": "ROLE_USER", "parts": [
            {"text": "hi"}, {"data": {"snake_key": 1}}], "metadata": {"own_key": 2}}}),
    );
    let task = &sent["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    assert_eq!(task["history"][0]["messageId"], "m1", "{sent}");
    assert_eq!(
        task["history"][0]["metadata"],
        json!({"own_key": 2}),
        "{sent}"
    );
    assert_eq!(
        task["artifacts"][0]["parts"][1]["data"],
        json!({"snake_key": 1})
    );
    let read = ask(
        &session,
        Some("1.0"),
        "GetTask",
        json!({"id": task["id"], "history_length": 0}),
    );
    let kept = read["result"]["history"].as_array().map_or(0, Vec::len);
    assert_eq!(kept, 0, "history_length read as historyLength: {read}");
    let twice = ask(
        &session,
        Some("1.0"),
        "GetTask",
        json!({"id": task["id"], "history_length": 0, "historyLength": 1}),
    );
    assert_eq!(code(&twice), -32602, "{twice}");
    let old = ask(
        &session,
        None,
        "tasks/get",
        json!({"id": task["id"], "history_length": 0}),
    );
    let kept = old["result"]["history"].as_array().map_or(0, Vec::len);
    assert_eq!(kept, 1, "0.3 read history_length as historyLength: {old}");
}
