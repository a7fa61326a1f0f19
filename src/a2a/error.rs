//! A JSON-RPC error as the door answers it, in the shape of the caller's generation.
//!
//! 0.3 errors are `{code, message}` (with `data: {"field"}` when a field is at fault). 1.0 errors
//! are ProtoJSON: `data` is an array of `Any` objects, always holding a `google.rpc.ErrorInfo`
//! whose `reason` names the code, plus a `google.rpc.BadRequest` naming the field when one is at
//! fault (a2a-1.0.md §5). Either way the message is plain words a person can act on.

use serde_json::{Value, json};

use super::rpc::{INVALID_PARAMS, reason};
use super::version::Generation;

/// The `domain` of every `ErrorInfo` (the spec's).
const DOMAIN: &str = "a2a-protocol.org";

/// One JSON-RPC error, before it is given the request's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    /// The request member at fault, as a path (`params.message.parts[0].raw`).
    pub field: Option<String>,
    /// The 1.0 `ErrorInfo` reason, where the code alone does not name one (the door's own
    /// codes); `None` takes the code's.
    pub reason: Option<&'static str>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            field: None,
            reason: None,
        }
    }

    /// -32602 naming `field` and what is wrong with it.
    pub fn invalid(field: impl Into<String>, why: impl std::fmt::Display) -> Self {
        let field = field.into();
        Self {
            code: INVALID_PARAMS,
            message: format!("{field}: {why}"),
            field: Some(field),
            reason: None,
        }
    }

    /// The whole JSON-RPC answer for request `id`, shaped for `generation`.
    pub fn answer(&self, id: Value, generation: Generation) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        match generation {
            Generation::V0_3 => {
                if let Some(field) = &self.field {
                    error["data"] = json!({"field": field});
                }
            }
            Generation::V1_0 => error["data"] = Value::Array(self.details()),
        }
        json!({"jsonrpc": "2.0", "id": id, "error": error})
    }

    /// The error as the HTTP+JSON binding answers it (a2a-1.0.md §11.6): a `google.rpc.Status`
    /// carrying the HTTP `status` and its gRPC name, with 1.0's details — in either generation,
    /// since 0.3's REST clients read the HTTP status alone.
    pub fn status_body(&self, status: u16, name: &str) -> Value {
        json!({"error": {
            "code": status,
            "status": name,
            "message": self.message,
            "details": self.details(),
        }})
    }

    /// 1.0's error details: a `google.rpc.ErrorInfo` naming the reason, and a
    /// `google.rpc.BadRequest` naming the field when one is at fault.
    fn details(&self) -> Vec<Value> {
        let mut details = vec![json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": self.reason.unwrap_or_else(|| reason(self.code)),
            "domain": DOMAIN,
        })];
        if let Some(field) = &self.field {
            details.push(json!({
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"field": field, "description": self.message}],
            }));
        }
        details
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::rpc::TASK_NOT_FOUND;

    #[test]
    fn each_generation_gets_its_shape() {
        let missing = RpcError::new(TASK_NOT_FOUND, "task not found");
        let old = missing.answer(json!(7), Generation::V0_3);
        assert_eq!(
            old,
            json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32001, "message": "task not found"}})
        );
        let new = missing.answer(json!("a"), Generation::V1_0);
        assert_eq!(new["error"]["data"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(
            new["error"]["data"][0]["@type"],
            "type.googleapis.com/google.rpc.ErrorInfo"
        );
        assert_eq!(new["error"]["data"].as_array().unwrap().len(), 1);

        let bad = RpcError::invalid("params.message.role", "must be \"ROLE_USER\"");
        assert_eq!(bad.code, INVALID_PARAMS);
        let new = bad.answer(Value::Null, Generation::V1_0);
        assert_eq!(
            new["error"]["data"][1]["fieldViolations"][0]["field"],
            "params.message.role"
        );
        let old = bad.answer(Value::Null, Generation::V0_3);
        assert_eq!(old["error"]["data"]["field"], "params.message.role");
        assert!(
            old["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("params.message.role: ")
        );
    }
}
