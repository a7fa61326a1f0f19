//! Calling a capsule's door from the host tools: layer 3's card probe and JSON-RPC calls such as
//! `session/stop`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::a2a::card::session_id_from_card;
use crate::a2a::rpc::{
    self, EXTENDED_CARD, EXTENDED_CARD_V1, METHOD_NOT_FOUND, VERSION_NOT_SUPPORTED,
};
use crate::a2a::version::Generation;
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
/// public card. The extended card is asked by its A2A 0.3 name, then, when a door does not
/// answer that, by its 1.0 name with the 1.0 header (the original runtime's newer doors).
///
/// The one door probe: `mur ps`, `mur stop` and a formation's readiness check all ask it, so "this
/// door answers as that session" means one thing everywhere.
pub fn probe_session_id(url: &str, token: Option<&Secret>) -> Result<String, String> {
    let card = match token {
        Some(token) => {
            call_either(
                url,
                Some(token),
                [EXTENDED_CARD, EXTENDED_CARD_V1],
                json!({}),
                PROBE,
            )
            .map_err(|err| err.to_string())?
            .1
        }
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

/// Call `methods[0]`, and when the door does not answer it — method not found (-32601), or
/// version not supported (-32009: the original runtime's doors speak only 1.0 and check the
/// header before the method) — `methods[1]`: mur's name for something and the original
/// runtime's, so either kind of door answers. The answer comes with the name that got it.
pub fn call_either<'m>(
    url: &str,
    token: Option<&Secret>,
    methods: [&'m str; 2],
    params: Value,
    deadlines: Deadlines,
) -> Result<(&'m str, Value), CallError> {
    match call(url, token, methods[0], params.clone(), deadlines) {
        Err(CallError::Rpc {
            code: METHOD_NOT_FOUND | VERSION_NOT_SUPPORTED,
            ..
        }) => call(url, token, methods[1], params, deadlines).map(|v| (methods[1], v)),
        other => other.map(|v| (methods[0], v)),
    }
}

/// One JSON-RPC 2.0 call to the door at `url`, with `token` as its bearer token when given, and
/// the `A2A-Version` header of the method's generation (mur's own `session/stop` goes as 0.3,
/// `murmur.StopSession` as 1.0: the original runtime's doors serve only 1.0, and only with the
/// header).
pub fn call(
    url: &str,
    token: Option<&Secret>,
    method: &str,
    params: Value,
    deadlines: Deadlines,
) -> Result<Value, CallError> {
    let (addr, body) = rpc_body(url, method, params)?;
    let response = with_request(token, method, &body, |request| {
        client::send(addr, request, deadlines)
    })?;
    result_of(addr, method, &response)
}

/// A streaming JSON-RPC call (`message/stream`): each event's `result` goes to `on_result` as it
/// arrives, until the stream ends. An error answered before the stream opened, or as one of its
/// events, is the `Err`.
pub fn call_streaming(
    url: &str,
    token: Option<&Secret>,
    method: &str,
    params: Value,
    deadlines: Deadlines,
    on_result: &mut dyn FnMut(Value),
) -> Result<(), CallError> {
    let (addr, body) = rpc_body(url, method, params)?;
    let answer = with_request(token, method, &body, |request| {
        client::send_streaming(addr, request, deadlines)
    })?;
    let mut events = match answer {
        client::Answer::Whole(response) => return result_of(addr, method, &response).map(drop),
        client::Answer::Events(events) => events,
    };
    while let Some(data) = events.next_event().map_err(CallError::Transport)? {
        let event = client::Response {
            status: events.status,
            body: data.into_bytes(),
        };
        on_result(result_of(addr, method, &event)?);
    }
    Ok(())
}

/// The door's address and a JSON-RPC request body for `method`.
fn rpc_body(
    url: &str,
    method: &str,
    params: Value,
) -> Result<(std::net::SocketAddr, String), CallError> {
    let addr = client::parse_door_addr(url).map_err(CallError::Transport)?;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    Ok((addr, body))
}

/// Run `send` with the POST of `body`, its headers set: JSON, the method's `A2A-Version`, and the
/// bearer `token` when given.
fn with_request<T>(
    token: Option<&Secret>,
    method: &str,
    body: &str,
    send: impl FnOnce(&Request) -> Result<T, String>,
) -> Result<T, CallError> {
    let authorization;
    let version = rpc::method(method).map_or(Generation::V0_3, |m| m.generation);
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("A2A-Version", version.header()),
    ];
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
    send(&request).map_err(CallError::Transport)
}

/// The `result` of one JSON-RPC answer, or its error.
fn result_of(
    addr: std::net::SocketAddr,
    method: &str,
    response: &client::Response,
) -> Result<Value, CallError> {
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
