//! The three token families: arbitrary text never verifies under a key it was not minted with,
//! and a token minted over the input's payload verifies to exactly that payload — in its own
//! family only, and only within the verifier's length bound.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mur::token::{self, CONTROL, DOOR, FORMATION, Key};

fuzz_target!(|data: &[u8]| {
    let key = Key::from_bytes([0x5a; 32]);
    let text = String::from_utf8_lossy(data);
    for family in [DOOR, CONTROL, FORMATION] {
        assert_eq!(token::verify(&key, family, &text), None, "forged: {text}");
    }
    if let Ok(payload) = serde_json::from_slice::<serde_json::Value>(data)
        && payload.is_object()
    {
        let minted = token::mint(&key, FORMATION, &payload);
        // A token past the verifier's length bound is refused whoever minted it.
        // What verifies is the payload's JSON text as minted: compare with that, read back
        // (serde_json reads some long decimals to a float that prints differently).
        let as_minted: serde_json::Value = serde_json::from_str(&payload.to_string()).unwrap();
        let expected = (minted.expose().len() <= token::MAX_TOKEN_LEN).then_some(as_minted);
        assert_eq!(token::verify(&key, FORMATION, minted.expose()), expected);
        assert_eq!(token::verify(&key, DOOR, minted.expose()), None);
        assert_eq!(
            token::verify(&Key::from_bytes([0x5b; 32]), FORMATION, minted.expose()),
            None
        );
    }
});
