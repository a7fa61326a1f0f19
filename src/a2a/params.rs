//! The `params` of each door method, read and checked: every refusal is -32602 naming the member
//! at fault, so a client learns exactly what to fix and a bad request costs only its own answer.

use serde_json::Value;

use super::error::RpcError;
use super::fields::{Enum, Fields, boolean, count, into_object, object, proto_enum, string};
use super::message::Message;
use super::task::State;
use super::version::Generation;

/// `ListTasks`' page size when none is asked for, and the largest it may ask for.
pub const DEFAULT_PAGE: usize = 50;
pub const MAX_PAGE: usize = 100;

/// `message/send` and `SendMessage`.
#[derive(Debug)]
pub struct Send {
    pub message: Message,
    /// Wait for the task to end before answering (0.3 `blocking`, default true; 1.0 the
    /// opposite of `returnImmediately`).
    pub blocking: bool,
    pub history_length: Option<usize>,
    /// The webhook config the send carried, unread: read ([`super::push::in_send`]) only where
    /// push notifications are on, and ignored elsewhere, as the reference servers do.
    pub push: Option<Value>,
}

/// The methods that name one task: get, cancel, subscribe.
#[derive(Debug)]
pub struct TaskRef {
    pub id: String,
    pub history_length: Option<usize>,
}

/// `ListTasks`.
#[derive(Debug)]
pub struct List {
    pub context_id: Option<String>,
    pub state: StateFilter,
    /// Only tasks whose status changed at or after this time (seconds since the epoch).
    pub updated_since: Option<i64>,
    /// Only tasks that arrived before this arrival number (from the page token).
    pub before: Option<u64>,
    pub page_size: usize,
    pub history_length: Option<usize>,
    pub include_artifacts: bool,
}

/// Which tasks a `ListTasks` `status` filter lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateFilter {
    /// No filter: absent, `TASK_STATE_UNSPECIFIED` (0), or `UNRECOGNIZED` (-1, the value an
    /// SDK's enum holds when none was chosen — @a2a-js/sdk 1.x sends it for `listTasks({})`).
    Any,
    Is(State),
    /// A state A2A defines that no task of this door is ever in (`TASK_STATE_REJECTED`,
    /// `TASK_STATE_AUTH_REQUIRED`): a valid filter that matches nothing.
    Nothing,
}

impl StateFilter {
    pub fn admits(self, state: State) -> bool {
        match self {
            StateFilter::Any => true,
            StateFilter::Is(wanted) => wanted == state,
            StateFilter::Nothing => false,
        }
    }

    /// Read `params.status` by name or by number, as ProtoJSON allows; anything that is not a
    /// `TaskState` is -32602 naming the member.
    fn read(map: &Fields) -> Result<Self, RpcError> {
        use super::task::STATES;
        let filter = match proto_enum(map, "status", "params")? {
            None => Some(StateFilter::Any),
            Some(Enum::Name("TASK_STATE_UNSPECIFIED" | "UNRECOGNIZED")) => Some(StateFilter::Any),
            Some(Enum::Name("TASK_STATE_REJECTED" | "TASK_STATE_AUTH_REQUIRED")) => {
                Some(StateFilter::Nothing)
            }
            Some(Enum::Name(name)) => State::from_wire(name, Generation::V1_0).map(StateFilter::Is),
            Some(Enum::Number(0 | -1)) => Some(StateFilter::Any),
            Some(Enum::Number(7 | 8)) => Some(StateFilter::Nothing),
            Some(Enum::Number(n)) => STATES
                .into_iter()
                .find(|s| s.number() == n)
                .map(StateFilter::Is),
        };
        filter.ok_or_else(|| {
            RpcError::invalid(
                "params.status",
                "must be a TaskState: a name (TASK_STATE_WORKING, TASK_STATE_COMPLETED, ...) or its number (0 to 8)",
            )
        })
    }
}

/// Read `message/send` or `SendMessage` params, moving the message out of `params`.
pub fn send(params: Value, generation: Generation) -> Result<Send, RpcError> {
    let mut map = into_object(params, "params")?;
    let message = map
        .remove("message")
        .ok_or_else(|| RpcError::invalid("params.message", "is required"))?;
    let message = Message::parse(message, generation, "params.message")?;
    let config = match map.get("configuration") {
        None | Some(Value::Null) => &Fields::new(),
        Some(Value::Object(config)) => config,
        Some(_) => {
            return Err(RpcError::invalid(
                "params.configuration",
                "must be an object",
            ));
        }
    };
    let blocking = match generation {
        Generation::V0_3 => boolean(config, "blocking", "params.configuration")?.unwrap_or(true),
        Generation::V1_0 => {
            !boolean(config, "returnImmediately", "params.configuration")?.unwrap_or(false)
        }
    };
    let push = config
        .get(super::push::send_key(generation))
        .filter(|v| !v.is_null())
        .cloned();
    Ok(Send {
        message,
        blocking,
        history_length: count(config, "historyLength", "params.configuration")?,
        push,
    })
}

pub fn task_ref(params: &Value) -> Result<TaskRef, RpcError> {
    let map = object(params, "params")?;
    let id = match map.get("id") {
        Some(Value::String(id)) if !id.is_empty() => id.clone(),
        _ => {
            return Err(RpcError::invalid(
                "params.id",
                "a task id (a non-empty string) is required",
            ));
        }
    };
    Ok(TaskRef {
        id,
        history_length: count(map, "historyLength", "params")?,
    })
}

pub fn list(params: &Value) -> Result<List, RpcError> {
    let empty = Value::Object(Fields::new());
    let map = object(if params.is_null() { &empty } else { params }, "params")?;
    let state = StateFilter::read(map)?;
    let page_size = match count(map, "pageSize", "params")? {
        None => DEFAULT_PAGE,
        Some(n @ 1..=MAX_PAGE) => n,
        Some(_) => {
            return Err(RpcError::invalid(
                "params.pageSize",
                format!("must be 1 to {MAX_PAGE}"),
            ));
        }
    };
    let before = match string(map, "pageToken", "params")? {
        None | Some("") => None,
        Some(token) => Some(token.parse::<u64>().map_err(|_| {
            RpcError::invalid(
                "params.pageToken",
                "is not a page token this door gave (send the nextPageToken of the previous page)",
            )
        })?),
    };
    let updated_since = match string(map, "statusTimestampAfter", "params")? {
        None => None,
        Some(text) => Some(crate::time::parse_rfc3339(text).ok_or_else(|| {
            RpcError::invalid(
                "params.statusTimestampAfter",
                "must be an RFC 3339 time such as 2026-01-31T12:00:00Z",
            )
        })?),
    };
    Ok(List {
        context_id: string(map, "contextId", "params")?.map(str::to_string),
        state,
        updated_since,
        before,
        page_size,
        history_length: count(map, "historyLength", "params")?,
        include_artifacts: boolean(map, "includeArtifacts", "params")?.unwrap_or(false),
    })
}

#[cfg(test)]
mod tests;
