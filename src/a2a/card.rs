//! The agent card: what the door publishes, and the part of it the host tools read.

use serde_json::{Value, json};

/// The capsule extension's `uri`: the original runtime's, so its door probe and ours recognise
/// each other's doors.
pub const CAPSULE_EXTENSION_URI: &str =
    "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1";

/// What a card says about one door.
#[derive(Debug, Clone, Copy)]
pub struct CardFacts<'a> {
    pub name: &'a str,
    pub version: &'a str,
    /// `host:port`.
    pub addr: &'a str,
    /// Adds the capsule extension naming the session.
    pub session: Option<&'a str>,
    /// The door wants a bearer token: declares the scheme and the extended card.
    pub bearer: bool,
}

/// One agent card for both generations (a2a-1.0.md §6–7): the 1.0 members, with
/// `supportedInterfaces` naming the one URL for 1.0 first and then 0.3, and the 0.3 top-level
/// members (`url`, `preferredTransport`, `protocolVersion`) that 0.3 clients find their endpoint
/// by. A bearer scheme is written in both shapes (`httpAuthSecurityScheme` for 1.0, `type` and
/// `scheme` for 0.3), with both `security` and `securityRequirements`.
///
/// An authenticated door's public card is built with `bearer` and no `session`, its extended
/// card with both.
pub fn agent_card(facts: &CardFacts) -> Value {
    let CardFacts { name, version, .. } = *facts;
    let url = format!("http://{}/", facts.addr);
    let extensions: Vec<Value> = facts
        .session
        .map(|id| json!({"uri": CAPSULE_EXTENSION_URI, "params": {"sessionId": id}}))
        .into_iter()
        .collect();
    let mut card = json!({
        "name": name,
        "description": format!("mur capsule {name}@{version}"),
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ],
        "url": url,
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3.0",
        "version": version,
        "capabilities": {
            "streaming": true,
            "pushNotifications": false,
            "extendedAgentCard": facts.bearer,
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
    if facts.bearer {
        card["securitySchemes"] = json!({"bearer": {
            "httpAuthSecurityScheme": {"scheme": "Bearer"},
            "type": "http",
            "scheme": "Bearer",
        }});
        card["security"] = json!([{"bearer": []}]);
        card["securityRequirements"] = json!([{"schemes": {"bearer": {"list": []}}}]);
        card["supportsAuthenticatedExtendedCard"] = Value::Bool(true);
    }
    card
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
mod tests {
    use super::*;

    #[test]
    fn a_built_card_names_its_session_and_both_interfaces() {
        let facts = CardFacts {
            name: "echo",
            version: "0.1.0",
            addr: "127.0.0.1:5",
            session: Some("ses_x"),
            bearer: false,
        };
        let card = agent_card(&facts);
        assert_eq!(session_id_from_card(&card), Some("ses_x"));
        assert!(card.get("securitySchemes").is_none());
        assert_eq!(card["capabilities"]["extendedAgentCard"], false);
        let public = agent_card(&CardFacts {
            session: None,
            bearer: true,
            ..facts
        });
        assert_eq!(session_id_from_card(&public), None);
        assert_eq!(public["supportsAuthenticatedExtendedCard"], true);
        assert_eq!(public["capabilities"]["extendedAgentCard"], true);
        let bearer = &public["securitySchemes"]["bearer"];
        assert_eq!(bearer["scheme"], "Bearer");
        assert_eq!(bearer["type"], "http");
        assert_eq!(bearer["httpAuthSecurityScheme"]["scheme"], "Bearer");
        assert_eq!(
            public["securityRequirements"][0]["schemes"]["bearer"],
            json!({"list": []})
        );
        assert_eq!(public["security"], json!([{"bearer": []}]));
        assert_eq!(card["url"], "http://127.0.0.1:5/");
        assert_eq!(card["protocolVersion"], "0.3.0");
        let versions: Vec<&Value> = card["supportedInterfaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| &i["protocolVersion"])
            .collect();
        assert_eq!(versions, [&json!("1.0"), &json!("0.3")]);
        assert_eq!(card["supportedInterfaces"][1]["url"], card["url"]);
        assert_eq!(card["capabilities"]["streaming"], true);
    }

    #[test]
    fn the_session_is_read_from_the_capsule_extension_only() {
        let card = json!({"capabilities": {"extensions": [
            {"uri": "https://example.com/other", "params": {"sessionId": "ses_wrong"}},
            {"uri": CAPSULE_EXTENSION_URI, "params": {"sessionId": "ses_right"}},
        ]}});
        assert_eq!(session_id_from_card(&card), Some("ses_right"));
        for card in [
            json!({}),
            json!({"capabilities": {}}),
            json!({"capabilities": {"extensions": {}}}),
            json!({"capabilities": {"extensions": [{"uri": CAPSULE_EXTENSION_URI}]}}),
            json!({"capabilities": {"extensions": [
                {"uri": CAPSULE_EXTENSION_URI, "params": {"sessionId": 7}}]}}),
        ] {
            assert_eq!(session_id_from_card(&card), None, "{card}");
        }
    }
}
