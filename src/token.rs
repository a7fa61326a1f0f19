//! The three token families: `mdt1` (door), `ctl1` (control), `mft1` (formation calls).
//!
//! A token is `<prefix>.<b64url(payload JSON)>.<b64url(HMAC-SHA256)>`, the MAC taken over
//! `<domain> 0x1f <prefix> 0x1f <payload b64>`. The domain string separates the families, so a
//! MAC minted for one can never verify as another even under the same key. Keys are 32 random
//! bytes held in memory by the process that mints, never written anywhere: a token outlives its
//! key only as a string that verifies against nothing.
//!
//! Verification runs in a fixed order — shape, then MAC (constant time), then payload — and a
//! refusal never says which step failed, so a caller learns nothing by probing.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::b64;
use crate::secret::Secret;

/// The longest token any verifier looks at.
pub const MAX_TOKEN_LEN: usize = 4096;

/// One token family: its text prefix and its MAC domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    pub prefix: &'static str,
    pub domain: &'static str,
}

pub const DOOR: Family = Family {
    prefix: "mdt1",
    domain: "murmur-door-token-v1",
};
pub const CONTROL: Family = Family {
    prefix: "ctl1",
    domain: "murmur-control-token-v1",
};
pub const FORMATION: Family = Family {
    prefix: "mft1",
    domain: "murmur-formation-token-v1",
};

/// A 32-byte MAC key. `Debug` never shows it.
#[derive(Clone)]
pub struct Key([u8; 32]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(<redacted>)")
    }
}

impl Key {
    /// A fresh key from `getrandom(2)`.
    pub fn generate() -> Result<Self, String> {
        crate::sys::random::bytes::<32>().map(Self)
    }

    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// A key as the launcher hands it over (the channel's `door_key`, a mounted member's
    /// `door-key` file): 32 bytes of base64url; `None` for anything else.
    pub fn from_base64url(text: &str) -> Option<Self> {
        b64::decode(text)
            .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
            .map(Self)
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    fn mac(&self, family: Family, payload_b64: &str) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(family.domain.as_bytes());
        mac.update(&[0x1f]);
        mac.update(family.prefix.as_bytes());
        mac.update(&[0x1f]);
        mac.update(payload_b64.as_bytes());
        mac
    }

    /// `HMAC(self, parts joined by 0x1f)`: derived keys (a formation's per-member door keys).
    pub fn derive(&self, parts: &[&str]) -> Key {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                mac.update(&[0x1f]);
            }
            mac.update(part.as_bytes());
        }
        Key(mac.finalize().into_bytes().into())
    }
}

/// Mint a token of `family` over `payload` (serialized as JSON) with `key`.
pub fn mint(key: &Key, family: Family, payload: &serde_json::Value) -> Secret {
    let payload_b64 = b64::encode(payload.to_string().as_bytes());
    let tag = key.mac(family, &payload_b64).finalize().into_bytes();
    Secret::new(format!(
        "{}.{payload_b64}.{}",
        family.prefix,
        b64::encode(&tag)
    ))
}

/// The payload of `token` if it is a `family` token minted with `key`; `None` otherwise, for any
/// reason.
pub fn verify(key: &Key, family: Family, token: &str) -> Option<serde_json::Value> {
    if token.len() > MAX_TOKEN_LEN {
        return None;
    }
    let mut parts = token.split('.');
    let (Some(prefix), Some(payload_b64), Some(tag_b64), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    if prefix != family.prefix {
        return None;
    }
    let tag = b64::decode(tag_b64)?;
    key.mac(family, payload_b64).verify_slice(&tag).ok()?;
    let payload = b64::decode(payload_b64)?;
    crate::json::strict::from_slice(&payload)
        .ok()
        .filter(serde_json::Value::is_object)
}

#[cfg(test)]
mod tests;
