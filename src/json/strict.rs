//! JSON read as a [`Value`] that refuses a duplicate key at any depth (DESIGN.md §2).
//!
//! `serde_json` keeps the last of two equal keys. For JSON that decides something — a JSON-RPC
//! envelope, a token payload, a call line, a readiness line, a control body — that is a way to
//! show one reader one value and another reader another (`"method"` twice, one for a proxy's
//! eyes). Typed wire structs need none of this: serde's derive already refuses a duplicate field.
//!
//! A door request is read by [`from_request`], which also meters what the tree costs (refusing
//! once the session's memory budget says no, [`Refusal::Budget`]) and keeps each message part's
//! `data` (`params.message.parts[i].data`) as its text ([`raw`]), never as a tree ~16 times its
//! size. [`raw::MARKER`] is refused as a key everywhere.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::raw;

/// Parse `bytes` as one JSON value; two equal keys in one object are an error (a data error,
/// naming the key), like any malformed input.
pub fn from_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let meter = Meter::unlimited();
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    let value = Strict::new(Where::Other, &meter).deserialize(&mut reader)?;
    reader.end()?;
    Ok(value)
}

/// Why a request was not read.
#[derive(Debug)]
pub enum Refusal {
    /// Not JSON, or a repeated or reserved key.
    Json(serde_json::Error),
    /// The tree would cost more than the memory budget grants.
    Budget,
}

/// Read a JSON-RPC request as [`from_slice`] does, its parts' `data` kept as text (standing as
/// [`raw`] markers in the tree), asking `grant` for the bytes the tree costs as it grows (in
/// steps of [`STEP`]); `grant` saying no stops the read at once.
pub fn from_request(bytes: &[u8], grant: &dyn Fn(usize) -> bool) -> Result<Value, Refusal> {
    let meter = Meter {
        pending: Cell::new(0),
        refused: Cell::new(false),
        grant,
    };
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    let read = Strict::new(Where::Top, &meter)
        .deserialize(&mut reader)
        .and_then(|value| reader.end().map(|()| value));
    let flushed = meter.flush();
    match read {
        _ if meter.refused.get() || !flushed => Err(Refusal::Budget),
        Ok(value) => Ok(value),
        Err(err) => Err(Refusal::Json(err)),
    }
}

/// How many bytes of estimated cost are asked for at once.
pub const STEP: usize = 64 << 10;

/// What a value costs in a tree beyond its text: a `Value` (32 bytes), a `Vec`'s slack or a map
/// node's share, allocator headers. An estimate on the high side.
const NODE: usize = 64;

/// Counts what the tree being built costs and asks for it in steps.
struct Meter<'a> {
    pending: Cell<usize>,
    refused: Cell<bool>,
    grant: &'a dyn Fn(usize) -> bool,
}

impl Meter<'_> {
    fn unlimited() -> Meter<'static> {
        Meter {
            pending: Cell::new(0),
            refused: Cell::new(false),
            grant: &|_| true,
        }
    }

    /// Count `bytes` more; `false` once the grant has been refused.
    fn spend(&self, bytes: usize) -> bool {
        self.pending.set(self.pending.get() + bytes);
        self.pending.get() < STEP || self.flush()
    }

    /// Ask for what is counted and not yet granted.
    fn flush(&self) -> bool {
        let pending = self.pending.replace(0);
        if self.refused.get() || (pending > 0 && !(self.grant)(pending)) {
            self.refused.set(true);
            return false;
        }
        true
    }

    fn refuse<E: de::Error>(&self) -> E {
        E::custom("the memory budget is full")
    }
}

/// Where in a JSON-RPC request the value being read sits: only a message part's `data` is kept
/// as text.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Where {
    Top,
    Params,
    Message,
    Parts,
    Part,
    Other,
}

impl Where {
    /// Where the member `key` of an object here sits.
    fn member(self, key: &str) -> Where {
        match (self, key) {
            (Where::Top, "params") => Where::Params,
            (Where::Params, "message") => Where::Message,
            (Where::Message, "parts") => Where::Parts,
            _ => Where::Other,
        }
    }

    /// Where an element of an array here sits.
    fn element(self) -> Where {
        match self {
            Where::Parts => Where::Part,
            _ => Where::Other,
        }
    }
}

/// The seed that builds a [`Value`] the way `serde_json` does, but checks each object's keys.
#[derive(Clone, Copy)]
struct Strict<'m, 'g> {
    at: Where,
    meter: &'m Meter<'g>,
}

