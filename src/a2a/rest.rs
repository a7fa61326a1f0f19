//! A2A's HTTP+JSON (REST) binding: which door method a request's HTTP method and path name, and
//! the params its path, query and body carry — read from the head alone, so the door decides
//! the route, the caller and the budget before a byte of the body (`door::admit`).
//!
//! Both generations at one URL, told apart by the path: 1.0's paths are unprefixed
//! (`POST /message:send`, a2a-1.0.md §11.3, the proto's `google.api.http` annotations), 0.3's
//! carry `/v1` (`POST /v1/message:send`). A REST call is one of the door's JSON-RPC methods
//! with another framing: the same method table, scopes, params checks and engine calls; only
//! the params' source (path, query, body) and the answers' framing differ. 1.0's bodies and
//! answers are the proto's JSON, which is exactly what its JSON-RPC `params` and `result` are;
//! 0.3's are its own proto's JSON, which is not, and [`proto03`] translates them.
//!
//! | 1.0 path | 0.3 path | method |
//! |---|---|---|
//! | `POST /message:send` | `POST /v1/message:send` | `SendMessage`, `message/send` |
//! | `POST /message:stream` | `POST /v1/message:stream` | `SendStreamingMessage`, `message/stream` |
//! | `GET /tasks/{id}` | `GET /v1/tasks/{id}` | `GetTask`, `tasks/get` |
//! | `GET /tasks` | — | `ListTasks` |
//! | `POST /tasks/{id}:cancel` | `POST /v1/tasks/{id}:cancel` | `CancelTask`, `tasks/cancel` |
//! | `GET`/`POST /tasks/{id}:subscribe` | the same under `/v1` | `SubscribeToTask`, `tasks/resubscribe` |
//! | `POST`/`GET /tasks/{id}/pushNotificationConfigs` | the same under `/v1` | create (set), list |
//! | `GET`/`DELETE /tasks/{id}/pushNotificationConfigs/{configId}` | the same under `/v1` | get, delete |
//! | `GET /extendedAgentCard` | `GET /v1/card` | the extended card |

use serde_json::{Map, Value};

use super::error::RpcError;
use super::fields;
use super::rpc::{self, Method, Op};
use super::version::Generation;

pub mod proto03;

/// What a REST request's head names.
#[derive(Debug)]
pub struct Call {
    pub method: &'static Method,
    /// Whose paths it took: `/v1/…` 0.3, unprefixed 1.0. The `A2A-Version` header must agree.
    pub generation: Generation,
    /// What the path and query carry (`id`, `historyLength`, …), or why they are not usable (a
    /// bad percent-escape): refused -32602 once the caller is known.
    pub params: Result<Map<String, Value>, RpcError>,
    /// The body carries the request message (a `POST`); otherwise any body is ignored.
    pub body: bool,
}

/// The call `method` at `target` (path and query) names, if it is one of the binding's paths.
pub fn route(method: &str, target: &str) -> Option<Call> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let (generation, path) = match path.strip_prefix("/v1") {
        Some(rest) if rest.starts_with('/') => (Generation::V0_3, rest),
        _ => (Generation::V1_0, path),
    };
    let v1 = generation == Generation::V1_0;
    let pick = |v03: &'static str, v10: &'static str| if v1 { v10 } else { v03 };
    let segments: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
    // Each arm: the method's name, the path's members by name, and whether a body is read.
    let (name, named, body): (&str, Vec<(&str, &str)>, bool) = match (method, &segments[..]) {
        ("POST", ["message:send"]) => (pick(rpc::MESSAGE_SEND, "SendMessage"), vec![], true),
        ("POST", ["message:stream"]) => (
            pick(rpc::MESSAGE_STREAM, "SendStreamingMessage"),
            vec![],
            true,
        ),
        ("GET", ["tasks"]) if v1 => ("ListTasks", vec![], false),
        (_, ["tasks", task]) => match (method, task.rsplit_once(':')) {
            ("GET", None) => (pick(rpc::TASKS_GET, "GetTask"), vec![("id", *task)], false),
            ("POST", Some((id, "cancel"))) => (
                pick(rpc::TASKS_CANCEL, "CancelTask"),
                vec![("id", id)],
                true,
            ),
            ("GET" | "POST", Some((id, "subscribe"))) => (
                pick("tasks/resubscribe", "SubscribeToTask"),
                vec![("id", id)],
                false,
            ),
            _ => return None,
        },
        (_, ["tasks", task, "pushNotificationConfigs"]) => {
            let task_key = pick("id", "taskId");
            match method {
                "POST" => (
                    pick(
                        "tasks/pushNotificationConfig/set",
                        "CreateTaskPushNotificationConfig",
                    ),
                    vec![("taskId", *task)],
                    true,
                ),
                "GET" => (
                    pick(
                        "tasks/pushNotificationConfig/list",
                        "ListTaskPushNotificationConfigs",
                    ),
                    vec![(task_key, *task)],
                    false,
                ),
                _ => return None,
            }
        }
        (_, ["tasks", task, "pushNotificationConfigs", config]) => {
            let named = vec![
                (pick("id", "taskId"), *task),
                (pick("pushNotificationConfigId", "id"), *config),
            ];
            match method {
                "GET" => (
                    pick(
                        "tasks/pushNotificationConfig/get",
                        "GetTaskPushNotificationConfig",
                    ),
                    named,
                    false,
                ),
                "DELETE" => (
                    pick(
                        "tasks/pushNotificationConfig/delete",
                        "DeleteTaskPushNotificationConfig",
                    ),
                    named,
                    false,
                ),
                _ => return None,
            }
        }
        ("GET", ["extendedAgentCard"]) if v1 => (rpc::EXTENDED_CARD_V1, vec![], false),
        ("GET", ["card"]) if !v1 => (rpc::EXTENDED_CARD, vec![], false),
        _ => return None,
    };
    let method = rpc::method(name)?;
    Some(Call {
        method,
        generation,
        params: members(&named, query),
        body,
    })
}

