//! Wire types: what `mur` reads from and writes to files and sockets, with the rules for refusing
//! a malformed one. (A2A's own shapes live in [`crate::a2a`].)

pub mod channel;
pub mod ended;
pub mod manifest;
pub mod raw;
pub mod record;
pub mod roster;
pub mod sandbox;
pub mod shape;
pub mod strict;

use serde_json::Value;

/// A JSON object of `fields`, each value moved in as it is. `serde_json::json!` passes every
/// value through `to_value`, which copies a tree already built by serializing it (and then drops
/// the original): for a rendered task, answered in a `SendMessage`, that was about a third of
/// the request's instructions. Keys in the map's order, as `json!` gives them.
pub fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    Value::Object(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// `value` as a file of mur's holds it: pretty JSON and a newline (records, ended records).
pub fn file_bytes(value: &impl serde::Serialize) -> Vec<u8> {
    let mut body = serde_json::to_vec_pretty(value).expect("a record always serializes");
    body.push(b'\n');
    body
}
