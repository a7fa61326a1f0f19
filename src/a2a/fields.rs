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

/// A ProtoJSON enum member as sent: its name or its number. The proto3 JSON mapping requires a
/// parser to accept either (`"ROLE_USER"` and `1` are the same value); answers still spell names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enum<'a> {
    Name(&'a str),
    Number(i32),
}

/// An enum member (`None` when absent or `null`): a string, or an integer within `int32` (the
/// wire type of a proto enum); anything else is -32602 naming it.
pub fn proto_enum<'a>(map: &'a Fields, key: &str, at: &str) -> Result<Option<Enum<'a>>, RpcError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) => Ok(Some(Enum::Name(name))),
        Some(value) => value
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(|n| Some(Enum::Number(n)))
            .ok_or_else(|| {
                RpcError::invalid(
                    format!("{at}.{key}"),
                    "must be an enum value: its name (a string) or its number (an integer)",
                )
            }),
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

/// The longest id a client may name (a `contextId`): it becomes a handler's `MUR_CONTEXT_ID`.
const MAX_ID: usize = 256;

/// An id the client chose: a non-empty string of at most [`MAX_ID`] bytes without control
/// characters (a NUL could not reach a handler's environment; a newline would split a line).
pub fn id<'a>(map: &'a Fields, key: &str, at: &str) -> Result<Option<&'a str>, RpcError> {
    let Some(id) = string(map, key, at)? else {
        return Ok(None);
    };
    if id.is_empty() || id.len() > MAX_ID || id.chars().any(char::is_control) {
        return Err(RpcError::invalid(
            format!("{at}.{key}"),
            format!("must be 1 to {MAX_ID} bytes without control characters"),
        ));
    }
    Ok(Some(id))
}

/// `metadata`, moved out of `map`: an object, kept as sent, within [`MAX_DEPTH`].
pub fn take_metadata(map: &mut Fields, at: &str) -> Result<Option<Value>, RpcError> {
    match map.remove("metadata") {
        None | Some(Value::Null) => Ok(None),
        Some(value @ Value::Object(_)) => {
            within_depth(&value, &format!("{at}.metadata"))?;
            Ok(Some(value))
        }
        Some(_) => Err(RpcError::invalid(
            format!("{at}.metadata"),
            "must be an object",
        )),
    }
}

/// How deep a client's free-form JSON (`data`, `metadata`) may nest: what the handler is handed
/// in `message.json` stays readable by a parser with a modest recursion limit.
pub const MAX_DEPTH: usize = 64;

/// `value` (the member at `at`) nests at most [`MAX_DEPTH`] arrays and objects deep.
pub fn within_depth(value: &Value, at: &str) -> Result<(), RpcError> {
    if depth(value) > MAX_DEPTH {
        return Err(RpcError::invalid(
            at,
            format!("nests deeper than {MAX_DEPTH} levels"),
        ));
    }
    Ok(())
}

/// How many arrays and objects deep `value` nests (a scalar is 0). Recursion is bounded by the
/// JSON parser's own limit (128).
fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// `value` with every member named by its proto field name (`message_id`) renamed to its JSON
/// name (`messageId`): a proto JSON parser accepts either, and A2A 1.0's JSON-RPC params and both
/// generations' HTTP+JSON bodies are proto JSON (a2a-sdk's 0.3 REST client and the TCK's
/// clients send the former). A `metadata` or `data` member is the client's own JSON, left as it is.
/// Two members that name one field (`message_id` and `messageId`) are refused as a key named
/// twice is: which one wins would be the parser's whim.
pub fn lower_camel(value: Value) -> Result<Value, RpcError> {
    Ok(match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, inner) in map {
                let (name, inner) = match key.as_str() {
                    "metadata" | "data" => (key.clone(), inner),
                    _ => (camel(&key), lower_camel(inner)?),
                };
                if out.contains_key(&name) {
                    return Err(RpcError::invalid(
                        "params",
                        format!("{key} and another member both name the field {name}"),
                    ));
                }
                out.insert(name, inner);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(lower_camel)
                .collect::<Result<_, _>>()?,
        ),
        other => other,
    })
}

/// `snake_case` as `lowerCamelCase`.
fn camel(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        match (c, upper) {
            ('_', _) => upper = true,
            (c, true) => {
                out.push(c.to_ascii_uppercase());
                upper = false;
            }
            (c, false) => out.push(c),
        }
    }
    out
}
