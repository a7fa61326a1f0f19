//! The keys and tokens a session mints at its start: its door's, for the operator and each
//! declared credential (and the formation side for a member), and its control plane's.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Declared;
use super::control::Control;
use super::member::Member;
use crate::id::SessionId;

/// Every key and token a session holds: its door's (operator and declared credentials, and
/// the formation side for a member), and its control plane's.
pub(super) struct Tokens {
    pub(super) auth: Option<super::auth::DoorAuth>,
    pub(super) operator: Option<crate::secret::Secret>,
    pub(super) credentials: BTreeMap<String, crate::secret::Secret>,
    pub(super) control: Option<Arc<Control>>,
    pub(super) control_token: Option<crate::secret::Secret>,
}

impl Tokens {
    pub(super) fn mint(
        declared: &Declared,
        session_id: &SessionId,
        member: Option<&Member>,
    ) -> Result<Self, String> {
        let auth = match &declared.credentials {
            Some(_) => Some(super::auth::DoorAuth::new(
                &declared.name,
                member.map(|m| super::auth::FormationDoor {
                    key: m.door_key.clone(),
                    formation_id: m.formation_id.to_string(),
                    member: m.name.clone(),
                }),
            )?),
            None => None,
        };
        let credentials = match (&auth, &declared.credentials) {
            (Some(auth), Some(list)) => list
                .iter()
                .map(|(name, scopes)| (name.clone(), auth.mint(name, scopes)))
                .collect(),
            _ => BTreeMap::new(),
        };
        let (control, control_token) = match &declared.control {
            Some((settings, secrets)) => {
                let (control, token) = Control::new(session_id.as_str(), settings, secrets)?;
                (Some(Arc::new(control)), Some(token))
            }
            None => (None, None),
        };
        Ok(Self {
            operator: auth.as_ref().map(super::auth::DoorAuth::mint_operator),
            auth,
            credentials,
            control,
            control_token,
        })
    }
}
