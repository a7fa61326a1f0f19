//! The session's door: the agent card and JSON-RPC 2.0 on `POST /`, answered by the embedded
//! `echo` capsule.
//!
//! JSON-RPC errors travel with HTTP 200 and the A2A codes; a malformed request costs only its
//! own answer.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use crate::id::{ContextId, SessionId, TaskId};
use crate::net::server::{Handler, Request, Response};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const TASK_NOT_FOUND: i64 = -32001;
pub const TASK_NOT_CANCELABLE: i64 = -32002;
pub const EXTENDED_CARD_NOT_CONFIGURED: i64 = -32007;

/// Finished tasks kept for `tasks/get`: the newest this many.
pub const KEPT_TASKS: usize = 1000;

/// One session's door.
pub struct Door {
    pub session_id: SessionId,
    pub name: String,
    pub version: String,
    /// `host:port`.
    pub addr: String,
    /// Set by `session/stop`; the session's main loop winds down when it sees it.
    pub stop_requested: AtomicBool,
    tasks: Mutex<TaskStore>,
}

#[derive(Default)]
struct TaskStore {
    by_id: BTreeMap<String, Value>,
    order: VecDeque<String>,
}

impl TaskStore {
    fn insert(&mut self, id: String, task: Value) {
        if self.by_id.insert(id.clone(), task).is_none() {
            self.order.push_back(id);
        }
        while self.order.len() > KEPT_TASKS {
            if let Some(old) = self.order.pop_front() {
                self.by_id.remove(&old);
            }
        }
    }
}

/// A JSON-RPC error, before it is given the request's id.
struct RpcError(i64, String);

impl Door {
    pub fn new(session_id: SessionId, name: &str, version: &str, addr: String) -> Self {
        Self {
            session_id,
            name: name.into(),
            version: version.into(),
            addr,
            stop_requested: AtomicBool::new(false),
            tasks: Mutex::new(TaskStore::default()),
        }
    }

    fn card(&self) -> Value {
        crate::json::card::agent_card(
            &self.name,
            &self.version,
            &self.addr,
            self.session_id.as_str(),
        )
    }

    fn rpc(&self, body: &[u8]) -> Value {
        let Ok(request) = serde_json::from_slice::<Value>(body) else {
            return error(
                Value::Null,
                PARSE_ERROR,
                "parse error: the body is not JSON",
            );
        };
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        let scalar_id = matches!(id, Value::Null | Value::String(_) | Value::Number(_));
        let method = request.get("method").and_then(Value::as_str);
        let (true, Some(method), true) = (
            request.get("jsonrpc") == Some(&json!("2.0")),
            method,
            scalar_id,
        ) else {
            let id = if scalar_id { id } else { Value::Null };
            return error(
                id,
                INVALID_REQUEST,
                "invalid request: needs jsonrpc \"2.0\", a method and a scalar id",
            );
        };
        let params = request.get("params").cloned().unwrap_or(json!({}));
        let outcome = match method {
            "message/send" => self.message_send(&params),
            "tasks/get" => self.task_lookup(&params).map(|(_, task)| task),
            "tasks/cancel" => self.task_lookup(&params).and_then(|(_, task)| {
                Err(RpcError(
                    TASK_NOT_CANCELABLE,
                    format!(
                        "task {} has already ended",
                        task["id"].as_str().unwrap_or("")
                    ),
                ))
            }),
            "agent/getAuthenticatedExtendedCard" | "GetExtendedAgentCard" => Err(RpcError(
                EXTENDED_CARD_NOT_CONFIGURED,
                "this door is public: its card is at /.well-known/agent-card.json".into(),
            )),
            "session/stop" => {
                self.stop_requested.store(true, Ordering::Release);
                Ok(json!({"stopping": true}))
            }
            other => Err(RpcError(
                METHOD_NOT_FOUND,
                format!(
                    "method not found: {}",
                    other.chars().take(100).collect::<String>()
                ),
            )),
        };
        match outcome {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(RpcError(code, message)) => error(id, code, &message),
        }
    }

