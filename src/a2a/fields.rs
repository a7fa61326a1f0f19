//! Reading one member of a JSON object a client sent, by type, with the refusal naming it.
//!
//! `at` is where the object sits (`params.message`), so a refusal names the full path
//! (`params.message.messageId`). A member that is absent or `null` is absent, as ProtoJSON reads
//! it; one of the wrong type is -32602.

use serde_json::{Map, Value};

use super::error::RpcError;

/// A JSON object's members.
pub type Fields = Map<String, Value>;

pub fn object<'a>(value: &'a Value, at: &str) -> Result<&'a Fields, RpcError> {
    value
        .as_object()
        .ok_or_else(|| RpcError::invalid(at, "must be an object"))
}

/// The members of an object the caller hands over, to move values out of rather than copy
/// them (a `data` or `metadata` may be a megabyte of tree).
pub fn into_object(value: Value, at: &str) -> Result<Fields, RpcError> {
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(RpcError::invalid(at, "must be an object")),
    }
}

pub fn string<'a>(map: &'a Fields, key: &str, at: &str) -> Result<Option<&'a str>, RpcError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(RpcError::invalid(format!("{at}.{key}"), "must be a string")),
    }
}

pub fn boolean(map: &Fields, key: &str, at: &str) -> Result<Option<bool>, RpcError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(RpcError::invalid(
            format!("{at}.{key}"),
            "must be true or false",
        )),
    }
}

/// A count: a non-negative integer that fits an `int32`, as the protos declare them.
pub fn count(map: &Fields, key: &str, at: &str) -> Result<Option<usize>, RpcError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .filter(|&n| n <= i32::MAX as u64)
            .map(|n| Some(n as usize))
            .ok_or_else(|| {
                RpcError::invalid(format!("{at}.{key}"), "must be a non-negative integer")
            }),
    }
}

/// `metadata`, moved out of `map`: an object, kept as sent.
pub fn take_metadata(map: &mut Fields, at: &str) -> Result<Option<Value>, RpcError> {
    match map.remove("metadata") {
        None | Some(Value::Null) => Ok(None),
        Some(value @ Value::Object(_)) => Ok(Some(value)),
        Some(_) => Err(RpcError::invalid(
            format!("{at}.metadata"),
            "must be an object",
        )),
    }
}
