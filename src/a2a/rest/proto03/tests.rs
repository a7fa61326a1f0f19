use serde_json::json;

use super::*;
use crate::a2a::rpc;

#[test]
fn a_proto_json_send_becomes_json_rpc_params() {
    let body = json!({
        "request": {"messageId": "m", "role": "ROLE_USER", "taskId": "t", "content": [
            {"text": "hi"},
            {"file": {"fileWithUri": "https://example.com/f", "mimeType": "text/plain"}},
            {"file": {"fileWithBytes": "aGk="}},
            {"data": {"data": {"k": 1}}},
        ]},
        "configuration": {"historyLength": 2, "pushNotification": {"url": "u"}},
    });
    let params = request(Op::Send, body).unwrap();
    assert_eq!(
        Value::Object(params),
        json!({
            "message": {"messageId": "m", "role": "user", "taskId": "t", "parts": [
                {"kind": "text", "text": "hi"},
                {"kind": "file", "file": {"uri": "https://example.com/f", "mimeType": "text/plain"}},
                {"kind": "file", "file": {"bytes": "aGk="}},
                {"kind": "data", "data": {"k": 1}},
            ]},
            "configuration": {"historyLength": 2, "blocking": false,
                              "pushNotificationConfig": {"url": "u"}},
        })
    );
    assert!(request(Op::Send, json!([])).is_err());
    // Proto field names are read as their JSON names; the client's own JSON is left alone.
    let snake = json!({"request": {"message_id": "m", "role": "ROLE_USER", "content": [
        {"file": {"file_with_uri": "u", "mime_type": "t"}}, {"data": {"data": {"a_b": 1}}}],
        "metadata": {"x_y": 1}}, "configuration": {"history_length": 1, "blocking": true}});
    assert_eq!(
        Value::Object(request(Op::Send, snake).unwrap()),
        json!({"message": {"messageId": "m", "role": "user", "metadata": {"x_y": 1}, "parts": [
            {"kind": "file", "file": {"uri": "u", "mimeType": "t"}},
            {"kind": "data", "data": {"a_b": 1}}]},
            "configuration": {"historyLength": 1, "blocking": true}})
    );
}

#[test]
fn a_json_rpc_task_becomes_the_proto_json() {
    let task = json!({
        "kind": "task", "id": "t", "contextId": "c",
        "status": {"state": "canceled", "message": {"kind": "message", "role": "agent",
                   "messageId": "a", "parts": [{"kind": "text", "text": "bye"}]}},
        "history": [{"kind": "message", "role": "user", "messageId": "m", "parts": [
            {"kind": "file", "file": {"bytes": "aGk=", "name": "h"}},
            {"kind": "data", "data": {"k": 1}},
        ]}],
        "artifacts": [{"artifactId": "x", "parts": [{"kind": "text", "text": "out"}]}],
    });
    let get = rpc::method("tasks/get").unwrap();
    assert_eq!(
        answer(get, task.clone()),
        json!({
            "id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_CANCELLED", "message": {"role": "ROLE_AGENT",
                       "messageId": "a", "content": [{"text": "bye"}]}},
            "history": [{"role": "ROLE_USER", "messageId": "m", "content": [
                {"file": {"fileWithBytes": "aGk=", "name": "h"}},
                {"data": {"data": {"k": 1}}},
            ]}],
            "artifacts": [{"artifactId": "x", "parts": [{"text": "out"}]}],
        })
    );
    let send = rpc::method("message/send").unwrap();
    assert_eq!(
        answer(send, task)["task"]["status"]["state"],
        "TASK_STATE_CANCELLED"
    );
    let update = json!({"kind": "status-update", "taskId": "t", "contextId": "c", "final": true,
                        "status": {"state": "input-required"}});
    let stream = rpc::method("message/stream").unwrap();
    assert_eq!(
        answer(stream, update),
        json!({"statusUpdate": {"taskId": "t", "contextId": "c", "final": true,
                                "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}})
    );
}

#[test]
fn push_configs_are_named_as_the_proto_names_them() {
    let config = json!({"taskId": "t", "pushNotificationConfig": {"id": "c", "url": "u"}});
    let set = rpc::method("tasks/pushNotificationConfig/set").unwrap();
    let named = json!({"name": "tasks/t/pushNotificationConfigs/c",
                       "pushNotificationConfig": {"id": "c", "url": "u"}});
    assert_eq!(answer(set, config.clone()), named);
    let list = rpc::method("tasks/pushNotificationConfig/list").unwrap();
    assert_eq!(answer(list, json!([config])), json!({"configs": [named]}));
    let delete = rpc::method("tasks/pushNotificationConfig/delete").unwrap();
    assert_eq!(answer(delete, Value::Null), json!({}));
    let body = json!({"name": "x", "pushNotificationConfig": {"url": "u"}});
    assert_eq!(
        Value::Object(request(Op::PushConfig, body).unwrap()),
        json!({"pushNotificationConfig": {"url": "u"}})
    );
}

#[test]
fn a_push_config_is_read_bare_or_inside_its_create_request() {
    let url = json!({"url": "http://h/x", "token": "t"});
    let bare = json!({"name": "tasks/t/pushNotificationConfigs/c", "pushNotificationConfig": url});
    let wrapped = json!({"parent": "tasks/t", "config_id": "c", "config": {
        "name": "tasks/t/pushNotificationConfigs/c", "push_notification_config": url}});
    let params = |body| request(Op::PushConfig, body).unwrap();
    assert_eq!(params(bare)["pushNotificationConfig"], url);
    let mut with_id = url.clone();
    with_id["id"] = json!("c");
    assert_eq!(params(wrapped)["pushNotificationConfig"], with_id);
    // The config's own id wins over the request's; an empty one names nothing.
    let own = json!({"configId": "c", "config": {"pushNotificationConfig": {"id": "own"}}});
    assert_eq!(params(own)["pushNotificationConfig"], json!({"id": "own"}));
    let empty = json!({"configId": "", "config": {"pushNotificationConfig": {"url": "u"}}});
    assert_eq!(params(empty)["pushNotificationConfig"], json!({"url": "u"}));
}
