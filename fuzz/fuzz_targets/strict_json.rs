//! JSON with duplicate keys refused: wherever `json::strict` reads a value, serde_json reads the
//! same; where serde_json refuses the text, so does strict; and a data error from strict always
//! names a duplicate key. (Text with a duplicate key *and* a later syntax error is refused by
//! both, for different reasons: strict stops at the duplicate.)
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let theirs = serde_json::from_slice::<serde_json::Value>(data);
    match mur::json::strict::from_slice(data) {
        Ok(ours) => assert_eq!(Some(ours), theirs.ok(), "strict read what serde_json did not"),
        Err(err) if err.is_data() => assert!(err.to_string().contains("duplicate key"), "{err}"),
        Err(_) => assert!(theirs.is_err(), "strict refused JSON serde_json reads"),
    }
});
