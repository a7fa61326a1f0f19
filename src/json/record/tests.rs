use super::*;
use serde_json::{Value, json};

fn record() -> RunningRecord {
    RunningRecord {
        session_id: SessionId::parse("ses_0199c4e2f1b7712a9d3e4f5061728394").unwrap(),
        url: "127.0.0.1:1".into(),
        pid: 1,
        process_start: "42".into(),
        capsule_name: "demo".into(),
        capsule_version: "0.1.0".into(),
        workdir: "/tmp/demo".into(),
        outlives_launcher: true,
        started_at: "2026-01-01T00:00:00Z".into(),
        door_token: None,
        credentials: BTreeMap::new(),
        formation_id: None,
        formation_lifeline: false,
        formation_launcher: None,
        spawned_by: None,
        records_dir: None,
        sandbox: None,
        log_lines_dropped: 0,
        handler_user: None,
        name: None,
        member: None,
    }
}

fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

#[test]
fn a_plain_record_has_exactly_the_nine_keys() {
    let value = serde_json::to_value(record()).unwrap();
    assert_eq!(
        keys(&value),
        [
            "capsule_name",
            "capsule_version",
            "outlives_launcher",
            "pid",
            "process_start",
            "session_id",
            "started_at",
            "url",
            "workdir"
        ]
    );
}

#[test]
fn every_optional_key_round_trips_and_is_written_only_when_set() {
    let mut full = record();
    full.door_token = Some(Secret::new("mdt1.operatorsecret.mac".into()));
    full.credentials
        .insert("reader".into(), Secret::new("mdt1.readersecret.mac".into()));
    full.formation_id = Some(FormationId::parse("frm_0199c4e2f1b7712a9d3e4f5061728390").unwrap());
    full.formation_lifeline = true;
    full.formation_launcher = Some(ProcessIdentity {
        pid: 4242,
        process_start: "987654".into(),
    });
    full.spawned_by = Some(SessionId::parse("ses_0199c4e2f1b7712a9d3e4f5061728390").unwrap());
    full.records_dir = Some("/tmp/records".into());
    let value = serde_json::to_value(&full).unwrap();
    assert_eq!(value.as_object().unwrap().len(), 16);
    assert_eq!(
        value["credentials"],
        json!({"reader": "mdt1.readersecret.mac"})
    );
    assert_eq!(
        value["formation_launcher"],
        json!({"pid": 4242, "process_start": "987654"})
    );
    assert_eq!(RunningRecord::from_slice(&full.to_bytes()).unwrap(), full);
}

#[test]
fn debug_prints_no_token() {
    let mut with_tokens = record();
    with_tokens.door_token = Some(Secret::new("mdt1.operatorsecret.mac".into()));
    with_tokens.credentials.insert(
        "watcher".into(),
        Secret::new("mdt1.watchersecret.mac".into()),
    );
    let debug = format!("{with_tokens:?}");
    assert!(!debug.contains("secret.mac"), "{debug}");
    assert!(debug.contains("\"watcher\": Secret(<redacted>)"), "{debug}");
}

#[test]
fn a_missing_required_key_makes_the_record_unreadable() {
    for key in [
        "session_id",
        "url",
        "pid",
        "process_start",
        "capsule_name",
        "capsule_version",
        "workdir",
        "outlives_launcher",
        "started_at",
    ] {
        let mut value = serde_json::to_value(record()).unwrap();
        value.as_object_mut().unwrap().remove(key);
        let bytes = serde_json::to_vec(&value).unwrap();
        assert!(RunningRecord::from_slice(&bytes).is_err(), "{key}");
    }
}

#[test]
fn unknown_keys_are_ignored() {
    let mut value = serde_json::to_value(record()).unwrap();
    value["added_by_a_newer_runtime"] = json!({"x": 1});
    let bytes = serde_json::to_vec(&value).unwrap();
    assert_eq!(RunningRecord::from_slice(&bytes).unwrap(), record());
}

#[test]
fn malformed_ids_and_launchers_make_the_record_unreadable() {
    let cases = [
        ("session_id", json!("ses_nothex")),
        ("formation_id", json!("frm_ABC")),
        ("spawned_by", json!(17)),
        ("formation_launcher", json!(4242)),
        ("formation_launcher", json!({"pid": 4242})),
        ("formation_launcher", json!({"process_start": "1"})),
        (
            "formation_launcher",
            json!({"pid": -1, "process_start": "1"}),
        ),
        (
            "formation_launcher",
            json!({"pid": "4242", "process_start": "1"}),
        ),
        ("pid", json!(-5)),
        ("pid", json!(1u64 << 33)),
    ];
    for (key, bad) in cases {
        let mut value = serde_json::to_value(record()).unwrap();
        value[key] = bad.clone();
        let bytes = serde_json::to_vec(&value).unwrap();
        assert!(RunningRecord::from_slice(&bytes).is_err(), "{key}: {bad}");
    }
}
