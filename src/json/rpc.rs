//! JSON-RPC 2.0 as A2A uses it: the door's method names and the error codes, in one place for
//! the door that answers them, the host tools that call them and the manifest that grants them.

/// A2A 0.3: send a message, starting a task.
pub const MESSAGE_SEND: &str = "message/send";
/// A2A 0.3: read a task.
pub const TASKS_GET: &str = "tasks/get";
/// A2A 0.3: ask a task to end.
pub const TASKS_CANCEL: &str = "tasks/cancel";
/// A2A 0.3: the extended (authenticated) agent card.
pub const EXTENDED_CARD: &str = "agent/getAuthenticatedExtendedCard";
/// A2A 1.0's name for the extended card; a scope for [`EXTENDED_CARD`] grants it.
pub const EXTENDED_CARD_V1: &str = "GetExtendedAgentCard";
/// mur's own: end the session in order.
pub const SESSION_STOP: &str = "session/stop";

/// Every door method a scope may name (a manifest's credential scopes, a token's).
pub const DOOR_METHODS: &[&str] = &[
    MESSAGE_SEND,
    TASKS_GET,
    TASKS_CANCEL,
    EXTENDED_CARD,
    SESSION_STOP,
];

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const TASK_NOT_FOUND: i64 = -32001;
pub const TASK_NOT_CANCELABLE: i64 = -32002;
pub const UNSUPPORTED_OPERATION: i64 = -32004;
pub const EXTENDED_CARD_NOT_CONFIGURED: i64 = -32007;
