//! 0.3's REST binding speaks its proto's JSON (a2a 0.3 `a2a.proto`), which is not what its
//! JSON-RPC binding speaks: `ROLE_USER` for `user`, a message's parts under `content`, a part as
//! `{text}`, `{file: {fileWithUri|fileWithBytes, mimeType}}` or `{data: {data}}` with no `kind`,
//! `TASK_STATE_CANCELLED` for `canceled`, a send's answer wrapped as `{task}`, a push config
//! named `tasks/{id}/pushNotificationConfigs/{configId}`. The door's 0.3 methods stay the one
//! implementation; this module only rewrites a request's JSON into their `params` and their
//! `result` into the proto's JSON, moving members, never re-reading them (a part's `data` stays
//! the marker the renderer put there, written verbatim).
//!
//! A member this translation does not know is passed on as it is, so the params check refuses
//! it by name rather than this module guessing.

use serde_json::{Map, Value, json};

use super::super::error::RpcError;
use super::super::message::Role;
use super::super::rpc::{Method, Op};
use super::super::task::State;
use super::super::version::Generation;

/// A 0.3 REST body as its method's JSON-RPC `params`.
pub fn request(op: Op, body: Value) -> Result<Map<String, Value>, RpcError> {
    let Value::Object(mut body) = super::super::fields::lower_camel(body)? else {
        return Err(RpcError::invalid(
            "params",
            "the body must be a JSON object",
        ));
    };
    match op {
        Op::Send | Op::Stream => {
            // The proto's field is `request`, its JSON name `message`; both are read.
            if let Some(message) = body.remove("message").or_else(|| body.remove("request")) {
                body.insert("message".into(), message_in(message));
            }
            if let Some(Value::Object(config)) = body.get_mut("configuration") {
                // A proto3 bool that is absent is false: not blocking, as the 0.3 SDKs read it.
                let blocking = config.remove("blocking").unwrap_or(Value::Bool(false));
                config.insert("blocking".into(), blocking);
                if let Some(push) = config.remove("pushNotification") {
                    config.insert("pushNotificationConfig".into(), push);
                }
            }
            Ok(body)
        }
        // The body is a `TaskPushNotificationConfig`, as the proto's `body: "config"` has it
        // (@a2a-js/sdk) — or the whole `CreateTaskPushNotificationConfigRequest`, `{parent,
        // configId, config}`, as a2a-sdk's 0.3 transport and server send and read it; its
        // `configId` is the config's id where the config names none. The method takes the
        // config.
        Op::PushConfig => {
            let config_id = body.remove("configId");
            if let Some(Value::Object(inner)) = body.remove("config") {
                body = inner;
            }
            let mut config = body.remove("pushNotificationConfig");
            if let (Some(Value::Object(config)), Some(id)) = (&mut config, config_id)
                && id.as_str().is_some_and(|id| !id.is_empty())
            {
                config.entry("id").or_insert(id);
            }
            Ok(config
                .map(|config| Map::from_iter([("pushNotificationConfig".to_string(), config)]))
                .unwrap_or_default())
        }
        _ => Ok(Map::new()),
    }
}

/// A proto-JSON message as 0.3 JSON-RPC's.
fn message_in(message: Value) -> Value {
    let Value::Object(mut message) = message else {
        return message;
    };
    // By name or by its number in the proto's enum (1 user, 2 agent), as proto JSON allows.
    let role = match message.get("role") {
        Some(Value::String(name)) => Role::from_wire(name, Generation::V1_0),
        Some(number) if number == 1 => Some(Role::User),
        Some(number) if number == 2 => Some(Role::Agent),
        _ => None,
    };
    if let Some(role) = role {
        message.insert("role".into(), role.wire(Generation::V0_3).into());
    }
    if let Some(Value::Array(parts)) = message
        .remove("content")
        .or_else(|| message.remove("parts"))
    {
        let parts = parts.into_iter().map(part_in).collect();
        message.insert("parts".into(), Value::Array(parts));
    }
    Value::Object(message)
}

/// A proto-JSON part as 0.3 JSON-RPC's: its kind named, a file's members renamed.
fn part_in(part: Value) -> Value {
    let Value::Object(mut part) = part else {
        return part;
    };
    if part.contains_key("text") {
        part.insert("kind".into(), "text".into());
    } else if let Some(Value::Object(mut file)) = part.remove("file") {
        for (from, to) in [("fileWithUri", "uri"), ("fileWithBytes", "bytes")] {
            if let Some(value) = file.remove(from) {
                file.insert(to.into(), value);
            }
        }
        part.insert("kind".into(), "file".into());
        part.insert("file".into(), Value::Object(file));
    } else if let Some(Value::Object(mut data)) = part.remove("data") {
        let inner = data.remove("data").unwrap_or(Value::Object(data));
        part.insert("kind".into(), "data".into());
        part.insert("data".into(), inner);
    }
    Value::Object(part)
}

