use super::*;

#[test]
fn both_reachability_forms_and_its_absence_parse() {
    let all = Roster::from_slice(
        br#"{"members":[{"name":"a","capsule":"x","entry":true}],"reachability":"all"}"#,
    )
    .unwrap();
    assert_eq!(all.reachability, Reachability::All);
    let rules =
        Roster::from_slice(br#"{"members":[],"reachability":[{"from":"a","to":["b"]}]}"#).unwrap();
    assert_eq!(
        rules.reachability,
        Reachability::Rules(vec![Rule {
            from: "a".into(),
            to: vec!["b".into()]
        }])
    );
    let none = Roster::from_slice(br#"{"members":[]}"#).unwrap();
    assert_eq!(none.reachability, Reachability::Nothing);
}

#[test]
fn a_bad_reachability_is_named() {
    let err = Roster::from_slice(br#"{"members":[],"reachability":"some"}"#).unwrap_err();
    assert!(err.contains("reachability"), "{err}");
    let err =
        Roster::from_slice(br#"{"members":[],"reachability":[{"from":"a","to":["b"],"why":1}]}"#)
            .unwrap_err();
    assert!(err.contains("why"), "{err}");
}

#[test]
fn unknown_keys_and_bad_shapes_are_refused() {
    for bad in [
        &br#"{"members":[],"colour":1}"#[..],
        br#"{"members":[{"name":"a","capsule":"x","extra":1}]}"#,
        br#"{"members":[],"reachability":"some"}"#,
        br#"{"members":[],"reachability":[{"from":"a","to":["b"],"why":1}]}"#,
        br#"{"members":{}}"#,
        br#"{}"#,
        b"[",
    ] {
        let err = Roster::from_slice(bad).unwrap_err();
        assert!(!err.is_empty(), "{}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn every_shape_problem_is_named_at_once_under_its_key_path() {
    let err = Roster::from_slice(
            br#"{"members":[{"name":1,"capsule":"x","entry":"yes"}],"reachability":[{"from":"a"}],"colour":1}"#,
        )
        .unwrap_err();
    assert_eq!(
        err,
        "4 problems:\n  \
             unknown field `colour` (the fields here: members, reachability)\n  \
             members[0].name: expected a string, found the number 1\n  \
             members[0].entry: expected true or false, found a string\n  \
             reachability[0].to: missing (a list of strings is required)"
    );
}
