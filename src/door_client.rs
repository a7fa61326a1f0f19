//! Calling a capsule's door from the host tools: layer 3's card probe and JSON-RPC calls such as
//! `session/stop`.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};

use crate::a2a::card::session_id_from_card;
use crate::a2a::rpc::{
    self, EXTENDED_CARD, EXTENDED_CARD_V1, METHOD_NOT_FOUND, VERSION_NOT_SUPPORTED,
};
use crate::a2a::version::Generation;
use crate::net::client::{self, Deadlines, Request};
use crate::net::multi::{self, Exchange};
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

/// Layer 3 for one door: the session id the door at `url` names on its agent card ([`Probe`]),
/// or why there is none.
///
/// The one door probe: `mur ps`, `mur stop` and a formation's readiness check all ask it (this,
/// or a [`Probe`] each on one event loop for many doors at once), so "this door answers as that
/// session" means one thing everywhere.
pub fn probe_session_id(url: &str, token: Option<&Secret>) -> Result<String, String> {
    let mut probe = Probe::new(url, token);
    multi::run(1, PROBE, |_, answer| probe.step(answer));
    probe.said()
}

/// The extended card's two names, asked in this order.
const EXTENDED_CARDS: [&str; 2] = [EXTENDED_CARD, EXTENDED_CARD_V1];

/// Layer 3 as a conversation with the door at `url` ([`multi::run`] drives it, within
/// [`PROBE`]): the session id it names on its agent card — the extended card read with `token`
/// when there is one (an authenticated door names its session only there), else the public card.
/// The extended card is asked by its A2A 0.3 name, then, when the door does not answer that
/// (method not found, or version not supported), by its 1.0 name with the 1.0 header (the
/// original runtime's newer doors): one exchange, or two.
pub struct Probe<'a> {
    url: &'a str,
    token: Option<&'a Secret>,
    /// Requests made so far.
    asked: usize,
    /// What the door said once the probe is done: the session its card names, or why none.
    said: Result<String, String>,
}

/// What a probe does after an answer.
enum ProbeStep {
    Ask(Exchange),
    Card(Value),
}

impl<'a> Probe<'a> {
    pub fn new(url: &'a str, token: Option<&'a Secret>) -> Self {
        Self {
            url,
            token,
            asked: 0,
            said: Err("the probe could not run".into()),
        }
    }

    /// What the door said: the session id its card names, or why there is none (the probe never
    /// ran, if it has not been stepped to its end).
    pub fn said(self) -> Result<String, String> {
        self.said
    }

    /// The probe's next exchange, given the answer to its last (`None`: it has asked nothing
    /// yet); `None` once it is done, and [`Probe::said`] has its outcome.
    pub fn step(&mut self, answer: Option<multi::Answer>) -> Option<Exchange> {
        let next = client::parse_door_addr(self.url).and_then(|addr| match answer {
            None => self.ask(addr).map(ProbeStep::Ask),
            Some(answer) => self.read(addr, answer),
        });
        match next {
            Ok(ProbeStep::Ask(exchange)) => {
                self.asked += 1;
                return Some(exchange);
            }
            Ok(ProbeStep::Card(card)) => {
                self.said = session_id_from_card(&card)
                    .map(str::to_string)
                    .ok_or_else(|| format!("the agent card at {} names no session", self.url));
            }
            Err(why) => self.said = Err(why),
        }
        None
    }

    /// The probe's next request: the public card, or the extended card by its next name.
    fn ask(&self, addr: SocketAddr) -> Result<Exchange, String> {
        let request = match self.token {
            None => Request {
                method: "GET",
                path: "/.well-known/agent-card.json",
                headers: &[("Accept", "application/json")],
                body: None,
            }
            .encode(addr),
            Some(token) => {
                let method = EXTENDED_CARDS[self.asked];
                let body = envelope(method, json!({}));
                with_request(Some(token), method, &body, |request| {
                    Ok(request.encode(addr))
                })
                .map_err(|err| err.to_string())?
            }
        };
        Ok(Exchange { addr, request })
    }