/// A 0.3 method's `result` as its proto's JSON.
pub fn answer(method: &Method, result: Value) -> Value {
    match method.op {
        // A send's answer and a stream's events are the proto's `oneof`s: the object under the
        // member its kind names.
        Op::Send | Op::Stream | Op::Subscribe => event(result),
        Op::Get | Op::Cancel => task(result),
        Op::PushConfig => match method.name {
            "tasks/pushNotificationConfig/list" => {
                let configs = match result {
                    Value::Array(configs) => configs.into_iter().map(push_config).collect(),
                    _ => Vec::new(),
                };
                json!({"configs": configs})
            }
            "tasks/pushNotificationConfig/delete" => json!({}),
            _ => push_config(result),
        },
        _ => result,
    }
}

/// A task, message or update event (by its `kind`) as the proto's `StreamResponse` member.
fn event(result: Value) -> Value {
    let kind = result.get("kind").and_then(Value::as_str).unwrap_or("");
    let (member, object) = match kind {
        "task" => ("task", task(result)),
        "message" => ("message", message_out(result)),
        "status-update" => ("statusUpdate", update(result)),
        "artifact-update" => ("artifactUpdate", update(result)),
        _ => return result,
    };
    crate::json::object([(member, object)])
}

/// Any 0.3 object with its `kind` gone and its nested objects translated.
fn update(value: Value) -> Value {
    let Value::Object(mut map) = value else {
        return value;
    };
    map.remove("kind");
    translate(&mut map, "status", status);
    translate(&mut map, "artifact", artifact);
    Value::Object(map)
}

fn task(value: Value) -> Value {
    let Value::Object(mut map) = value else {
        return value;
    };
    map.remove("kind");
    translate(&mut map, "status", status);
    for (key, each) in [
        ("history", message_out as fn(Value) -> Value),
        ("artifacts", artifact),
    ] {
        if let Some(Value::Array(items)) = map.get_mut(key) {
            for item in items.iter_mut() {
                *item = each(item.take());
            }
        }
    }
    Value::Object(map)
}

fn status(value: Value) -> Value {
    let Value::Object(mut map) = value else {
        return value;
    };
    let state = map.get("state").and_then(Value::as_str);
    if let Some(state) = state.and_then(|s| State::from_wire(s, Generation::V0_3)) {
        // 0.3's proto spells the one state 1.0 spells CANCELED with two l's.
        let name = match state {
            State::Canceled => "TASK_STATE_CANCELLED",
            state => state.wire(Generation::V1_0),
        };
        map.insert("state".into(), name.into());
    }
    translate(&mut map, "message", message_out);
    Value::Object(map)
}

fn message_out(value: Value) -> Value {
    let Value::Object(mut map) = value else {
        return value;
    };
    map.remove("kind");
    let role = map.get("role").and_then(Value::as_str);
    if let Some(role) = role.and_then(|r| Role::from_wire(r, Generation::V0_3)) {
        map.insert("role".into(), role.wire(Generation::V1_0).into());
    }
    if let Some(parts) = map.remove("parts") {
        map.insert("content".into(), parts_out(parts));
    }
    Value::Object(map)
}

fn artifact(value: Value) -> Value {
    let Value::Object(mut map) = value else {
        return value;
    };
    translate(&mut map, "parts", parts_out);
    Value::Object(map)
}

fn parts_out(parts: Value) -> Value {
    let Value::Array(parts) = parts else {
        return parts;
    };
    Value::Array(parts.into_iter().map(part_out).collect())
}

/// A part without its `kind`: text as it is, a file's members renamed, data one level down.
fn part_out(value: Value) -> Value {
    let Value::Object(mut map) = value else {
        return value;
    };
    match map.remove("kind").as_ref().and_then(Value::as_str) {
        Some("file") => {
            if let Some(Value::Object(file)) = map.get_mut("file") {
                for (from, to) in [("uri", "fileWithUri"), ("bytes", "fileWithBytes")] {
                    if let Some(value) = file.remove(from) {
                        file.insert(to.into(), value);
                    }
                }
            }
        }
        Some("data") => {
            let data = map.remove("data").unwrap_or(Value::Null);
            map.insert("data".into(), crate::json::object([("data", data)]));
        }
        _ => {}
    }
    Value::Object(map)
}

/// A 0.3 `TaskPushNotificationConfig` (`taskId`, `pushNotificationConfig`) as its proto's
/// (`name`, `pushNotificationConfig`).
fn push_config(value: Value) -> Value {
    let Value::Object(mut map) = value else {
        return value;
    };
    let task = map.remove("taskId");
    let task = task.as_ref().and_then(Value::as_str).unwrap_or("");
    let config = map.remove("pushNotificationConfig").unwrap_or(Value::Null);
    let id = config.get("id").and_then(Value::as_str).unwrap_or("");
    json!({
        "name": format!("tasks/{task}/pushNotificationConfigs/{id}"),
        "pushNotificationConfig": config,
    })
}

/// `map[key]` replaced by `f` of itself, when present.
fn translate(map: &mut Map<String, Value>, key: &str, f: fn(Value) -> Value) {
    if let Some(value) = map.get_mut(key) {
        *value = f(value.take());
    }
}

#[cfg(test)]
mod tests;
