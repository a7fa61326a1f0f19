//! Door authentication: `mdt1` bearer tokens MACed with a key this session drew at start and
//! never wrote anywhere.
//!
//! Scopes are method names of either generation, and a scope grants its twin in the other
//! ([`crate::a2a::rpc::scope_grants`]). The operator token holds every method; each credential the
//! manifest declares gets one token with exactly its scopes. Checks run header → MAC (constant time) →
//! payload, and a refusal never says which failed: 401 with `WWW-Authenticate` for anything that
//! is not a valid token, 403 for a valid one lacking the method. Either carries a JSON-RPC error
//! body too ([`refuse`]), so a JSON-RPC client has an answer it can parse.

use serde_json::{Value, json};

use crate::a2a::error::RpcError;

use crate::a2a::rpc::{self, Op};
use crate::net::server::{Request, Response};
use crate::secret::Secret;
use crate::token::{self, Key};

/// Who is calling, once the door has checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// Anyone, at a door without authentication.
    Public,
    /// The operator token: every method, every task.
    Operator,
    /// A declared credential: its scopes, its own tasks.
    Credential { name: String, scopes: Vec<String> },
    /// Another member of this session's formation, by an `mft1` token for this door: the three
    /// call methods, its own tasks.
    Member { from: String, owner: String },
}

/// What a formation peer may do at a member's door: send (and stream), read, cancel.
pub const MEMBER_GRANTS: &[Op] = &[Op::Send, Op::Stream, Op::Get, Op::Cancel];

impl Caller {
    /// Whether the caller holds `needed` (an op's [`rpc::grant`]).
    pub fn may_call(&self, needed: Op) -> bool {
        match self {
            Caller::Public | Caller::Operator => true,
            Caller::Credential { scopes, .. } => {
                scopes.iter().any(|s| rpc::scope_grants(s, needed))
            }
            Caller::Member { .. } => MEMBER_GRANTS.contains(&needed),
        }
    }

    /// Whose tasks it may see: `None` is every task.
    pub fn viewer(&self) -> Option<&str> {
        match self {
            Caller::Public | Caller::Operator => None,
            Caller::Credential { name, .. } => Some(name),
            Caller::Member { owner, .. } => Some(owner),
        }
    }

    /// The owner recorded on tasks it starts.
    pub fn owner(&self) -> &str {
        match self {
            Caller::Public => "public",
            Caller::Operator => "operator",
            Caller::Credential { name, .. } => name,
            Caller::Member { owner, .. } => owner,
        }
    }
}

/// One authenticated door's key and realm, and, for a formation member, what verifies calls
/// from its peers.
pub struct DoorAuth {
    key: Key,
    realm: String,
    formation: Option<FormationDoor>,
}

/// A member's side of formation tokens: its door key, its formation, its name.
pub struct FormationDoor {
    pub key: Key,
    pub formation_id: String,
    pub member: String,
}

impl DoorAuth {
    pub fn new(realm: &str, formation: Option<FormationDoor>) -> Result<Self, String> {
        Ok(Self {
            key: Key::generate()?,
            realm: realm.to_string(),
            formation,
        })
    }

    /// The realm its `WWW-Authenticate` challenges name: the capsule's name.
    pub fn realm(&self) -> &str {
        &self.realm
    }

    /// A token for `credential` holding `scopes`.
    pub fn mint(&self, credential: &str, scopes: &[String]) -> Secret {
        token::mint(
            &self.key,
            token::DOOR,
            &json!({"credential": credential, "scopes": scopes}),
        )
    }

    /// The operator token: every door method.
    pub fn mint_operator(&self) -> Secret {
        let all: Vec<String> = rpc::operator_scopes()
            .iter()
            .map(|m| m.to_string())
            .collect();
        self.mint("operator", &all)
    }

