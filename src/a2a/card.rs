//! The agent card: what the door publishes, and the part of it the host tools read.

use serde_json::{Value, json};

use super::version::Generation;

/// The capsule extension's `uri`: the original runtime's, so its door probe and ours recognise
/// each other's doors.
pub const CAPSULE_EXTENSION_URI: &str =
    "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1";

/// The door extension's `uri`: the original runtime's answers to its own session methods echo it
/// in an `A2A-Extensions` header, and its host tools read them as its doors' answers.
pub const DOOR_EXTENSION_URI: &str =
    "https://docs.murmur.nexus/reference/agent-card/#murmur-door-v1";

/// The stream extension's `uri`: the original runtime carries each murmur frame of a stream
/// (`connection-ack`, `text`, `capsule-closed`, ...) as the object under this key of an event's
/// `metadata`, and its `mur watch` reads frames only there.
pub const STREAM_EXTENSION_URI: &str =
    "https://docs.murmur.nexus/reference/streaming-protocol/#murmur-stream-v1";

/// What a card says about one door.
#[derive(Debug, Clone, Copy)]
pub struct CardFacts<'a> {
    pub name: &'a str,
    pub version: &'a str,
    /// `host:port`.
    pub addr: &'a str,
    /// The URL the card advertises instead of `http://addr/` (`--advertise-url`): the door as
    /// clients reach it through NAT, a port mapping or a Kubernetes Service.
    pub advertised: Option<&'a str>,
    /// Adds the capsule extension naming the session.
    pub session: Option<&'a str>,
    /// The door wants a bearer token: declares the scheme and the extended card.
    pub bearer: bool,
}

/// Which generation a card is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardFor {
    /// The public well-known card: one card every client of either generation reads (DESIGN
    /// §5), so a client that fetches it before it knows which generation the door speaks finds
    /// its own members.
    Both,
    /// The answer to a request that named its generation (`GetExtendedAgentCard` under 1.0,
    /// `agent/getAuthenticatedExtendedCard` under 0.3): that generation's members only, so a
    /// validator of that schema finds nothing foreign.
    Only(Generation),
}

/// An agent card (a2a-1.0.md §6–7).
///
/// The 1.0 members: `supportedInterfaces` naming the one URL for JSON-RPC 1.0 first, then 0.3,
/// then HTTP+JSON of each (its paths under the same URL: `crate::a2a::rest`),
/// `capabilities.extendedAgentCard`, a bearer scheme as `httpAuthSecurityScheme` with
/// `securityRequirements`. The 0.3 members: the top-level `url`, `preferredTransport` and
/// `protocolVersion` that 0.3 clients find their endpoint by, `additionalInterfaces` naming
/// JSON-RPC and HTTP+JSON at it, a bearer scheme as `type` and
/// `scheme` with `security`, and `supportsAuthenticatedExtendedCard`. [`CardFor::Both`] carries
/// both sets (each scheme entry in both shapes); [`CardFor::Only`] one set, nothing else.
///
/// An authenticated door's public card is built with `bearer` and no `session`, its extended
/// card with both.
pub fn agent_card(facts: &CardFacts, written_for: CardFor) -> Value {
    let CardFacts { name, version, .. } = *facts;
    let url = facts
        .advertised
        .map_or_else(|| format!("http://{}/", facts.addr), str::to_string);
    let extensions: Vec<Value> = facts
        .session
        .map(|id| json!({"uri": CAPSULE_EXTENSION_URI, "params": {"sessionId": id}}))
        .into_iter()
        .collect();
    let mut card = json!({
        "name": name,
        "description": format!("mur capsule {name}@{version}"),
        "version": version,
        "capabilities": {
            "streaming": true,
            "pushNotifications": false,
            "extensions": extensions,
        },
        // Text, JSON data, and files of any type: every part reaches the handler.
        "defaultInputModes": ["text/plain", "application/json", "*/*"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [{
            "id": "task",
            "name": "task",
            "description": format!("Run one task with {name}"),
            "tags": ["task"],
        }],
    });
    let (v1, v03) = match written_for {
        CardFor::Both => (true, true),
        CardFor::Only(generation) => (
            generation == Generation::V1_0,
            generation == Generation::V0_3,
        ),
    };
    if v1 {
        add_1_0(&mut card, &url, facts.bearer);
    }
    if v03 {
        add_0_3(&mut card, &url, facts.bearer);
    }
    card
}

/// 1.0's own members: the interfaces (JSON-RPC 1.0 first, as a client that takes the first it
/// speaks finds the door's first binding; then 0.3; then HTTP+JSON of each, all at the same
/// URL), the extended card capability, and a bearer scheme in 1.0's shape.
fn add_1_0(card: &mut Value, url: &str, bearer: bool) {
    card["supportedInterfaces"] = json!([
        {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
    ]);
    card["capabilities"]["extendedAgentCard"] = Value::Bool(bearer);
    if bearer {
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"] = json!({"scheme": "Bearer"});
        card["securityRequirements"] = json!([{"schemes": {"bearer": {"list": []}}}]);
    }
}

/// 0.3's own members: where its endpoint is, the transports there (JSON-RPC preferred, and
/// HTTP+JSON, whose 0.3 paths start `/v1`), and a bearer scheme in 0.3's shape.
fn add_0_3(card: &mut Value, url: &str, bearer: bool) {
    card["url"] = json!(url);
    card["preferredTransport"] = json!("JSONRPC");
    card["additionalInterfaces"] = json!([
        {"url": url, "transport": "JSONRPC"},
        {"url": url, "transport": "HTTP+JSON"},
    ]);
    card["protocolVersion"] = json!("0.3.0");
    if bearer {
        card["securitySchemes"]["bearer"]["type"] = json!("http");
        card["securitySchemes"]["bearer"]["scheme"] = json!("Bearer");
        card["security"] = json!([{"bearer": []}]);
        card["supportsAuthenticatedExtendedCard"] = Value::Bool(true);
    }
}

/// The session a card names: `params.sessionId` of its capsule extension in
/// `capabilities.extensions`. `None` for a card with no such extension (a public card of an
/// authenticated door, or a door that is not a capsule's).
pub fn session_id_from_card(card: &Value) -> Option<&str> {
    card.get("capabilities")?
        .get("extensions")?
        .as_array()?
        .iter()
        .find(|ext| ext.get("uri").and_then(Value::as_str) == Some(CAPSULE_EXTENSION_URI))?
        .get("params")?
        .get("sessionId")?
        .as_str()
}

#[cfg(test)]
mod tests;