/// Whether `path` (no query) is one of the binding's, whatever the HTTP method: for CORS.
pub fn is_rest_path(path: &str) -> bool {
    ["GET", "POST", "DELETE"]
        .iter()
        .any(|method| route(method, path).is_some())
}

/// The path's members and the query's, each percent-decoded; a query member takes the JSON
/// type its name has in the proto (`historyLength` a number, `includeArtifacts` a boolean),
/// anything else a string. A value that is not of its type stays a string, for the params
/// check to refuse naming it.
fn members(named: &[(&str, &str)], query: &str) -> Result<Map<String, Value>, RpcError> {
    let mut params = Map::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = decode(key, "query")?;
        let value = decode(value, &format!("query member {key}"))?;
        let typed = match key.as_str() {
            "historyLength" | "pageSize" => value.parse::<u64>().map(Value::from).ok(),
            "includeArtifacts" => value.parse::<bool>().map(Value::Bool).ok(),
            _ => None,
        };
        params.insert(key, typed.unwrap_or(Value::String(value)));
    }
    // The path names the task: a query member of the same name does not replace it.
    for (key, value) in named {
        let value = decode(value, &format!("path's {key}"))?;
        params.insert((*key).to_string(), Value::String(value));
    }
    Ok(params)
}

/// `text` percent-decoded (RFC 3986), or -32602 saying where it is malformed.
fn decode(text: &str, at: &str) -> Result<String, RpcError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| {
                        RpcError::invalid(at, "has a '%' that is not followed by two hex digits")
                    })?;
                out.push(hex);
                i += 3;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| RpcError::invalid(at, "does not decode to UTF-8"))
}

/// The method's params: the path's and query's members (`named`, [`Call::params`]) over the
/// body's (a 1.0 body is the request message's JSON, its `params` in JSON-RPC; a 0.3 body its
/// proto's JSON, translated).
pub fn params(
    generation: Generation,
    op: Op,
    named: Result<Map<String, Value>, RpcError>,
    body: Option<Value>,
) -> Result<Value, RpcError> {
    let named = named?;
    let mut params = match (generation, body) {
        (_, None | Some(Value::Null)) => Map::new(),
        (Generation::V0_3, Some(body)) => proto03::request(op, body)?,
        (Generation::V1_0, Some(body @ Value::Object(_))) => match fields::lower_camel(body)? {
            Value::Object(body) => body,
            _ => Map::new(),
        },
        (Generation::V1_0, Some(_)) => {
            return Err(RpcError::invalid(
                "params",
                "the body must be a JSON object",
            ));
        }
    };
    params.extend(named);
    Ok(Value::Object(params))
}

/// A method's result as the binding answers it: 1.0's is already its proto's JSON; 0.3's is
/// translated into its proto's. A stream's events go through here one by one.
pub fn answer(method: &Method, generation: Generation, result: Value) -> Value {
    match generation {
        Generation::V1_0 => result,
        Generation::V0_3 => proto03::answer(method, result),
    }
}

#[cfg(test)]
mod tests;
