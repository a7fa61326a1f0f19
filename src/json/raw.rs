//! Free-form JSON held as its text, never as a parsed tree.
//!
//! A `data` part of 1 MiB parsed into a [`Value`] costs about 16 MiB (a `[0,0,…]` array is half a
//! million 32-byte values); held as text it costs what it weighs. [`RawJson`] is that text,
//! checked to be one JSON value. Messages are still rendered as [`Value`]s (both generations'
//! shapes are built that way), so inside a rendered tree a part's data stands as a *marker*, a
//! one-member object `{MARKER: "<the JSON text>"}`, and [`to_vec`] writes each marker as the text
//! it holds. The strict reader ([`super::strict`]) refuses [`MARKER`] as a key in anything a
//! client sends, so a marker is only ever one this program made.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The key of a marker object. It starts with NUL, which no sensible key does; a client that
/// sends it anyway is refused, naming it.
pub const MARKER: &str = "\u{0}mur:raw";

/// One JSON value kept as its text (whitespace between tokens as sent).
///
/// Invariant: the text is one valid JSON value (checked on every way in).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RawJson(Box<RawValue>);

impl PartialEq for RawJson {
    /// The same text; two spellings of one value (`1.0` and `1`) differ.
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl RawJson {
    /// `text`, if it is one JSON value.
    pub fn from_text(text: String) -> Result<Self, serde_json::Error> {
        RawValue::from_string(text.trim().to_string()).map(Self)
    }

    /// `value` written out compactly.
    pub fn from_value(value: &Value) -> Result<Self, serde_json::Error> {
        serde_json::value::to_raw_value(value).map(Self)
    }

    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Its length in bytes: what holding it costs.
    pub fn len(&self) -> usize {
        self.get().len()
    }

    pub fn is_empty(&self) -> bool {
        self.get().is_empty()
    }

    /// The marker standing for it in a rendered tree: one copy of its text.
    pub fn marker(&self) -> Value {
        let mut map = Map::new();
        map.insert(MARKER.to_string(), Value::String(self.get().to_string()));
        Value::Object(map)
    }

    /// Parsed into a tree (tests, and small values only: this is the cost the type avoids).
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.get()).unwrap_or(Value::Null)
    }
}

/// The text a marker object holds, if `map` is one.
fn marked(map: &Map<String, Value>) -> Option<&str> {
    if map.len() != 1 {
        return None;
    }
    match map.get(MARKER)? {
        Value::String(text) => Some(text),
        _ => None,
    }
}

/// `value`, if it is a marker: its JSON text; otherwise `value` back.
pub fn unmark(value: Value) -> Result<String, Value> {
    match value {
        Value::Object(mut map) if marked(&map).is_some() => match map.remove(MARKER) {
            Some(Value::String(text)) => Ok(text),
            _ => Err(Value::Null),
        },
        other => Err(other),
    }
}

/// A tree serialized with each marker written as its JSON text.
struct Spliced<'a>(&'a Value);

impl Serialize for Spliced<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Spliced(item))?;
                }
                seq.end()
            }
            Value::Object(map) => {
                if let Some(text) = marked(map) {
                    // A marker is made from a RawJson, so it holds valid JSON; checked again (a
                    // scan, no tree) so nothing invalid is ever written.
                    let raw: &RawValue =
                        serde_json::from_str(text).map_err(serde::ser::Error::custom)?;
                    return raw.serialize(s);
                }
                let mut out = s.serialize_map(Some(map.len()))?;
                for (key, value) in map {
                    out.serialize_entry(key, &Spliced(value))?;
                }
                out.end()
            }
            other => other.serialize(s),
        }
    }
}

/// `value` as JSON bytes, each marker written as the text it holds.
pub fn to_vec(value: &Value) -> Vec<u8> {
    // Room for a `SendMessage`'s answer (most of a KiB) at once, not four growths from the 128
    // bytes `serde_json::to_vec` starts with.
    let mut out = Vec::with_capacity(1024);
    // Writing a tree into a Vec fails only on a marker that is not JSON, which none is.
    match serde_json::to_writer(&mut out, &Spliced(value)) {
        Ok(()) => out,
        Err(_) => b"null".to_vec(),
    }
}

/// `value` with every marker parsed back into a tree: for tests and small answers.
pub fn expand(value: &Value) -> Value {
    serde_json::from_slice(&to_vec(value)).unwrap_or(Value::Null)
}

/// How deep `text` (one JSON value) nests arrays and objects; an error naming a key that appears
/// twice in one object. Builds no tree: it holds one object's keys at each level at most.
pub fn check(text: &str) -> Result<usize, serde_json::Error> {
    let mut reader = serde_json::Deserializer::from_str(text);
    let depth = Check.deserialize(&mut reader)?;
    reader.end()?;
    Ok(depth)
}

/// The visitor of [`check`]: a value's depth (a scalar is 0).
#[derive(Clone, Copy)]
struct Check;

impl<'de> DeserializeSeed<'de> for Check {
    type Value = usize;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Check {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_i64<E>(self, _: i64) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_u64<E>(self, _: u64) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_f64<E>(self, _: f64) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_str<E>(self, _: &str) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_unit<E>(self) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        let mut deepest = 0;
        while let Some(depth) = seq.next_element_seed(Check)? {
            deepest = deepest.max(depth);
        }
        Ok(deepest + 1)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<usize, A::Error> {
        let mut keys = HashSet::new();
        let mut deepest = 0;
        while let Some(key) = map.next_key::<String>()? {
            deepest = deepest.max(map.next_value_seed(Check)?);
            if !keys.insert(key) {
                return Err(de::Error::custom("a key appears twice in one object"));
            }
        }
        Ok(deepest + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_marker_is_written_as_its_text_and_reads_back() {
        let raw = RawJson::from_text(r#" {"k": [1, 2.5, "x"]} "#.into()).unwrap();
        let tree = json!({"parts": [{"data": raw.marker()}]});
        assert_eq!(
            to_vec(&tree),
            br#"{"parts":[{"data":{"k": [1, 2.5, "x"]}}]}"#.to_vec()
        );
        assert_eq!(expand(&tree)["parts"][0]["data"]["k"][1], 2.5);
        assert_eq!(unmark(raw.marker()), Ok(raw.get().to_string()));
        assert_eq!(unmark(json!({"a": 1})), Err(json!({"a": 1})));
    }

    #[test]
    fn check_measures_depth_and_refuses_a_repeated_key() {
        assert_eq!(check("1").unwrap(), 0);
        assert_eq!(check(r#"[[], {"a": [1]}]"#).unwrap(), 3);
        let twice = check(r#"[{"a": 1, "a": 2}]"#).unwrap_err();
        assert!(twice.to_string().contains("twice"), "{twice}");
        assert!(RawJson::from_text("{nope".into()).is_err());
    }
}
