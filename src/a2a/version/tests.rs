use super::*;

#[test]
fn the_header_names_a_generation_or_is_refused() {
    for (sent, want) in [
        (None, Some(Generation::V0_3)),
        (Some(""), Some(Generation::V0_3)),
        (Some(" "), Some(Generation::V0_3)),
        (Some("0.3"), Some(Generation::V0_3)),
        (Some("0.3.0"), Some(Generation::V0_3)),
        (Some("1.0"), Some(Generation::V1_0)),
        (Some(" 1.0 "), Some(Generation::V1_0)),
        (Some("1.0.1"), Some(Generation::V1_0)),
        (Some("1.0.12"), Some(Generation::V1_0)),
        (Some("1"), None),
        (Some("1.1"), None),
        (Some("2.0"), None),
        (Some("0.2"), None),
        (Some("1.0."), None),
        (Some("1.0.x"), None),
        (Some("1.0.1.2"), None),
        (Some("v1.0"), None),
        (Some("garbage"), None),
    ] {
        let got = Generation::from_header(sent.map(str::as_bytes)).ok();
        assert_eq!(got, want, "{sent:?}");
    }
    let refusal = Generation::from_header(Some(b"9.9\n\x1b")).unwrap_err();
    assert!(refusal.contains("'9.9"), "{refusal}");
    assert!(!refusal.contains('\x1b'), "{refusal}");
    assert!(Generation::from_header(Some(b"\xff\xfe")).is_err());
}