    fn message_send(&self, params: &Value) -> Result<Value, RpcError> {
        if self.stop_requested.load(Ordering::Acquire) {
            return Err(RpcError(INTERNAL_ERROR, "the session is stopping".into()));
        }
        let message = params
            .get("message")
            .filter(|m| m.is_object())
            .ok_or_else(|| RpcError(INVALID_PARAMS, "params.message is required".into()))?;
        let parts = message
            .get("parts")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                RpcError(
                    INVALID_PARAMS,
                    "params.message.parts must be an array".into(),
                )
            })?;
        let text: Vec<&str> = parts
            .iter()
            .filter(|p| p.get("kind").and_then(Value::as_str).unwrap_or("text") == "text")
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect();
        let answer = text.join("\n");
        let mint_err = |e: String| RpcError(INTERNAL_ERROR, e);
        let task_id = TaskId::mint().map_err(mint_err)?;
        let context_id = match message.get("contextId").and_then(Value::as_str) {
            Some(given) => given.to_string(),
            None => ContextId::mint().map_err(mint_err)?.to_string(),
        };
        let agent_message = json!({
            "kind": "message", "role": "agent", "messageId": format!("msg_{}", task_id.hex()),
            "taskId": task_id, "contextId": context_id,
            "parts": [{"kind": "text", "text": answer}],
        });
        let task = json!({
            "kind": "task",
            "id": task_id,
            "contextId": context_id,
            "status": {
                "state": "completed",
                "message": agent_message,
                "timestamp": crate::time::format_rfc3339(crate::time::unix_now()),
            },
            "artifacts": [{"artifactId": format!("art_{}", task_id.hex()), "name": "answer",
                "parts": [{"kind": "text", "text": answer}]}],
            "history": [message],
        });
        self.lock_tasks().insert(task_id.to_string(), task.clone());
        Ok(task)
    }

    fn task_lookup(&self, params: &Value) -> Result<(String, Value), RpcError> {
        let id = params
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError(INVALID_PARAMS, "params.id (a task id) is required".into()))?;
        self.lock_tasks()
            .by_id
            .get(id)
            .cloned()
            .map(|task| (id.to_string(), task))
            .ok_or_else(|| RpcError(TASK_NOT_FOUND, "task not found".into()))
    }

    fn lock_tasks(&self) -> std::sync::MutexGuard<'_, TaskStore> {
        // A panic aborts the process (panic = "abort"), so a poisoned lock holds consistent data.
        self.tasks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

impl Handler for Door {
    fn handle(&self, request: Request) -> Response {
        match (request.method.as_str(), request.path.as_str()) {
            ("GET", "/.well-known/agent-card.json" | "/.well-known/agent.json") => {
                Response::json(200, &self.card())
            }
            ("POST", "/") => Response::json(200, &self.rpc(&request.body)),
            (_, "/.well-known/agent-card.json" | "/") => Response::text(405, "method not allowed"),
            _ => Response::text(404, "not found"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn door() -> Door {
        Door::new(
            SessionId::mint().unwrap(),
            "echo",
            "0.1.0",
            "127.0.0.1:1".into(),
        )
    }

    fn call(door: &Door, body: &str) -> Value {
        door.rpc(body.as_bytes())
    }

    #[test]
    fn echo_answers_and_the_task_can_be_read_back() {
        let d = door();
        let sent = call(
            &d,
            r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"m1","parts":[{"kind":"text","text":"hello"},{"kind":"text","text":"world"}]}}}"#,
        );
        let task = &sent["result"];
        assert_eq!(task["status"]["state"], "completed");
        assert_eq!(task["artifacts"][0]["parts"][0]["text"], "hello\nworld");
        let id = task["id"].as_str().unwrap();
        let got = call(
            &d,
            &format!(
                r#"{{"jsonrpc":"2.0","id":"x","method":"tasks/get","params":{{"id":"{id}"}}}}"#
            ),
        );
        assert_eq!(got["result"], *task);
        assert_eq!(got["id"], "x");
        let cancel = call(
            &d,
            &format!(
                r#"{{"jsonrpc":"2.0","id":2,"method":"tasks/cancel","params":{{"id":"{id}"}}}}"#
            ),
        );
        assert_eq!(cancel["error"]["code"], TASK_NOT_CANCELABLE);
    }

    #[test]
    fn each_bad_request_gets_its_code() {
        let d = door();
        for (body, code) in [
            ("{", PARSE_ERROR),
            ("\u{0}", PARSE_ERROR),
            ("[]", INVALID_REQUEST),
            (
                r#"{"jsonrpc":"1.0","id":1,"method":"tasks/get"}"#,
                INVALID_REQUEST,
            ),
            (r#"{"jsonrpc":"2.0","id":1}"#, INVALID_REQUEST),
            (
                r#"{"jsonrpc":"2.0","id":{"a":1},"method":"tasks/get"}"#,
                INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"nope"}"#,
                METHOD_NOT_FOUND,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}"#,
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"tsk_x"}}"#,
                TASK_NOT_FOUND,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"agent/getAuthenticatedExtendedCard"}"#,
                EXTENDED_CARD_NOT_CONFIGURED,
            ),
        ] {
            assert_eq!(call(&d, body)["error"]["code"], code, "{body}");
        }
    }

    #[test]
    fn session_stop_sets_the_flag_and_refuses_new_tasks() {
        let d = door();
        assert!(
            call(&d, r#"{"jsonrpc":"2.0","id":1,"method":"session/stop"}"#)["result"].is_object()
        );
        assert!(d.stop_requested.load(Ordering::Acquire));
        let sent = call(
            &d,
            r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"parts":[]}}}"#,
        );
        assert_eq!(sent["error"]["code"], INTERNAL_ERROR);
    }
}
