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
mod tests {
    use super::*;
    use serde_json::json;

    fn key(byte: u8) -> Key {
        Key::from_bytes([byte; 32])
    }

    #[test]
    fn a_minted_token_verifies_with_its_key_and_family_only() {
        let payload = json!({"credential": "operator", "scopes": ["message/send"]});
        let token = mint(&key(1), DOOR, &payload);
        assert!(token.expose().starts_with("mdt1."));
        assert_eq!(verify(&key(1), DOOR, token.expose()), Some(payload.clone()));
        assert_eq!(verify(&key(2), DOOR, token.expose()), None);
        // Same key, another family: the domain separates them even with the prefix swapped.
        assert_eq!(verify(&key(1), CONTROL, token.expose()), None);
        let swapped = token.expose().replacen("mdt1", "ctl1", 1);
        assert_eq!(verify(&key(1), CONTROL, &swapped), None);
    }

    #[test]
    fn a_payload_with_a_duplicate_key_is_refused_even_with_a_good_mac() {
        // MACed with the right key: only the payload's shape can refuse it.
        let payload_b64 =
            b64::encode(br#"{"credential":"reader","credential":"operator","scopes":[]}"#);
        let tag = key(1).mac(DOOR, &payload_b64).finalize().into_bytes();
        let token = format!("mdt1.{payload_b64}.{}", b64::encode(&tag));
        assert_eq!(verify(&key(1), DOOR, &token), None);
        let once = b64::encode(br#"{"credential":"operator","scopes":[]}"#);
        let tag = key(1).mac(DOOR, &once).finalize().into_bytes();
        let token = format!("mdt1.{once}.{}", b64::encode(&tag));
        assert!(
            verify(&key(1), DOOR, &token).is_some(),
            "the control case verifies"
        );
    }

    #[test]
    fn altered_truncated_and_malformed_tokens_are_refused() {
        let token = mint(&key(1), DOOR, &json!({"credential": "operator"}));
        let text = token.expose();
        let mut refused = vec![
            String::new(),
            "mdt1".into(),
            "mdt1..".into(),
            format!("{text}."),
            format!("{text}x"),
            text[..text.len() - 1].to_string(),
            text.replacen("mdt1.", "mdt1.x", 1),
            "x".repeat(MAX_TOKEN_LEN + 1),
        ];
        // Flip each character of the payload and MAC in turn.
        for i in 5..text.len() {
            let mut bytes = text.as_bytes().to_vec();
            bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
            refused.push(String::from_utf8(bytes).unwrap());
        }
        for bad in refused {
            if bad != text {
                assert_eq!(verify(&key(1), DOOR, &bad), None, "{bad}");
            }
        }
    }

    #[test]
    fn a_validly_macd_non_object_payload_is_refused() {
        let token = mint(&key(1), DOOR, &json!(["not", "an", "object"]));
        assert_eq!(verify(&key(1), DOOR, token.expose()), None);
    }

    #[test]
    fn derived_keys_differ_by_every_part() {
        let master = key(9);
        let a = master.derive(&["murmur-formation-door-v1", "frm_1", "reviewer"]);
        let b = master.derive(&["murmur-formation-door-v1", "frm_1", "summarizer"]);
        let c = master.derive(&["murmur-formation-door-v1", "frm_2", "reviewer"]);
        assert_ne!(a.as_bytes(), b.as_bytes());
        assert_ne!(a.as_bytes(), c.as_bytes());
        assert_eq!(
            a.as_bytes(),
            master
                .derive(&["murmur-formation-door-v1", "frm_1", "reviewer"])
                .as_bytes()
        );
        assert_eq!(format!("{a:?}"), "Key(<redacted>)");
    }
}
