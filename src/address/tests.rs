use super::*;
use crate::json::record::RunningRecord;

fn entry(hex_tail: &str, formation: Option<&str>) -> Entry {
    named_entry(hex_tail, formation, "c", "1")
}

fn named_entry(hex_tail: &str, formation: Option<&str>, name: &str, version: &str) -> Entry {
    let id = format!("ses_0199c4e2f1b7712a9d3e4f50{hex_tail:0>8}");
    let mut value = serde_json::json!({
            "session_id": id, "url": "127.0.0.1:1", "pid": 1, "process_start": "1",
            "capsule_name": name, "capsule_version": version, "workdir": "/", "outlives_launcher": true,
            "started_at": "2026-01-01T00:00:00Z"});
    if let Some(f) = formation {
        value["formation_id"] = format!("frm_0199c4e2f1b7712a9d3e4f50{f:0>8}").into();
    }
    let dir = crate::sys::dir::Dir::open(std::path::Path::new("/")).unwrap();
    let record = RunningRecord::from_slice(value.to_string().as_bytes()).unwrap();
    Entry::new(&dir, "x.json", record)
}

fn session_of(named: Named<'_>) -> String {
    match named {
        Named::Session(e) => e.record.session_id.to_string(),
        Named::Formation(f, _) => f.to_string(),
    }
}

#[test]
fn at_n_counts_from_the_newest() {
    let running = [entry("3", None), entry("2", None)];
    assert!(session_of(resolve("@1", &running).unwrap()).ends_with('3'));
    assert!(session_of(resolve("@2", &running).unwrap()).ends_with('2'));
    for bad in ["@0", "@3", "@x", "@", "@-1"] {
        assert!(resolve(bad, &running).is_err(), "{bad}");
    }
}

#[test]
fn full_ids_and_suffixes() {
    let running = [
        entry("aaaa1111", Some("ffff")),
        entry("bbbb2222", Some("ffff")),
        entry("cccc1111", None),
    ];
    let full = running[1].record.session_id.to_string();
    assert_eq!(session_of(resolve(&full, &running).unwrap()), full);
    assert!(session_of(resolve("BBBB2222", &running).unwrap()).ends_with("bbbb2222"));
    // One formation of two members is one match.
    match resolve("0000ffff", &running).unwrap() {
        Named::Formation(_, members) => assert_eq!(members.len(), 2),
        other => panic!("{other:?}"),
    }
    assert!(resolve("1111", &running).unwrap_err().contains("matches 2"));
    assert!(resolve("abc", &running).unwrap_err().contains("too short"));
    assert!(
        resolve("9999", &running)
            .unwrap_err()
            .contains("no running")
    );
    assert!(
        resolve("ses_nothex", &running)
            .unwrap_err()
            .contains("not a session id")
    );
    assert!(resolve("frm_0199c4e2f1b7712a9d3e4f5000000000", &running).is_err());
}

#[test]
fn capsule_names_and_versions_address_one_session() {
    let running = [
        named_entry("3", None, "shout", "2"),
        named_entry("2", None, "shout", "1"),
        named_entry("1", None, "echo", "0.1.0"),
    ];
    assert!(session_of(resolve("echo", &running).unwrap()).ends_with('1'));
    assert!(session_of(resolve("shout@1", &running).unwrap()).ends_with('2'));
    let ambiguous = resolve("shout", &running).unwrap_err();
    assert!(
        ambiguous.contains("names 2 running sessions")
            && ambiguous.contains("@1 ")
            && ambiguous.contains("@2 ")
            && ambiguous.contains("shout@1"),
        "{ambiguous}"
    );
    assert!(
        resolve("shout@3", &running)
            .unwrap_err()
            .contains("no running")
    );
    assert!(resolve("ab", &running).unwrap_err().contains("too short"));
}

#[test]
fn instance_names_member_names_and_id_prefixes() {
    let mut named = entry("aaaa1111", Some("ffff"));
    named.record.name = Some("h2".into());
    let mut member = entry("bbbb2222", Some("ffff"));
    member.record.member = Some("beta".into());
    let running = [named, member, entry("cccc3333", None)];
    assert!(session_of(resolve("h2", &running).unwrap()).ends_with("aaaa1111"));
    assert!(session_of(resolve("beta", &running).unwrap()).ends_with("bbbb2222"));
    let frm = "frm_0199c4e2f1b7712a9d3e4f500000ffff";
    assert!(session_of(resolve(&format!("{frm}/beta"), &running).unwrap()).ends_with("bbbb2222"));
    assert!(session_of(resolve("ffff/beta", &running).unwrap()).ends_with("bbbb2222"));
    assert!(resolve("ffff/gamma", &running).is_err());
    // Every id here shares its first 28 hex digits: a prefix of them is ambiguous, one that
    // reaches a digit of its own is not.
    assert!(
        resolve("0199c4e2", &running)
            .unwrap_err()
            .contains("matches")
    );
    let prefix = "ses_0199c4e2f1b7712a9d3e4f50cccc";
    assert!(session_of(resolve(prefix, &running).unwrap()).ends_with("cccc3333"));
    assert!(session_of(resolve(&prefix[4..], &running).unwrap()).ends_with("cccc3333"));
}

#[test]
fn the_shown_prefix_is_the_shortest_unique_one_from_the_least() {
    assert_eq!(
        unique_prefix(&["0123456789abcdef", "0123456789abffff"], 12),
        13
    );
    assert_eq!(unique_prefix(&["0123", "4567"], 12), 12);
    assert_eq!(unique_prefix(&[], 12), 12);
}
