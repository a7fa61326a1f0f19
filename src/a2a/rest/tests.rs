use serde_json::json;

use super::*;

#[test]
fn each_path_names_its_method_and_generation() {
    let cases = [
        ("POST", "/message:send", "SendMessage", true),
        ("POST", "/v1/message:send", "message/send", true),
        ("POST", "/message:stream", "SendStreamingMessage", true),
        ("GET", "/tasks/t1", "GetTask", false),
        ("GET", "/v1/tasks/t1", "tasks/get", false),
        ("GET", "/tasks", "ListTasks", false),
        ("POST", "/tasks/t1:cancel", "CancelTask", true),
        ("GET", "/tasks/t1:subscribe", "SubscribeToTask", false),
        ("POST", "/v1/tasks/t1:subscribe", "tasks/resubscribe", false),
        (
            "POST",
            "/tasks/t1/pushNotificationConfigs",
            "CreateTaskPushNotificationConfig",
            true,
        ),
        (
            "DELETE",
            "/v1/tasks/t1/pushNotificationConfigs/c",
            "tasks/pushNotificationConfig/delete",
            false,
        ),
        ("GET", "/extendedAgentCard", "GetExtendedAgentCard", false),
        (
            "GET",
            "/v1/card",
            "agent/getAuthenticatedExtendedCard",
            false,
        ),
    ];
    for (method, path, name, body) in cases {
        let call = route(method, path).unwrap_or_else(|| panic!("{method} {path}"));
        assert_eq!(
            (call.method.name, call.body),
            (name, body),
            "{method} {path}"
        );
        let v03 = path.starts_with("/v1/");
        assert_eq!(call.generation == Generation::V0_3, v03, "{path}");
    }
    for (method, path) in [
        ("GET", "/"),
        ("GET", "/v1/tasks"),
        ("DELETE", "/tasks/t1"),
        ("POST", "/tasks/t1:explode"),
        ("GET", "/tasks/t1/x"),
        ("GET", "/card"),
        ("PUT", "/message:send"),
        ("GET", "/.well-known/agent-card.json"),
    ] {
        assert!(route(method, path).is_none(), "{method} {path}");
    }
}

#[test]
fn the_path_and_query_give_typed_members_and_the_path_wins() {
    let call = route(
        "GET",
        "/tasks/t%201?historyLength=2&id=other&includeArtifacts=true&contextId=7",
    )
    .unwrap();
    let got = params(call.generation, call.method.op, call.params, None).unwrap();
    assert_eq!(
        got,
        json!({"id": "t 1", "historyLength": 2, "includeArtifacts": true, "contextId": "7"})
    );
    let call = route("GET", "/tasks?pageSize=ten").unwrap();
    let got = params(call.generation, call.method.op, call.params, None).unwrap();
    assert_eq!(
        got["pageSize"], "ten",
        "left for the params check to refuse by name"
    );
    let bad = [
        ("/tasks?contextId=%zz", "query member contextId: has a '%'"),
        ("/tasks/%ff", "path's id: does not decode"),
        ("/tasks?x=%2", "query member x: has a '%'"),
    ];
    for (bad, named) in bad {
        let call = route("GET", bad).unwrap();
        let err = params(call.generation, call.method.op, call.params, None).unwrap_err();
        assert_eq!(err.code, rpc::INVALID_PARAMS, "{bad}");
        assert!(err.message.contains(named), "{bad}: {}", err.message);
    }
}

#[test]
fn a_body_gives_the_params_and_the_path_names_the_task() {
    let call = route("POST", "/tasks/t1:cancel").unwrap();
    let body = json!({"id": "else", "metadata": {"k": 1}});
    let got = params(call.generation, call.method.op, call.params, Some(body)).unwrap();
    assert_eq!(got, json!({"id": "t1", "metadata": {"k": 1}}));
    let call = route("POST", "/message:send").unwrap();
    let err = params(
        call.generation,
        call.method.op,
        call.params,
        Some(json!("x")),
    );
    assert_eq!(err.unwrap_err().code, rpc::INVALID_PARAMS);
}

#[test]
fn a_body_s_proto_field_names_are_read_as_json_names_but_not_the_client_s_own_json() {
    let call = route("POST", "/message:send").unwrap();
    let body = json!({"message": {"message_id": "m", "role": "ROLE_USER", "parts": [
        {"data": {"a_b": 1}, "media_type": "application/json"}], "metadata": {"x_y": 2}},
        "configuration": {"return_immediately": true}});
    let got = params(call.generation, call.method.op, call.params, Some(body)).unwrap();
    assert_eq!(
        got,
        json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [
            {"data": {"a_b": 1}, "mediaType": "application/json"}], "metadata": {"x_y": 2}},
            "configuration": {"returnImmediately": true}})
    );
}

#[test]
fn a_field_named_both_ways_is_refused_as_a_key_named_twice() {
    let call = route("POST", "/message:send").unwrap();
    let body = json!({"message": {"message_id": "m", "messageId": "n", "role": "ROLE_USER",
        "parts": []}});
    let err = params(call.generation, call.method.op, call.params, Some(body)).unwrap_err();
    assert_eq!(err.code, crate::a2a::rpc::INVALID_PARAMS);
    assert!(err.message.contains("field messageId"), "{}", err.message);
}
