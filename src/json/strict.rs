//! JSON read as a [`Value`] that refuses a duplicate key at any depth (DESIGN.md §2).
//!
//! `serde_json` keeps the last of two equal keys. For JSON that decides something — a JSON-RPC
//! envelope, a token payload, a call line, a readiness line, a control body — that is a way to
//! show one reader one value and another reader another (`"method"` twice, one for a proxy's
//! eyes). Typed wire structs need none of this: serde's derive already refuses a duplicate field.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Parse `bytes` as one JSON value; two equal keys in one object are an error (a data error,
/// naming the key), like any malformed input.
pub fn from_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    let value = Strict.deserialize(&mut reader)?;
    reader.end()?;
    Ok(value)
}

/// The seed that builds a [`Value`] the way `serde_json` does, but checks each object's keys.
#[derive(Clone, Copy)]
struct Strict;

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Strict)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Strict)?;
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
        assert!(err.contains("duplicate field `members`"), "{err}");
        let line = br#"{"addresses":[],"addresses":[]}"#;
        assert!(
            crate::json::contract::parse::<crate::json::contract::Addresses>(line, "x").is_err()
        );
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
