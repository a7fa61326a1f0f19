//! How a request's answers are framed: the door's two A2A bindings over one method dispatch.
//! JSON-RPC (`POST /`) wraps a result as the answer to the request's id and sends an error with
//! HTTP 200; HTTP+JSON (`crate::a2a::rest`) sends the result itself (0.3's translated into its
//! proto's JSON) and an error as an HTTP status with a `google.rpc.Status` body. Everything
//! between — generation, scope, stream bound, params, the engine — is the same code for both
//! (`Door::call`).

use serde_json::Value;

use super::super::auth::{self, Denied, PERMISSION_DENIED, UNAUTHENTICATED};
use super::{BUDGET_FULL, RETRY_AFTER_SECS, json_response};
use crate::a2a::error::RpcError;
use crate::a2a::rest;
use crate::a2a::rpc::{self, Method};
use crate::a2a::version::Generation;
use crate::net::server::Response;

/// The framing of one request's answers.
pub(super) enum Binding {
    /// JSON-RPC 2.0, answering the request with this id.
    Rpc(Value),
    /// HTTP+JSON, answering the method its path named in the path's generation.
    Rest(&'static Method, Generation),
}

impl Binding {
    /// The JSON-RPC id answered (`null` for HTTP+JSON, which has none).
    pub(super) fn id(&self) -> Value {
        match self {
            Binding::Rpc(id) => id.clone(),
            Binding::Rest(..) => Value::Null,
        }
    }

    /// What carries `result`: the JSON-RPC answer, or the result itself in the call's
    /// generation's JSON. A stream's events are framed one by one the same way.
    pub(super) fn result(&self, result: Value) -> Value {
        match self {
            Binding::Rpc(id) => rpc::result(id.clone(), result),
            Binding::Rest(method, generation) => rest::answer(method, *generation, result),
        }
    }

    /// The JSON-RPC id this binding answers; `None` for HTTP+JSON.
    fn rpc_id(&self) -> Option<&Value> {
        match self {
            Binding::Rpc(id) => Some(id),
            Binding::Rest(..) => None,
        }
    }

    /// The body an error is sent with, in `shape` for JSON-RPC.
    pub(super) fn error_body(&self, err: &RpcError, shape: Generation) -> Value {
        error_body(self.rpc_id(), err, shape)
    }

    /// The whole answer for `err` ([`error`]).
    pub(super) fn error(&self, err: &RpcError, shape: Generation) -> Response {
        error(self.rpc_id(), err, shape)
    }

    /// The 401 or 403 for `denied` at capsule `realm`'s door.
    pub(super) fn denied(&self, realm: &str, denied: &Denied, shape: Generation) -> Response {
        auth::refuse(realm, denied, |err| self.error_body(err, shape))
    }
}

/// The body of an error: the JSON-RPC error answering `rpc` (its id) in `shape`, or with no id
/// HTTP+JSON's `google.rpc.Status` — for 0.3 (`shape`, the path's generation) with the error's
/// A2A name beside it as `type`, the member a2a-sdk's 0.3 REST client maps to its error types
/// (0.3 gives REST errors no body of its own; without it that client reads a 404 as an unknown
/// method).
fn error_body(rpc: Option<&Value>, err: &RpcError, shape: Generation) -> Value {
    match rpc {
        Some(id) => err.answer(id.clone(), shape),
        None => {
            let (status, name) = http_status(err.code);
            let mut body = err.status_body(status, name);
            if let (Generation::V0_3, Some(named)) = (shape, error_name(err.code)) {
                body["type"] = named.into();
                body["message"] = err.message.clone().into();
            }
            body
        }
    }
}

/// The A2A error an error code is, by the name the SDKs give its type.
fn error_name(code: i64) -> Option<&'static str> {
    Some(match code {
        rpc::TASK_NOT_FOUND => "TaskNotFoundError",
        rpc::TASK_NOT_CANCELABLE => "TaskNotCancelableError",
        rpc::PUSH_NOT_SUPPORTED => "PushNotificationNotSupportedError",
        rpc::UNSUPPORTED_OPERATION => "UnsupportedOperationError",
        rpc::INVALID_PARAMS => "InvalidParamsError",
        rpc::INVALID_REQUEST => "InvalidRequestError",
        rpc::METHOD_NOT_FOUND => "MethodNotFoundError",
        rpc::INTERNAL_ERROR => "InternalError",
        _ => return None,
    })
}

/// The whole answer for `err` to a JSON-RPC request with id `rpc`, or (`None`) to an HTTP+JSON
/// one: JSON-RPC's with HTTP 200, HTTP+JSON's with the error's status; a demand the memory
/// budget refused is 503 with `Retry-After` in both (the condition is transient, and HTTP
/// clients and proxies know to retry it), reason `RESOURCE_EXHAUSTED`.
pub(super) fn error(rpc: Option<&Value>, err: &RpcError, shape: Generation) -> Response {
    let status = match (rpc, err.code) {
        (_, BUDGET_FULL) => 503,
        (Some(_), _) => 200,
        (None, code) => http_status(code).0,
    };
    let mut response = match err.code {
        BUDGET_FULL => {
            let mut err = err.clone();
            err.reason = Some("RESOURCE_EXHAUSTED");
            json_response(status, &error_body(rpc, &err, shape))
        }
        _ => json_response(status, &error_body(rpc, err, shape)),
    };
    if status == 503 {
        response
            .headers
            .push(("Retry-After", RETRY_AFTER_SECS.to_string()));
    }
    response
}

/// The HTTP status, and its gRPC name, an error travels with in HTTP+JSON (a2a-1.0.md §5.4; the
/// JSON-RPC codes A2A does not list as a2a-sdk maps them; the door's own as HTTP says them).
fn http_status(code: i64) -> (u16, &'static str) {
    match code {
        rpc::TASK_NOT_FOUND | rpc::METHOD_NOT_FOUND => (404, "NOT_FOUND"),
        rpc::PARSE_ERROR | rpc::INVALID_REQUEST | rpc::INVALID_PARAMS => (400, "INVALID_ARGUMENT"),
        rpc::TASK_NOT_CANCELABLE
        | rpc::PUSH_NOT_SUPPORTED
        | rpc::UNSUPPORTED_OPERATION
        | rpc::EXTENDED_CARD_NOT_CONFIGURED
        | rpc::VERSION_NOT_SUPPORTED => (400, "FAILED_PRECONDITION"),
        UNAUTHENTICATED => (401, "UNAUTHENTICATED"),
        PERMISSION_DENIED => (403, "PERMISSION_DENIED"),
        BUDGET_FULL => (503, "UNAVAILABLE"),
        _ => (500, "INTERNAL"),
    }
}
