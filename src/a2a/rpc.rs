//! JSON-RPC 2.0 as A2A uses it: the error codes and their 1.0 reasons, and — re-exported from
//! [`crate::methods`], the leaf the manifest's check shares — the door's methods of both
//! generations and the scopes that grant them.

pub use crate::methods::{
    EXTENDED_CARD, EXTENDED_CARD_V1, MESSAGE_SEND, MESSAGE_STREAM, METHODS, Method, Op,
    SESSION_STOP, STOP_SESSION, TASKS_CANCEL, TASKS_GET, WATCH_SESSION, grant, is_scope, method,
    operator_scopes, scope_grants, scope_names, twin_names,
};

/// The answer to request `id` carrying `result`, moved in ([`crate::json::object`]: a rendered
/// task is not copied again).
pub fn result(id: serde_json::Value, result: serde_json::Value) -> serde_json::Value {
    crate::json::object([("jsonrpc", "2.0".into()), ("id", id), ("result", result)])
}

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const TASK_NOT_FOUND: i64 = -32001;
pub const TASK_NOT_CANCELABLE: i64 = -32002;
pub const PUSH_NOT_SUPPORTED: i64 = -32003;
pub const UNSUPPORTED_OPERATION: i64 = -32004;
pub const EXTENDED_CARD_NOT_CONFIGURED: i64 = -32007;
pub const VERSION_NOT_SUPPORTED: i64 = -32009;

/// The `google.rpc.ErrorInfo` reason a 1.0 error carries for `code`.
pub fn reason(code: i64) -> &'static str {
    match code {
        PARSE_ERROR => "PARSE_ERROR",
        INVALID_REQUEST => "INVALID_REQUEST",
        METHOD_NOT_FOUND => "METHOD_NOT_FOUND",
        INVALID_PARAMS => "INVALID_PARAMS",
        TASK_NOT_FOUND => "TASK_NOT_FOUND",
        TASK_NOT_CANCELABLE => "TASK_NOT_CANCELABLE",
        PUSH_NOT_SUPPORTED => "PUSH_NOTIFICATION_NOT_SUPPORTED",
        UNSUPPORTED_OPERATION => "UNSUPPORTED_OPERATION",
        EXTENDED_CARD_NOT_CONFIGURED => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
        VERSION_NOT_SUPPORTED => "VERSION_NOT_SUPPORTED",
        _ => "INTERNAL_ERROR",
    }
}