    /// The caller a request's `Authorization` header proves, or the 401 that refuses it.
    pub fn check(&self, request: &Request) -> Result<Caller, Denied> {
        let mut values = request.header_values("authorization");
        let (Some(value), None) = (values.next(), values.next()) else {
            return Err(Denied::unauthenticated());
        };
        let token = std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim());
        let Some(token) = token else {
            return Err(Denied::unauthenticated());
        };
        if token.starts_with("mft1.") {
            return self.check_member(token);
        }
        let payload = token::verify(&self.key, token::DOOR, token);
        let caller = payload.as_ref().and_then(|p| {
            let name = p.get("credential")?.as_str()?;
            let scopes: Option<Vec<String>> = p
                .get("scopes")?
                .as_array()?
                .iter()
                .map(|s| s.as_str().map(str::to_string))
                .collect();
            Some(if name == "operator" {
                Caller::Operator
            } else {
                Caller::Credential {
                    name: name.to_string(),
                    scopes: scopes?,
                }
            })
        });
        caller.ok_or_else(Denied::unauthenticated)
    }

    /// A formation token: accepted only if it verifies with this member's door key, names this
    /// formation, and is addressed to this member. Anything else is 401, like any token that
    /// does not verify here — a genuine token for another member's door included: what a token
    /// that has not verified says about itself decides nothing, so a refusal never tells a
    /// forger which part it got right.
    fn check_member(&self, token: &str) -> Result<Caller, Denied> {
        let Some(door) = &self.formation else {
            return Err(Denied::unauthenticated());
        };
        let payload = token::verify(&door.key, token::FORMATION, token)
            .ok_or_else(Denied::unauthenticated)?;
        let names = |key: &str| {
            payload
                .get(key)
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        match (names("formation"), names("from"), names("to")) {
            (Some(formation), Some(from), Some(to))
                if formation == door.formation_id && to == door.member =>
            {
                Ok(Caller::Member {
                    owner: format!("member:{from}"),
                    from,
                })
            }
            _ => Err(Denied::unauthenticated()),
        }
    }
}

/// The HTTP answer to `denied` at the door of capsule `realm`: its status, `WWW-Authenticate`
/// (RFC 6750: the realm, and `insufficient_scope` on a 403), and the error as `body` frames it
/// (the binding's: a JSON-RPC error answering the request, or HTTP+JSON's status object).
pub fn refuse(realm: &str, denied: &Denied, body: impl FnOnce(&RpcError) -> Value) -> Response {
    let mut error = RpcError::new(denied.code(), denied.message.clone());
    error.reason = Some(match denied.status {
        401 => "UNAUTHENTICATED",
        _ => "PERMISSION_DENIED",
    });
    let mut response = Response::json(denied.status, &body(&error));
    let challenge = match denied.status {
        401 => format!("Bearer realm=\"{realm}\""),
        _ => format!("Bearer realm=\"{realm}\", error=\"insufficient_scope\""),
    };
    response.headers.push(("WWW-Authenticate", challenge));
    response
}

/// Why the door turned a request away before running it: 401, no valid token (whatever part of
/// it failed — the message never says which); 403, a valid token that does not reach this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    pub status: u16,
    pub message: String,
}

/// The JSON-RPC code a refusal's body carries. A2A assigns none to authentication (it leaves
/// that to HTTP); these sit in JSON-RPC's implementation-defined server range, outside the
/// -32001…-32009 A2A has taken, so no client mistakes them for an A2A error.
pub const UNAUTHENTICATED: i64 = -32030;
pub const PERMISSION_DENIED: i64 = -32031;

impl Denied {
    pub fn unauthenticated() -> Self {
        Self {
            status: 401,
            message: "unauthenticated: a valid bearer token is required (mur token prints one)"
                .into(),
        }
    }

    pub fn forbidden(message: String) -> Self {
        Self {
            status: 403,
            message,
        }
    }

    fn code(&self) -> i64 {
        match self.status {
            401 => UNAUTHENTICATED,
            _ => PERMISSION_DENIED,
        }
    }
}

/// The 403 for a valid token lacking `method`.
pub fn forbidden(method: &str) -> Denied {
    Denied::forbidden(format!(
        "forbidden: this token does not hold the scope {method}"
    ))
}
