//! A `POST /`'s envelope, read before anything runs: the generation its `A2A-Version` header
//! names, its id (for a refusal's answer), the JSON-RPC 2.0 envelope and the method it names; and
//! how the engine's refusals and lookups become each generation's JSON-RPC errors.

use serde_json::{Value, json};

use super::super::tasks::{FollowUp, Lookup, Refused};
use super::BUDGET_FULL;
use crate::a2a::error::RpcError;
use crate::a2a::quote::quoted;
use crate::a2a::rpc::{self, Method};
use crate::a2a::version::Generation;
use crate::net::server::Request;

/// The generation the request's `A2A-Version` header names (none is 0.3), or why it names none
/// the door speaks.
pub(super) fn asked_generation(request: &Request) -> Result<Generation, String> {
    let mut versions = request.header_values("a2a-version");
    match (versions.next(), versions.next()) {
        (value, None) => Generation::from_header(value),
        (_, Some(_)) => Err("send one A2A-Version header, not several".into()),
    }
}

/// The id of the JSON-RPC request in `body` when it can be read (JSON, an object, a string or
/// number id), else `null`: for a refusal answered before the request is read in earnest. It
/// echoes only what the caller sent, so it tells an unauthenticated caller nothing.
///
/// Only the `id` member is built; the rest is skipped unparsed, so a megabyte of `data` sent by
/// a caller the door refuses costs no tree.
pub(super) fn readable_id(body: &[u8]) -> Value {
    #[derive(serde::Deserialize)]
    struct Id {
        id: Option<Value>,
    }
    match serde_json::from_slice::<Id>(body) {
        Ok(Id {
            id: Some(id @ (Value::String(_) | Value::Number(_))),
        }) => id,
        _ => Value::Null,
    }
}

/// The request's id and method name, or the -32600 that refuses its envelope (with the id when
/// it is a usable one).
pub(super) fn envelope(body: &Value) -> Result<(Value, &str), (Value, RpcError)> {
    let id = body.get("id").cloned().unwrap_or(Value::Null);
    let scalar_id = matches!(id, Value::Null | Value::String(_) | Value::Number(_));
    let method = body.get("method").and_then(Value::as_str);
    match (
        body.get("jsonrpc") == Some(&json!("2.0")),
        method,
        scalar_id,
    ) {
        (true, Some(method), true) => Ok((id, method)),
        (version, method, _) => {
            let missing = if body.is_array() {
                "a batch (an array) is not served: send one request at a time"
            } else if !version {
                "\"jsonrpc\" must be \"2.0\""
            } else if method.is_none() {
                "\"method\" must be a string"
            } else {
                "\"id\" must be a string, a number or null"
            };
            Err((
                if scalar_id { id } else { Value::Null },
                RpcError::new(rpc::INVALID_REQUEST, format!("invalid request: {missing}")),
            ))
        }
    }
}

/// The method called `name`, if the door answers it under `generation`; else the error and the
/// shape to send it in.
pub(super) fn resolve(
    name: &str,
    generation: Generation,
) -> Result<&'static Method, (RpcError, Generation)> {
    // Quoted only for an error: escaping the name is a fortieth of a `SendMessage`'s work.
    let shown = || quoted(name);
    let Some(method) = rpc::method(name) else {
        let err = RpcError::new(
            rpc::METHOD_NOT_FOUND,
            format!("method not found: {}", shown()),
        );
        return Err((err, generation));
    };
    match (method.own, method.generation, generation) {
        (false, Generation::V1_0, Generation::V0_3) => Err((
            RpcError::new(
                rpc::VERSION_NOT_SUPPORTED,
                format!(
                    "{} is an A2A 1.0 method: send it with the header \"A2A-Version: 1.0\" (a request without it is 0.3)",
                    shown()
                ),
            ),
            Generation::V1_0,
        )),
        (false, Generation::V0_3, Generation::V1_0) => Err((
            RpcError::new(
                rpc::METHOD_NOT_FOUND,
                format!(
                    "method not found: {} is an A2A 0.3 method; under A2A-Version 1.0 use {}",
                    shown(),
                    rpc::twin_names(method.op)
                ),
            ),
            Generation::V1_0,
        )),
        _ => Ok(method),
    }
}

pub(super) fn lookup<T>(
    found: Result<T, Lookup>,
    id: &str,
    generation: Generation,
) -> Result<T, RpcError> {
    found.map_err(|l| match l {
        Lookup::NotFound => not_found(),
        Lookup::Ended(state) => RpcError::new(
            rpc::TASK_NOT_CANCELABLE,
            format!(
                "task {} has already ended ({})",
                quoted(id),
                state.wire(generation)
            ),
        ),
    })
}

/// One answer for a task that does not exist, was forgotten, or is another caller's: the three
/// must read alike, so the message names nothing the caller did not send.
pub(super) fn not_found() -> RpcError {
    RpcError::new(rpc::TASK_NOT_FOUND, "task not found")
}

/// The error for a message the engine would not take; `named` is the `taskId` it gave, if any.
pub(super) fn refusal(refused: Refused, named: &str, generation: Generation) -> RpcError {
    let task = quoted(named);
    match refused {
        Refused::NotAccepted(why) => RpcError::new(rpc::UNSUPPORTED_OPERATION, why),
        Refused::Busy(why) | Refused::Internal(why) => RpcError::new(rpc::INTERNAL_ERROR, why),
        Refused::Memory(why) => RpcError::new(BUDGET_FULL, why),
        Refused::FollowUp(FollowUp::NotFound) => not_found(),
        Refused::FollowUp(FollowUp::OtherContext) => RpcError::invalid(
            "params.message.contextId",
            format!("is not the context of task {task}"),
        ),
        Refused::FollowUp(FollowUp::Ended(state)) => {
            let why = format!(
                "task {task} has ended ({}): a finished task is never continued; send the message without taskId to start a new task",
                state.wire(generation)
            );
            match generation {
                Generation::V0_3 => RpcError::invalid("params.message.taskId", why),
                Generation::V1_0 => RpcError::new(rpc::UNSUPPORTED_OPERATION, why),
            }
        }
        Refused::FollowUp(FollowUp::Live(state)) => RpcError::new(
            rpc::UNSUPPORTED_OPERATION,
            format!(
                "task {task} is {}, not waiting for input: it cannot take another message now",
                state.wire(generation)
            ),
        ),
    }
}
