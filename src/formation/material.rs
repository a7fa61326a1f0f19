//! A formation's joining material, minted once per launch (or per emitted manifest set) from a
//! master key that lives in memory only: each member's door key, and one `mft1` token per edge
//! the roster grants. The launcher writes it down a member's channel; the Kubernetes emitter
//! writes it into that member's Secret. One derivation, so a launched member and a mounted one
//! verify and call alike.

use serde_json::json;

use super::admission::Admitted;
use crate::id::FormationId;
use crate::json::channel::Call;
use crate::secret::Secret;
use crate::token::{self, Key};

/// Domain of a member's door key derived from the formation's master key.
const DOOR_KEY_DOMAIN: &str = "murmur-formation-door-v1";

/// A formation's identity and master key.
pub struct Material {
    pub id: FormationId,
    master: Key,
}

impl Material {
    /// A new formation: a fresh id and master key.
    pub fn mint() -> Result<Self, String> {
        Ok(Self {
            id: FormationId::mint()?,
            master: Key::generate()?,
        })
    }

    /// A member's door key: `HMAC(master, "murmur-formation-door-v1" 0x1f frm_id 0x1f member)`.
    pub fn door_key(&self, member: &str) -> Key {
        self.master
            .derive(&[DOOR_KEY_DOMAIN, self.id.as_str(), member])
    }

    /// base64url of `member`'s door key, as a channel line or a Secret carries it.
    pub fn door_key_text(&self, member: &str) -> Secret {
        Secret::new(crate::b64::encode(self.door_key(member).as_bytes()))
    }

    /// One token per callee of `member`, each MACed with the callee's door key.
    pub fn calls(&self, member: &Admitted) -> Vec<Call> {
        member
            .callees
            .iter()
            .map(|to| Call {
                name: to.clone(),
                token: token::mint(
                    &self.door_key(to),
                    token::FORMATION,
                    &json!({"formation": self.id, "from": member.name, "to": to}),
                ),
            })
            .collect()
    }
}
