use super::*;

/// An echo session's facts at 127.0.0.1:5, its door authenticating as `bearer` says.
fn facts(bearer: bool) -> CardFacts<'static> {
    CardFacts {
        name: "echo",
        version: "0.1.0",
        addr: "127.0.0.1:5",
        advertised: None,
        session: Some("ses_x"),
        bearer,
    }
}

#[test]
fn a_built_card_names_its_session_and_both_interfaces() {
    let facts = facts(false);
    let card = agent_card(&facts, CardFor::Both);
    assert_eq!(session_id_from_card(&card), Some("ses_x"));
    assert!(card.get("securitySchemes").is_none());
    assert_eq!(card["capabilities"]["extendedAgentCard"], false);
    let public = agent_card(
        &CardFacts {
            session: None,
            bearer: true,
            ..facts
        },
        CardFor::Both,
    );
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
    let interfaces: Vec<(&str, &str)> = card["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            assert_eq!(i["url"], card["url"], "one URL for every binding");
            let binding = i["protocolBinding"].as_str().unwrap();
            (binding, i["protocolVersion"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        interfaces,
        [
            ("JSONRPC", "1.0"),
            ("JSONRPC", "0.3"),
            ("HTTP+JSON", "1.0"),
            ("HTTP+JSON", "0.3")
        ]
    );
    assert_eq!(
        card["additionalInterfaces"],
        json!([
            {"url": "http://127.0.0.1:5/", "transport": "JSONRPC"},
            {"url": "http://127.0.0.1:5/", "transport": "HTTP+JSON"},
        ])
    );
    assert_eq!(card["capabilities"]["streaming"], true);
}

#[test]
fn a_card_for_one_generation_carries_only_its_members() {
    let facts = facts(true);
    let keys = |card: &Value| -> Vec<String> {
        let mut keys: Vec<String> = card.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        keys
    };
    let common = [
        "capabilities",
        "defaultInputModes",
        "defaultOutputModes",
        "description",
        "name",
        "securitySchemes",
        "skills",
        "version",
    ];
    let with = |more: &[&str]| {
        let mut all: Vec<String> = common.iter().chain(more).map(|k| k.to_string()).collect();
        all.sort();
        all
    };
    let new = agent_card(&facts, CardFor::Only(Generation::V1_0));
    assert_eq!(
        keys(&new),
        with(&["securityRequirements", "supportedInterfaces"])
    );
    assert_eq!(
        new["securitySchemes"],
        json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}})
    );
    assert_eq!(new["capabilities"]["extendedAgentCard"], true);
    assert_eq!(session_id_from_card(&new), Some("ses_x"));
    let old = agent_card(&facts, CardFor::Only(Generation::V0_3));
    assert_eq!(
        keys(&old),
        with(&[
            "additionalInterfaces",
            "preferredTransport",
            "protocolVersion",
            "security",
            "supportsAuthenticatedExtendedCard",
            "url"
        ])
    );
    assert_eq!(
        old["securitySchemes"],
        json!({"bearer": {"type": "http", "scheme": "Bearer"}})
    );
    assert!(old["capabilities"].get("extendedAgentCard").is_none());
    assert_eq!(session_id_from_card(&old), Some("ses_x"));
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
