//! Calling a capsule's door from the host tools: layer 3's card probe and JSON-RPC calls such as
//! `session/stop`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::json::card::session_id_from_card;
use crate::json::rpc::{EXTENDED_CARD, EXTENDED_CARD_V1, METHOD_NOT_FOUND};
use crate::net::client::{self, Deadlines, Request};
use crate::secret::Secret;

/// The probe's deadlines: long enough for a loopback accept, and for a capsule mid-turn to answer
/// a card request; short enough that a silent door is reported rather than waited on.
pub const PROBE: Deadlines = Deadlines {
    connect: Duration::from_secs(2),
    response: Duration::from_secs(5),
};

/// Why a JSON-RPC call got no result.
#[derive(Debug)]
pub enum CallError {
    /// The door answered with a JSON-RPC error object.
    Rpc { code: i64, message: String },
    /// No usable answer: connection, HTTP status, or a body that is not JSON-RPC.
    Transport(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Rpc { code, message } => write!(f, "the door answered error {code}: {message}"),
            Self::Transport(why) => f.write_str(why),
        }
    }
}

/// Layer 3: the session id the door at `url` names on its agent card — the extended card read
/// with `token` when there is one (an authenticated door names its session only there), else the
/// public card. The extended card is asked by its A2A 0.3 name, then, when a door answers
/// method-not-found, by its 1.0 name (the original runtime's newer doors).
///
/// The one door probe: `mur ps`, `mur stop` and a formation's readiness check all ask it, so "this
/// door answers as that session" means one thing everywhere.
pub fn probe_session_id(url: &str, token: Option<&Secret>) -> Result<String, String> {
    let card = match token {
        Some(token) => match call(url, Some(token), EXTENDED_CARD, json!({}), PROBE) {
            Err(CallError::Rpc {
                code: METHOD_NOT_FOUND,
                ..
            }) => call(url, Some(token), EXTENDED_CARD_V1, json!({}), PROBE),
            other => other,
        }
        .map_err(|err| err.to_string())?,
        None => {
            let addr = client::parse_door_addr(url)?;
            let request = Request {
                method: "GET",
                path: "/.well-known/agent-card.json",
                headers: &[("Accept", "application/json")],
                body: None,
            };
            let response = client::send(addr, &request, PROBE)?;
            if response.status != 200 {
                return Err(format!(
                    "{addr}: the agent card answered HTTP {}",
                    response.status
                ));
            }
            crate::json::strict::from_slice(&response.body)
                .map_err(|_| format!("{addr}: the agent card is not JSON"))?
        }
    };
    session_id_from_card(&card)
        .map(str::to_string)
        .ok_or_else(|| format!("the agent card at {url} names no session"))
}

/// One JSON-RPC 2.0 call to the door at `url`, with `token` as its bearer token when given.
pub fn call(
    url: &str,
    token: Option<&Secret>,
    method: &str,
    params: Value,
    deadlines: Deadlines,
) -> Result<Value, CallError> {
    let addr = client::parse_door_addr(url).map_err(CallError::Transport)?;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let authorization;
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(token) = token {
        // A token holds only base64url characters and dots; anything else would let a corrupt
        // record write arbitrary header lines.
        if !token.expose().bytes().all(|b| b.is_ascii_graphic()) {
            return Err(CallError::Transport(
                "the record's door token is malformed".into(),
            ));
        }
        authorization = format!("Bearer {}", token.expose());
        headers.push(("Authorization", authorization.as_str()));
    }
    let request = Request {
        method: "POST",
        path: "/",
        headers: &headers,
        body: Some(body.as_bytes()),
    };
    let response = client::send(addr, &request, deadlines).map_err(CallError::Transport)?;
    if response.status != 200 {
        return Err(CallError::Transport(format!(
            "{addr}: {method} answered HTTP {}",
            response.status
        )));
    }
    let mut answer: Value = crate::json::strict::from_slice(&response.body)
        .map_err(|_| CallError::Transport(format!("{addr}: {method}: the answer is not JSON")))?;
    if let Some(result) = answer.get_mut("result") {
        return Ok(result.take());
    }
    let error = answer.get("error");
    match error.and_then(|e| e.get("code")).and_then(Value::as_i64) {
        Some(code) => Err(CallError::Rpc {
            code,
            message: error
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .chars()
                .take(200)
                .collect(),
        }),
        None => Err(CallError::Transport(format!(
            "{addr}: {method}: the answer is not JSON-RPC"
        ))),
    }
}
