use super::*;
use serde_json::json;

fn key(byte: u8) -> Key {
    Key::from_bytes([byte; 32])
}

#[test]
fn a_minted_token_verifies_with_its_key_and_family_only() {
    let payload = json!({"credential": "operator", "scopes": ["message/send"]});
    let token = mint(&key(1), DOOR, &payload);
    assert!(token.expose().starts_with("mdt1."));
    assert_eq!(verify(&key(1), DOOR, token.expose()), Some(payload.clone()));
    assert_eq!(verify(&key(2), DOOR, token.expose()), None);
    // Same key, another family: the domain separates them even with the prefix swapped.
    assert_eq!(verify(&key(1), CONTROL, token.expose()), None);
    let swapped = token.expose().replacen("mdt1", "ctl1", 1);
    assert_eq!(verify(&key(1), CONTROL, &swapped), None);
}

#[test]
fn a_payload_with_a_duplicate_key_is_refused_even_with_a_good_mac() {
    // MACed with the right key: only the payload's shape can refuse it.
    let payload_b64 =
        b64::encode(br#"{"credential":"reader","credential":"operator","scopes":[]}"#);
    let tag = key(1).mac(DOOR, &payload_b64).finalize().into_bytes();
    let token = format!("mdt1.{payload_b64}.{}", b64::encode(&tag));
    assert_eq!(verify(&key(1), DOOR, &token), None);
    let once = b64::encode(br#"{"credential":"operator","scopes":[]}"#);
    let tag = key(1).mac(DOOR, &once).finalize().into_bytes();
    let token = format!("mdt1.{once}.{}", b64::encode(&tag));
    assert!(
        verify(&key(1), DOOR, &token).is_some(),
        "the control case verifies"
    );
}

#[test]
fn altered_truncated_and_malformed_tokens_are_refused() {
    let token = mint(&key(1), DOOR, &json!({"credential": "operator"}));
    let text = token.expose();
    let mut refused = vec![
        String::new(),
        "mdt1".into(),
        "mdt1..".into(),
        format!("{text}."),
        format!("{text}x"),
        text[..text.len() - 1].to_string(),
        text.replacen("mdt1.", "mdt1.x", 1),
        "x".repeat(MAX_TOKEN_LEN + 1),
    ];
    // Flip each character of the payload and MAC in turn.
    for i in 5..text.len() {
        let mut bytes = text.as_bytes().to_vec();
        bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
        refused.push(String::from_utf8(bytes).unwrap());
    }
    for bad in refused {
        if bad != text {
            assert_eq!(verify(&key(1), DOOR, &bad), None, "{bad}");
        }
    }
}

#[test]
fn a_validly_macd_non_object_payload_is_refused() {
    let token = mint(&key(1), DOOR, &json!(["not", "an", "object"]));
    assert_eq!(verify(&key(1), DOOR, token.expose()), None);
}

#[test]
fn derived_keys_differ_by_every_part() {
    let master = key(9);
    let a = master.derive(&["murmur-formation-door-v1", "frm_1", "reviewer"]);
    let b = master.derive(&["murmur-formation-door-v1", "frm_1", "summarizer"]);
    let c = master.derive(&["murmur-formation-door-v1", "frm_2", "reviewer"]);
    assert_ne!(a.as_bytes(), b.as_bytes());
    assert_ne!(a.as_bytes(), c.as_bytes());
    assert_eq!(
        a.as_bytes(),
        master
            .derive(&["murmur-formation-door-v1", "frm_1", "reviewer"])
            .as_bytes()
    );
    assert_eq!(format!("{a:?}"), "Key(<redacted>)");
}
