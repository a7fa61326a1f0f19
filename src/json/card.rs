//! The parts of an A2A agent card the host tools read.

use serde_json::Value;

/// The capsule extension's `uri`: the original runtime's, so its door probe and ours recognise
/// each other's doors.
pub const CAPSULE_EXTENSION_URI: &str =
    "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1";

/// An A2A 0.3.0 agent card: `url` is `http://host:port/`, one `task` skill, JSON-RPC as the one
/// transport (also in `supportedInterfaces`, which 1.x SDK clients choose their 0.3 transport
/// from).
///
/// `session` adds the capsule extension naming the session; `bearer` declares the door's http
/// bearer scheme and its extended card. An authenticated door's public card is built with
/// `bearer` and no `session`, its extended card with both.
pub fn agent_card(
    name: &str,
    version: &str,
    addr: &str,
    session: Option<&str>,
    bearer: bool,
) -> Value {
    let url = format!("http://{addr}/");
    let extensions: Vec<Value> = session
        .map(|id| serde_json::json!({"uri": CAPSULE_EXTENSION_URI, "params": {"sessionId": id}}))
        .into_iter()
        .collect();
    let mut card = serde_json::json!({
        "protocolVersion": "0.3.0",
        "name": name,
        "description": format!("mur capsule {name}@{version}"),
        "url": url,
        "preferredTransport": "JSONRPC",
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3.0"}],
        "version": version,
        "capabilities": {"streaming": false, "pushNotifications": false, "extensions": extensions},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{
            "id": "task",
            "name": "task",
            "description": format!("Run one task with {name}"),
            "tags": ["task"],
        }],
    });
    if bearer {
        card["securitySchemes"] =
            serde_json::json!({"bearer": {"type": "http", "scheme": "bearer"}});
        card["security"] = serde_json::json!([{"bearer": []}]);
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
    use serde_json::json;

    #[test]
    fn a_built_card_names_its_session_and_the_0_3_interface() {
        let card = agent_card("echo", "0.1.0", "127.0.0.1:5", Some("ses_x"), false);
        assert_eq!(session_id_from_card(&card), Some("ses_x"));
        assert!(card.get("securitySchemes").is_none());
        let public = agent_card("echo", "0.1.0", "127.0.0.1:5", None, true);
        assert_eq!(session_id_from_card(&public), None);
        assert_eq!(public["supportsAuthenticatedExtendedCard"], true);
        assert_eq!(public["securitySchemes"]["bearer"]["scheme"], "bearer");
        assert_eq!(card["url"], "http://127.0.0.1:5/");
        assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "0.3.0");
        assert_eq!(card["capabilities"]["streaming"], false);
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