impl<'m, 'g> Strict<'m, 'g> {
    fn new(at: Where, meter: &'m Meter<'g>) -> Self {
        Self { at, meter }
    }

    fn at(self, at: Where) -> Self {
        Self { at, ..self }
    }

    fn spend<E: de::Error>(self, bytes: usize) -> Result<(), E> {
        if self.meter.spend(bytes) {
            Ok(())
        } else {
            Err(self.meter.refuse())
        }
    }

    /// A part's `data`, read as its text: a marker for an array or object, the value itself for
    /// a scalar (a string costs its length either way).
    fn captured<E: de::Error>(self, raw: &RawValue) -> Result<Value, E> {
        self.spend(raw.get().len() + NODE)?;
        let text = raw.get();
        if text.starts_with(['[', '{']) {
            let kept = raw::RawJson::from_text(text.to_string()).map_err(E::custom)?;
            return Ok(kept.marker());
        }
        serde_json::from_str(text).map_err(E::custom)
    }
}

impl<'de> DeserializeSeed<'de> for Strict<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.spend(NODE)?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.spend(NODE)?;
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.spend(NODE)?;
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.spend(NODE)?;
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.spend(NODE + v.len())?;
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.spend(NODE + v.len())?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.spend(NODE)?;
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.spend(NODE)?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.at(self.at.element()))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.spend(NODE)?;
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == raw::MARKER {
                return Err(de::Error::custom("the key \"\\u0000mur:raw\" is reserved"));
            }
            self.spend(NODE + key.len())?;
            let value = if self.at == Where::Part && key == "data" {
                self.captured(&map.next_value::<Box<RawValue>>()?)?
            } else {
                map.next_value_seed(self.at(self.at.member(&key)))?
            };
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key {:?}",
                    key.chars().take(64).collect::<String>()
                )));
            }
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duplicate_key_at_any_depth_is_refused_naming_it() {
        for (text, key) in [
            (r#"{"method":"a","method":"b"}"#, "method"),
            (r#"{"params":{"id":1,"id":2}}"#, "id"),
            (r#"[{"x":{"y":[{"z":1,"z":1}]}}]"#, "z"),
        ] {
            let err = from_slice(text.as_bytes()).unwrap_err();
            assert!(err.is_data(), "{text}: {err}");
            assert!(
                err.to_string()
                    .contains(&format!("duplicate key \"{key}\"")),
                "{err}"
            );
        }
    }

    #[test]
    fn anything_else_reads_as_serde_json_reads_it() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1,-2,3.5,true,null,"s"]}}"#,
            r#"[]"#,
            r#"{"a":{},"b":{"a":1}}"#,
            "18446744073709551615",
            "-9223372036854775808",
            r#""\u00e9\ud83d\ude00""#,
        ] {
            let ours = from_slice(text.as_bytes()).unwrap();
            let theirs: Value = serde_json::from_str(text).unwrap();
            assert_eq!(ours, theirs, "{text}");
        }
        for bad in ["", "{", r#"{"a":1} x"#, "[1,]", "nul"] {
            let ours = from_slice(bad.as_bytes()).unwrap_err();
            assert!(!ours.is_data(), "{bad:?}: {ours}");
            assert!(serde_json::from_str::<Value>(bad).is_err());
        }
    }

    #[test]
    fn typed_wire_structs_refuse_a_duplicate_field_through_serde() {
        let record = br#"{"session_id":"ses_0199c4e2f1b7712a9d3e4f5061728394","url":"127.0.0.1:1",
            "pid":1,"pid":2,"process_start":"42","capsule_name":"c","capsule_version":"1",
            "workdir":"/","outlives_launcher":true,"started_at":"2026-01-01T00:00:00Z"}"#;
        let err = crate::json::record::RunningRecord::from_slice(record).unwrap_err();
        assert!(err.contains("duplicate field `pid`"), "{err}");
        let roster = br#"{"members":[],"members":[]}"#;
        let err = crate::json::roster::Roster::from_slice(roster).unwrap_err();
        assert!(err.contains("duplicate key \"members\""), "{err}");
        let line = br#"{"addresses":[],"addresses":[]}"#;
        assert!(crate::json::channel::parse::<crate::json::channel::Addresses>(line, "x").is_err());
        let manifest: Result<crate::json::manifest::Manifest, _> =
            serde_json::from_slice(br#"{"name":"a","name":"b","version":"1"}"#);
        assert!(
            manifest
                .unwrap_err()
                .to_string()
                .contains("duplicate field `name`")
        );
    }
}
