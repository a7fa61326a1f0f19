//! Door authentication: `mdt1` bearer tokens MACed with a key this session drew at start and
//! never wrote anywhere.
//!
//! Scopes are method names. The operator token holds every method; each credential the manifest
//! declares gets one token with exactly its scopes. Checks run header → MAC (constant time) →
//! payload, and a refusal never says which failed: 401 with `WWW-Authenticate` for anything that
//! is not a valid token, 403 for a valid one lacking the method.

use serde_json::json;

use crate::json::manifest::DOOR_METHODS;
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
}

impl Caller {
    pub fn may_call(&self, method: &str) -> bool {
        match self {
            Caller::Public | Caller::Operator => true,
            Caller::Credential { scopes, .. } => scopes.iter().any(|s| s == method),
        }
    }

    /// Whose tasks it may see: `None` is every task.
    pub fn viewer(&self) -> Option<&str> {
        match self {
            Caller::Public | Caller::Operator => None,
            Caller::Credential { name, .. } => Some(name),
        }
    }

    /// The owner recorded on tasks it starts.
    pub fn owner(&self) -> &str {
        match self {
            Caller::Public => "public",
            Caller::Operator => "operator",
            Caller::Credential { name, .. } => name,
        }
    }
}

/// One authenticated door's key and realm.
pub struct DoorAuth {
    key: Key,
    realm: String,
}

impl DoorAuth {
    pub fn new(realm: &str) -> Result<Self, String> {
        Ok(Self {
            key: Key::generate()?,
            realm: realm.to_string(),
        })
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
        let all: Vec<String> = DOOR_METHODS.iter().map(|m| m.to_string()).collect();
        self.mint("operator", &all)
    }

    /// The caller a request's `Authorization` header proves, or the 401 that refuses it.
    pub fn check(&self, request: &Request) -> Result<Caller, Response> {
        let mut values = request.header_values("authorization");
        let (Some(value), None) = (values.next(), values.next()) else {
            return Err(self.unauthorized());
        };
        let token = std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim());
        let payload = token.and_then(|t| token::verify(&self.key, token::DOOR, t));
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
        caller.ok_or_else(|| self.unauthorized())
    }

    pub fn unauthorized(&self) -> Response {
        let mut response = Response::json(
            401,
            &json!({"error": "a valid bearer token is required (mur token prints one)"}),
        );
        response.headers.push((
            "WWW-Authenticate",
            format!("Bearer realm=\"{}\"", self.realm),
        ));
        response
    }
}

/// The 403 for a valid token lacking `method`.
pub fn forbidden(method: &str) -> Response {
    Response::json(
        403,
        &json!({"error": format!("this token does not hold the scope {method}")}),
    )
}
