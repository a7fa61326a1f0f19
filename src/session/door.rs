//! The session's door: the agent card, JSON-RPC 2.0 on `POST /`, and the control routes.
//!
//! JSON-RPC errors travel with HTTP 200 and the A2A codes; a malformed request costs only its
//! own answer. At an authenticated door every `POST /` is checked before its body is even
//! parsed, so an unauthenticated caller learns nothing but 401.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use super::auth::{self, Caller, DoorAuth};
use super::control::Control;
use super::tasks::{Engine, Lookup, Refused};
use crate::id::SessionId;
use crate::json::card::agent_card;
use crate::json::rpc::*;
use crate::net::server::{Handler, Request, Response};

/// One session's door.
pub struct Door {
    pub session_id: SessionId,
    pub name: String,
    pub version: String,
    /// `host:port`.
    pub addr: String,
    pub engine: Arc<Engine>,
    pub auth: Option<DoorAuth>,
    pub control: Option<Arc<Control>>,
    /// Set by `session/stop`; the session's main loop winds down when it sees it.
    pub stop_requested: AtomicBool,
}

/// A JSON-RPC error, before it is given the request's id.
struct RpcError(i64, String);

impl Door {
    fn card(&self, extended: bool) -> Value {
        let bearer = self.auth.is_some();
        let session = (extended || !bearer).then_some(self.session_id.as_str());
        agent_card(&self.name, &self.version, &self.addr, session, bearer)
    }

    /// Answer one JSON-RPC request body from `caller`. `Err` is an HTTP-level refusal (403).
    fn rpc(&self, body: &[u8], caller: &Caller) -> Result<Value, Response> {
        let request = match crate::json::strict::from_slice(body) {
            Ok(request) => request,
            // JSON, but two equal keys in one object: which one counts would be a guess.
            Err(err) if err.is_data() => {
                return Ok(error(
                    Value::Null,
                    INVALID_REQUEST,
                    &format!("invalid request: {err}; send each key once"),
                ));
            }
            Err(_) => {
                return Ok(error(
                    Value::Null,
                    PARSE_ERROR,
                    "parse error: the body is not JSON",
                ));
            }
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
            return Ok(error(
                id,
                INVALID_REQUEST,
                "invalid request: needs \"jsonrpc\": \"2.0\", a string method and a scalar id",
            ));
        };
        let known = DOOR_METHODS.contains(&method) || method == EXTENDED_CARD_V1;
        let scope = if method == EXTENDED_CARD_V1 {
            EXTENDED_CARD
        } else {
            method
        };
        if known && !caller.may_call(scope) {
            return Err(auth::forbidden(scope));
        }
        let params = request.get("params").cloned().unwrap_or(json!({}));
        let outcome = match method {
            MESSAGE_SEND => self.message_send(&params, caller),
            TASKS_GET => task_id(&params).and_then(|t| lookup(self.engine.get(t, caller.viewer()))),
            TASKS_CANCEL => {
                task_id(&params).and_then(|t| lookup(self.engine.cancel(t, caller.viewer())))
            }
            EXTENDED_CARD | EXTENDED_CARD_V1 => match self.auth {
                Some(_) => Ok(self.card(true)),
                None => Err(RpcError(
                    EXTENDED_CARD_NOT_CONFIGURED,
                    "this door is public: its card is at /.well-known/agent-card.json".into(),
                )),
            },
            SESSION_STOP => {
                self.stop_requested.store(true, Ordering::Release);
                crate::sys::wake::notify();
                Ok(json!({"stopping": true, "sessionId": self.session_id}))
            }
            other => Err(RpcError(
                METHOD_NOT_FOUND,
                format!(
                    "method not found: {}",
                    other.chars().take(100).collect::<String>()
                ),
            )),
        };
        Ok(match outcome {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(RpcError(code, message)) => error(id, code, &message),
        })
    }

    fn message_send(&self, params: &Value, caller: &Caller) -> Result<Value, RpcError> {
        if self.stop_requested.load(Ordering::Acquire) {
            return Err(RpcError(INTERNAL_ERROR, "the session is stopping".into()));
        }
        let message = params
            .get("message")
            .filter(|m| m.is_object())
            .ok_or_else(|| {
                RpcError(
                    INVALID_PARAMS,
                    "params.message (an object) is required".into(),
                )
            })?;
        let text = message_text(message).ok_or_else(|| {
            RpcError(
                INVALID_PARAMS,
                "params.message.parts must be an array of parts".into(),
            )
        })?;
        let context = message
            .get("contextId")
            .and_then(Value::as_str)
            .map(str::to_string);
        let blocking = params
            .get("configuration")
            .and_then(|c| c.get("blocking"))
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let id = self
            .engine
            .submit(caller.owner(), message.clone(), text, context)
            .map_err(|refused| match refused {
                Refused::NotAccepted(why) => RpcError(UNSUPPORTED_OPERATION, why),
                Refused::Busy(why) | Refused::Internal(why) => RpcError(INTERNAL_ERROR, why),
            })?;
        let task = if blocking {
            self.engine.wait(&id)
        } else {
            self.engine.get(id.as_str(), None).ok()
        };
        task.ok_or_else(|| RpcError(INTERNAL_ERROR, "the task was lost".into()))
    }
}

/// The text parts of a message joined by newlines; `None` when `parts` is not an array.
pub fn message_text(message: &Value) -> Option<String> {
    let parts = message.get("parts")?.as_array()?;
    Some(
        parts
            .iter()
            .filter(|p| p.get("kind").and_then(Value::as_str).unwrap_or("text") == "text")
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

fn task_id(params: &Value) -> Result<&str, RpcError> {
    params
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError(INVALID_PARAMS, "params.id (a task id) is required".into()))
}

fn lookup(found: Result<Value, Lookup>) -> Result<Value, RpcError> {
    found.map_err(|l| match l {
        Lookup::NotFound => RpcError(TASK_NOT_FOUND, "task not found".into()),
        Lookup::NotCancelable(why) => RpcError(TASK_NOT_CANCELABLE, why),
    })
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

impl Handler for Door {
    fn handle(&self, request: Request) -> Response {
        let path = request.path.split('?').next().unwrap_or("");
        match (request.method.as_str(), path) {
            ("GET", "/.well-known/agent-card.json" | "/.well-known/agent.json") => {
                Response::json(200, &self.card(false))
            }
            ("POST", "/") => {
                let caller = match &self.auth {
                    Some(auth) => match auth.check(&request) {
                        Ok(caller) => caller,
                        Err(refusal) => return refusal,
                    },
                    None => Caller::Public,
                };
                match self.rpc(&request.body, &caller) {
                    Ok(answer) => Response::json(200, &answer),
                    Err(refusal) => refusal,
                }
            }
            (_, p) if p == "/control" || p.starts_with("/control/") => match &self.control {
                Some(control) => control.handle(&request),
                None => Response::text(404, "this capsule declares no control"),
            },
            (_, "/.well-known/agent-card.json" | "/") => Response::text(405, "method not allowed"),
            _ => Response::text(404, "not found"),
        }
    }
}
