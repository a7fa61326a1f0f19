//! Identifiers: `ses_`, `frm_`, `tsk_`, `ctx_` followed by the 32 lowercase hex digits of a
//! UUIDv7.
//!
//! UUIDv7 leads with the Unix-ms time, so ids sort lexically in the order they were minted, which
//! is what lets "most recent first" be a string sort. Anything else in a field that must hold an
//! id is refused, never repaired: a record naming a malformed id is unreadable, and pruned.

use std::fmt;
use std::marker::PhantomData;

/// The prefix that says which kind of thing an [`Id`] names.
pub trait Kind {
    const PREFIX: &'static str;
    /// What the kind is called in an error message.
    const NOUN: &'static str;
}

/// A session, as `mur run` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Session;
/// A formation, as `mur formation` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Formation;

/// A task at a door.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Task;
/// A conversation context at a door.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Context;

impl Kind for Task {
    const PREFIX: &'static str = "tsk_";
    const NOUN: &'static str = "task id";
}
impl Kind for Context {
    const PREFIX: &'static str = "ctx_";
    const NOUN: &'static str = "context id";
}

impl Kind for Session {
    const PREFIX: &'static str = "ses_";
    const NOUN: &'static str = "session id";
}
impl Kind for Formation {
    const PREFIX: &'static str = "frm_";
    const NOUN: &'static str = "formation id";
}

/// A well-formed identifier of kind `K`. Holding one proves the text was checked.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id<K> {
    text: String,
    kind: PhantomData<K>,
}

pub type SessionId = Id<Session>;
pub type FormationId = Id<Formation>;
pub type TaskId = Id<Task>;
pub type ContextId = Id<Context>;

/// Number of hex digits after the prefix: one UUID, without dashes.
pub const HEX_DIGITS: usize = 32;

impl<K: Kind> Id<K> {
    /// `text` as an id of this kind, or an error naming the text and the expected shape.
    pub fn parse(text: &str) -> Result<Self, String> {
        let hex = text.strip_prefix(K::PREFIX).unwrap_or("");
        if text.starts_with(K::PREFIX) && is_lower_hex(hex) {
            Ok(Self {
                text: text.to_string(),
                kind: PhantomData,
            })
        } else {
            Err(format!(
                "'{}' is not a {} ({}followed by {HEX_DIGITS} lowercase hex digits)",
                text.escape_debug(),
                K::NOUN,
                K::PREFIX
            ))
        }
    }

    /// A fresh id: a UUIDv7 (48-bit Unix-ms time, version 7, RFC 9562 variant, 74 random bits),
    /// so ids minted later sort later.
    pub fn mint() -> Result<Self, String> {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut uuid = crate::sys::random::batched::<16>()?;
        uuid[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
        uuid[6] = 0x70 | (uuid[6] & 0x0f);
        uuid[8] = 0x80 | (uuid[8] & 0x3f);
        Ok(Self {
            text: format!("{}{}", K::PREFIX, lower_hex(&uuid)),
            kind: PhantomData,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The 32 hex digits, without the prefix: what a suffix address is matched against.
    pub fn hex(&self) -> &str {
        &self.text[K::PREFIX.len()..]
    }
}

/// `bytes` as lowercase hex, two digits a byte (a table, not a `format!` a byte: a task's ids
/// are minted on every `SendMessage`).
pub fn lower_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(2 * bytes.len());
    for b in bytes {
        hex.push(char::from(DIGITS[usize::from(b >> 4)]));
        hex.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    hex
}

fn is_lower_hex(hex: &str) -> bool {
    hex.len() == HEX_DIGITS && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl<K> fmt::Display for Id<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl<K> fmt::Debug for Id<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text, f)
    }
}

impl<K> serde::Serialize for Id<K> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de, K: Kind> serde::Deserialize<'de> for Id<K> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "ses_0199c4e2f1b7712a9d3e4f5061728394";

    #[test]
    fn a_well_formed_id_parses_and_round_trips() {
        let id = SessionId::parse(GOOD).unwrap();
        assert_eq!(id.as_str(), GOOD);
        assert_eq!(id.hex(), &GOOD[4..]);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(serde_json::from_str::<SessionId>(&json).unwrap(), id);
    }

    #[test]
    fn minted_ids_are_well_formed_v7_and_time_ordered() {
        let first = SessionId::mint().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let second = SessionId::mint().unwrap();
        assert!(first < second, "{first} then {second}");
        assert_eq!(SessionId::parse(second.as_str()), Ok(second.clone()));
        let hex = second.hex();
        assert_eq!(&hex[12..13], "7", "version nibble");
        assert!(
            matches!(&hex[16..17], "8" | "9" | "a" | "b"),
            "variant bits"
        );
        assert!(FormationId::mint().unwrap().as_str().starts_with("frm_"));
    }

    #[test]
    fn malformed_ids_are_refused_not_repaired() {
        for bad in [
            "",
            "ses_",
            "frm_0199c4e2f1b7712a9d3e4f5061728394",
            "ses_0199C4E2F1B7712A9D3E4F5061728394",
            "ses_0199c4e2f1b7712a9d3e4f506172839",
            "ses_0199c4e2f1b7712a9d3e4f50617283944",
            "ses_0199c4e2-1b7712a9d3e4f5061728394",
            "ses_0199c4e2f1b7712a9d3e4f506172839\u{e9}",
        ] {
            let err = SessionId::parse(bad).unwrap_err();
            assert!(err.contains("not a session id"), "{bad}: {err}");
        }
        assert!(FormationId::parse("frm_ABC").is_err());
        assert!(serde_json::from_str::<FormationId>("\"frm_ABC\"").is_err());
    }
}
