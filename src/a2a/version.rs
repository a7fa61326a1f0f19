//! The two A2A generations the door speaks, and the `A2A-Version` header that picks one.
//!
//! A2A 1.0 (SPEC §3.6) says a client names `Major.Minor` in `A2A-Version` on every request, a
//! missing or empty header means 0.3, and a server answers a version it does not speak with
//! `VersionNotSupported` (-32009). Patch levels are not to be considered, so `1.0.1` is `1.0`;
//! anything else — `1.1`, `2.0`, `0.2`, garbage — is refused rather than guessed at.

pub use crate::methods::Generation;

impl Generation {
    /// The `A2A-Version` value a client of this generation sends.
    pub fn header(self) -> &'static str {
        match self {
            Generation::V0_3 => "0.3",
            Generation::V1_0 => "1.0",
        }
    }

    /// The generation an `A2A-Version` header names: `None` (absent) or empty is 0.3; `0.3`,
    /// `0.3.x`, `1.0`, `1.0.x` as they say. `Err` is the refusal's text, naming what was sent
    /// (cut short and escaped: a header is anyone's bytes).
    pub fn from_header(value: Option<&[u8]>) -> Result<Self, String> {
        let Some(raw) = value else {
            return Ok(Generation::V0_3);
        };
        let text = std::str::from_utf8(raw).unwrap_or("\u{fffd}").trim();
        let (major_minor, patch) = match text.match_indices('.').nth(1) {
            Some((at, _)) => (&text[..at], Some(&text[at + 1..])),
            None => (text, None),
        };
        let patch_ok = patch.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        match (major_minor, patch_ok) {
            ("", _) if patch.is_none() => Ok(Generation::V0_3),
            ("0.3", true) => Ok(Generation::V0_3),
            ("1.0", true) => Ok(Generation::V1_0),
            _ => Err(format!(
                "A2A-Version '{}' is not supported: this door speaks 1.0 and 0.3 (send \"A2A-Version: 1.0\", or no header for 0.3)",
                super::quote::quoted(text)
            )),
        }
    }
}

#[cfg(test)]
mod tests;