    /// What the answer to the last request says: the card, or — the extended card's 0.3 name
    /// refused — ask again by its 1.0 name.
    fn read(&self, addr: SocketAddr, answer: multi::Answer) -> Result<ProbeStep, String> {
        let response = answer?;
        if self.token.is_none() {
            if response.status != 200 {
                return Err(format!(
                    "{addr}: the agent card answered HTTP {}",
                    response.status
                ));
            }
            return crate::json::strict::from_slice(&response.body)
                .map(ProbeStep::Card)
                .map_err(|_| format!("{addr}: the agent card is not JSON"));
        }
        match result_of(addr, EXTENDED_CARDS[self.asked - 1], &response) {
            Err(err) if self.asked == 1 && falls_back(&err) => self.ask(addr).map(ProbeStep::Ask),
            result => result.map(ProbeStep::Card).map_err(|err| err.to_string()),
        }
    }
}

/// Whether a door that refused a method should be asked by its other name: method not found
/// (-32601), or version not supported (-32009: the original runtime's doors speak only 1.0 and
/// check the header before the method).
fn falls_back(err: &CallError) -> bool {
    matches!(
        err,
        CallError::Rpc {
            code: METHOD_NOT_FOUND | VERSION_NOT_SUPPORTED,
            ..
        }
    )
}

/// Call `methods[0]`, and when the door does not answer it (method not found, or version not
/// supported: as the probe falls back) `methods[1]`: mur's name for something and the original
/// runtime's, so either kind of door answers. The answer comes with the name that got it.
pub fn call_either<'m>(
    url: &str,
    token: Option<&Secret>,
    methods: [&'m str; 2],
    params: Value,
    deadlines: Deadlines,
) -> Result<(&'m str, Value), CallError> {
    match call(url, token, methods[0], params.clone(), deadlines) {
        Err(err) if falls_back(&err) => {
            call(url, token, methods[1], params, deadlines).map(|v| (methods[1], v))
        }
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
    let request = with_request(token, method, &body, |request| Ok(request.encode(addr)))?;
    let response =
        multi::one(Exchange { addr, request }, deadlines).map_err(CallError::Transport)?;
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
        client::Incoming::Whole(response) => return result_of(addr, method, &response).map(drop),
        client::Incoming::Events(events) => events,
    };
    while let Some(data) = events.next_event().map_err(CallError::Transport)? {
        let event = client::WholeResponse {
            status: events.status,
            body: data.into_bytes(),
        };
        on_result(result_of(addr, method, &event)?);
    }
    Ok(())
}

/// The door's address and a JSON-RPC request body for `method`.
fn rpc_body(url: &str, method: &str, params: Value) -> Result<(SocketAddr, String), CallError> {
    let addr = client::parse_door_addr(url).map_err(CallError::Transport)?;
    Ok((addr, envelope(method, params)))
}

/// One plain HTTP request with `token` as its bearer token to the door at `url`, outside
/// JSON-RPC (the control plane's routes), with `body` as (content type, bytes): its status and
/// body, whatever the status. (The original runtime's doors answer 415 to a setting not sent as
/// `application/json`.)
pub fn http(
    url: &str,
    method: &str,
    path: &str,
    token: &Secret,
    body: Option<(&str, &[u8])>,
    deadlines: Deadlines,
) -> Result<client::WholeResponse, String> {
    let addr = client::parse_door_addr(url)?;
    // As for a door token: a corrupt file must not write header lines of its own.
    if !token.expose().bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the token is malformed".into());
    }
    let authorization = format!("Bearer {}", token.expose());
    let mut headers = vec![("Authorization", authorization.as_str())];
    if let Some((content_type, _)) = body {
        headers.push(("Content-Type", content_type));
    }
    let request = Request {
        method,
        path,
        headers: &headers,
        body: body.map(|(_, bytes)| bytes),
    }
    .encode(addr);
    multi::one(Exchange { addr, request }, deadlines)
}

