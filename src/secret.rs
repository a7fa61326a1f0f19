//! A token held in memory: never `Display`ed, never `Debug`ged.
//!
//! The one way out is [`Secret::expose`], and each call to it is a place where a token is allowed
//! to go: a `0600` file, an `Authorization` header, `mur token`'s stdout.

use std::fmt;

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(token: String) -> Self {
        Self(token)
    }

    /// The token itself. Callers are the places DESIGN.md lets a token reach.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl serde::Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn debug_never_shows_the_token() {
        let secret = super::Secret::new("mdt1.payload.mac".into());
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
        assert_eq!(secret.expose(), "mdt1.payload.mac");
    }
}