/// A JSON-RPC request body for `method`.
fn envelope(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string()
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
    addr: SocketAddr,
    method: &str,
    response: &client::WholeResponse,
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
                // A foreign door's words, shown on a terminal: no control character gets through.
                .map(|c| if c.is_control() { '\u{fffd}' } else { c })
                .collect(),
        }),
        None => Err(CallError::Transport(format!(
            "{addr}: {method}: the answer is not JSON-RPC"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::{Arc, Mutex};

    /// What a test door saw of one request: its JSON-RPC method (or `GET`), `A2A-Version` and
    /// `Authorization` headers.
    type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

    /// A door on 127.0.0.1 answering each request with `answer(method, version)`: a status and a
    /// body.
    fn door(answer: fn(&str, &str) -> (u16, String)) -> (String, Seen) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = listener.local_addr().unwrap().to_string();
        let seen: Seen = Arc::default();
        let log = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                serve(conn, answer, &log);
            }
        });
        (url, seen)
    }

    /// Read one request, note it in `log`, then answer it.
    fn serve(mut conn: TcpStream, answer: fn(&str, &str) -> (u16, String), log: &Seen) {
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        let request = loop {
            let n = conn.read(&mut chunk).unwrap_or(0);
            got.extend_from_slice(&chunk[..n]);
            let mut headers = [httparse::EMPTY_HEADER; 16];
            let mut parsed = httparse::Request::new(&mut headers);
            if let Ok(httparse::Status::Complete(len)) = parsed.parse(&got) {
                let header = |name: &str| {
                    parsed
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case(name))
                        .map_or(String::new(), |h| {
                            String::from_utf8_lossy(h.value).into_owned()
                        })
                };
                let length: usize = header("content-length").parse().unwrap_or(0);
                if got.len() >= len + length || n == 0 {
                    let body: Value = serde_json::from_slice(&got[len..]).unwrap_or(Value::Null);
                    let method = body["method"].as_str().unwrap_or("GET").to_string();
                    break (method, header("a2a-version"), header("authorization"));
                }
            }
            if n == 0 {
                break Default::default();
            }
        };
        let (status, body) = answer(&request.0, &request.1);
        log.lock().unwrap().push(request);
        let response = format!(
            "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let _ = conn.write_all(response.as_bytes());
    }

    const SESSION: &str = "ses_0199c4e2f1b7712a9d3e4f5061728390";

    /// A probe of each door, all at once on one event loop, as `mur ps` runs them; what each said.
    fn probe_session_ids(doors: &[(&str, Option<&Secret>)]) -> Vec<Result<String, String>> {
        let mut probes: Vec<Probe> = doors
            .iter()
            .map(|&(url, token)| Probe::new(url, token))
            .collect();
        multi::run(probes.len(), PROBE, |i, answer| probes[i].step(answer));
        probes.into_iter().map(Probe::said).collect()
    }

    fn card_result() -> String {
        json!({"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {"extensions": [
            {"uri": crate::a2a::card::CAPSULE_EXTENSION_URI, "params": {"sessionId": SESSION}}]}}})
        .to_string()
    }

    fn rpc_error(code: i64) -> String {
        json!({"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": "no"}}).to_string()
    }

    fn token() -> Secret {
        Secret::new("mdt1.operator.mac".into())
    }

    #[test]
    fn the_extended_card_is_asked_by_its_1_0_name_when_the_0_3_one_is_not_answered() {
        // A door of the original runtime: 1.0 only, the header checked before the method.
        let (v1_only, v1_seen) = door(|_, version| match version {
            "1.0" => (200, card_result()),
            _ => (200, rpc_error(-32009)),
        });
        // A door that knows no 0.3 name.
        let (renamed, renamed_seen) = door(|method, _| match method {
            "GetExtendedAgentCard" => (200, card_result()),
            _ => (200, rpc_error(-32601)),
        });
        let token = token();
        let said = probe_session_ids(&[(&v1_only, Some(&token)), (&renamed, Some(&token))]);
        assert_eq!(said, [Ok(SESSION.to_string()), Ok(SESSION.to_string())]);
        for seen in [v1_seen, renamed_seen] {
            let seen = seen.lock().unwrap().clone();
            let bearer = "Bearer mdt1.operator.mac".to_string();
            assert_eq!(
                seen,
                [
                    (EXTENDED_CARD.into(), "0.3".into(), bearer.clone()),
                    (EXTENDED_CARD_V1.into(), "1.0".into(), bearer)
                ]
            );
        }
    }

    #[test]
    fn any_other_refusal_is_the_answer_and_a_second_name_refused_ends_the_probe() {
        let (invalid, invalid_seen) = door(|_, _| (200, rpc_error(-32602)));
        let (neither, neither_seen) = door(|_, _| (200, rpc_error(-32601)));
        let (public, _) = door(|_, _| (200, card_result()));
        let token = token();
        let said = probe_session_ids(&[
            (&invalid, Some(&token)),
            (&neither, Some(&token)),
            (&public, None),
        ]);
        assert_eq!(said[0], Err("the door answered error -32602: no".into()));
        assert_eq!(invalid_seen.lock().unwrap().len(), 1, "no second name");
        assert_eq!(said[1], Err("the door answered error -32601: no".into()));
        assert_eq!(neither_seen.lock().unwrap().len(), 2, "no third request");
        assert_eq!(
            said[2],
            Err(format!("the agent card at {public} names no session")),
            "a JSON-RPC envelope is not a card"
        );
    }

    #[test]
    fn a_doors_error_message_reaches_us_without_its_control_characters() {
        let (ansi, _) = door(|_, _| {
            let error = json!({"code": -32602, "message": "red \u{1b}[31m\nline"});
            (
                200,
                json!({"jsonrpc": "2.0", "id": 1, "error": error}).to_string(),
            )
        });
        let said = probe_session_ids(&[(&ansi, Some(&token()))]);
        assert_eq!(
            said[0],
            Err("the door answered error -32602: red \u{fffd}[31m\u{fffd}line".into())
        );
    }

    #[test]
    fn a_public_card_must_be_strict_json_served_200() {
        let (missing, _) = door(|_, _| (404, "{}".into()));
        let (twice, _) = door(|_, _| (200, r#"{"capabilities": {}, "capabilities": {}}"#.into()));
        let (fine, seen) = door(|_, _| {
            let card = serde_json::from_str::<Value>(&card_result()).unwrap();
            (200, card["result"].to_string())
        });
        let said = probe_session_ids(&[
            (&missing, None),
            (&twice, None),
            (&fine, None),
            ("nowhere", None),
        ]);
        assert_eq!(
            said[0],
            Err(format!("{missing}: the agent card answered HTTP 404"))
        );
        assert_eq!(said[1], Err(format!("{twice}: the agent card is not JSON")));
        assert_eq!(said[2], Ok(SESSION.to_string()));
        assert!(
            said[3]
                .as_ref()
                .unwrap_err()
                .contains("is not a door address")
        );
        assert_eq!(seen.lock().unwrap()[0].0, "GET");
        assert_eq!(seen.lock().unwrap()[0].2, "", "no token for a public card");
    }

    #[test]
    fn no_error_carries_the_token() {
        let (garbage, _) = door(|_, _| (200, "not json".into()));
        let (refusing, _) = door(|_, _| (401, String::new()));
        let closed = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .to_string();
        let token = token();
        let bad = Secret::new("mdt1.operator\r\nX-Injected: 1".into());
        let said = probe_session_ids(&[
            (&garbage, Some(&token)),
            (&refusing, Some(&token)),
            (&closed, Some(&token)),
            (&garbage, Some(&bad)),
        ]);
        for why in said {
            let why = why.unwrap_err();
            assert!(
                !why.contains("operator") && !why.contains("Bearer"),
                "{why}"
            );
        }
    }
}
