use super::rules::is_origin;
use super::*;
use serde_json::json;

/// A manifest read as [`Manifest::load`] reads one, but for resolving its handler.
fn parse(value: serde_json::Value) -> Result<Manifest, String> {
    let (manifest, problems) = Manifest::read(value.to_string().as_bytes())?;
    problems.into_result()?;
    Ok(manifest.expect("no problems: a manifest"))
}

fn minimal() -> serde_json::Value {
    json!({"name": "echo", "version": "0.1.0", "run": ["./handler.sh"]})
}

#[test]
fn a_minimal_manifest_takes_the_defaults() {
    let m = parse(minimal()).unwrap();
    assert_eq!(m.lifecycle, Lifecycle::default());
    assert_eq!(m.lifecycle.queue_depth, 16);
    assert!(!m.exports.peer_tasks.accept);
    assert!(m.network.authentication.is_none() && m.control.is_none());
}

#[test]
fn a_full_manifest_parses() {
    let m = parse(json!({
        "name": "reviewer", "version": "1.2.3", "run": ["python3", "h.py"],
        "lifecycle": {"task_acceptance": "single", "concurrency": 2, "queue_depth": 0, "task_timeout_secs": 5},
        "exports": {"peer_tasks": {"accept": true}},
        "network": {"authentication": {"credentials": [{"name": "reader", "scopes": ["tasks/get"]}]}},
        "control": {"settings": ["MODEL"], "secrets": ["API_KEY"]}
    })).unwrap();
    assert_eq!(m.lifecycle.task_acceptance, Acceptance::Single);
    assert!(!m.lifecycle.retry_interrupted);
    assert_eq!(
        m.network.authentication.unwrap().credentials[0].scopes,
        ["tasks/get"]
    );
}

#[test]
fn each_bad_manifest_is_refused_naming_the_key() {
    let cases: Vec<(serde_json::Value, &str)> = vec![
        (
            json!({"name": "echo", "version": "1", "run": ["x"], "colour": 1}),
            "colour",
        ),
        (
            json!({"name": "Echo", "version": "1", "run": ["x"]}),
            "name",
        ),
        (json!({"name": "e", "version": "", "run": ["x"]}), "version"),
        (json!({"name": "e", "version": "1", "run": []}), "run"),
        (json!({"name": "e", "version": "1"}), "run"),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "lifecycle": {"concurrency": 0}}),
            "concurrency",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "lifecycle": {"retry_interrupted": "yes"}}),
            "lifecycle.retry_interrupted",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"],
                   "lifecycle": {"retry_interrupted": true, "task_acceptance": "none"}}),
            "lifecycle.retry_interrupted",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "lifecycle": {"task_acceptance": "maybe"}}),
            "maybe",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "lifecycle": {"bogus": 1}}),
            "bogus",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "lifecycle": {"memory_budget_mib": 8}}),
            "lifecycle.memory_budget_mib",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "lifecycle": {"memory_budget_mib": 70000}}),
            "memory_budget_mib",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "network": {"authentication": {"credentials": [{"name": "operator", "scopes": []}]}}}),
            "operator",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "network": {"authentication": {"credentials": [{"name": "r", "scopes": ["tasks/delete"]}]}}}),
            "tasks/delete",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "control": {"secrets": ["lower"]}}),
            "control.secrets",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "network": {"cors": ["https://a.example/"]}}),
            "network.cors[0]",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "network": {"cors": ["https://a.example", "*"]}}),
            "network.cors[1]",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "network": {"cors": ["http://a", "http://a"]}}),
            "twice",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "network": {"cors": "https://a.example"}}),
            "network.cors: expected a list of strings, found a string",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "network": {"push": {"allow": ["ok.example", "http://a.example"]}}}),
            "network.push.allow[1]: has host 'http://a.example'",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "network": {"push": {"allow": ["A.example", "a.example"]}}}),
            "network.push.allow[1]: 'a.example' is listed twice",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "network": {"push": {"allow": ["*"]}}}),
            "network.push.allow[0]",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "network": {"push": {"hosts": []}}}),
            "network.push: unknown field `hosts`",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "network": {"push": "yes"}}),
            "network.push",
        ),
        (
            json!({"name": "e", "version": "1", "run": ["x"], "control": {"settings": ["A"], "secrets": ["A"]}}),
            "twice",
        ),
    ];
    for (value, needle) in cases {
        let err = parse(value.clone()).unwrap_err();
        assert!(err.contains(needle), "{value}: {err}");
    }
}

#[test]
fn push_is_off_unless_declared_and_its_allow_list_is_kept() {
    let base = json!({"name": "e", "version": "1", "run": ["x"]});
    assert_eq!(parse(base).unwrap().network.push, super::Push::default());
    let on = parse(json!({"name": "e", "version": "1", "run": ["x"], "network": {"push": true}}));
    assert!(on.unwrap().network.push.on);
    let off = parse(json!({"name": "e", "version": "1", "run": ["x"], "network": {"push": false}}));
    assert!(!off.unwrap().network.push.on);
    let listed = parse(json!({"name": "e", "version": "1", "run": ["x"],
        "network": {"push": {"allow": ["127.0.0.1", "localhost", "[::1]"]}}}))
    .unwrap();
    assert_eq!(
        listed.network.push,
        super::Push {
            on: true,
            allow: vec!["127.0.0.1".into(), "localhost".into(), "[::1]".into()]
        }
    );
}

#[test]
fn cors_origins() {
    for ok in [
        "https://app.example.com",
        "http://localhost:5173",
        "http://127.0.0.1:8080",
        "http://[::1]:3000",
    ] {
        assert!(is_origin(ok), "{ok}");
    }
    for bad in [
        "",
        "*",
        "null",
        "app.example.com",
        "ftp://a.example",
        "https://",
        "https://A.example",
        "https://a.example/",
        "https://a.example/path",
        "https://a.example:",
        "https://a.example:123456",
        "https://a.example:x",
        "https://user@a.example",
        "https://a.example ",
    ] {
        assert!(!is_origin(bad), "{bad}");
    }
}

#[test]
fn names() {
    for ok in ["a", "echo", "a-1", &"a".repeat(32)] {
        assert!(is_valid_name(ok), "{ok}");
    }
    for bad in ["", "1a", "-a", "A", "a_b", "a.b", &"a".repeat(33)] {
        assert!(!is_valid_name(bad), "{bad}");
    }
}

#[test]
fn handlers_resolve_from_the_manifest_dir_or_path() {
    assert!(
        resolve_handler(&["sh".into(), "-c".into()], Path::new("/")).unwrap()[0].ends_with("/sh")
    );
    assert!(
        resolve_handler(&["./nope".into()], Path::new("/"))
            .unwrap_err()
            .contains("/nope")
    );
    assert_eq!(
        resolve_handler(&["/etc/passwd".into()], Path::new("/")).unwrap_err(),
        "the handler /etc/passwd is not executable; make it so: chmod +x /etc/passwd"
    );
    assert_eq!(
        resolve_handler(&["./etc/./passwd".into()], Path::new("/")).unwrap_err(),
        "the handler /etc/passwd is not executable; make it so: chmod +x /etc/passwd"
    );
    assert_eq!(
        resolve_handler(&["./etc".into()], Path::new("/")).unwrap_err(),
        "the handler /etc is not a regular file"
    );
    assert!(resolve_handler(&["no-such-program-xyz".into()], Path::new("/")).is_err());
}

#[test]
fn sha256_of_a_known_vector() {
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn every_problem_is_reported_at_once_under_its_key_path_in_plain_words() {
    let err = parse(json!({
        "name": "Echo", "version": 1, "run": ["x"], "colour": "red",
        "lifecycle": {"concurrency": "4", "queue_depth": 1.5, "task_timeout_secs": 0},
        "network": {"cors": ["*"], "authentication": {"credentials": [{"name": "r"}]}},
        "control": {"secrets": ["lower"]}
    }))
    .unwrap_err();
    for expected in [
        "9 problems:",
        "\n  unknown field `colour` (the fields here: name, version, run,",
        "\n  name: 'Echo' is not a capsule name",
        "\n  version: expected a string, found the number 1",
        "\n  lifecycle.concurrency: expected a whole number, found a string",
        "\n  lifecycle.queue_depth: expected a whole number, found the number 1.5",
        "\n  lifecycle.task_timeout_secs: must be 1 to 604800, not 0",
        "\n  network.authentication.credentials[0].scopes: missing (a list of strings is required)",
        "\n  network.cors[0]: '*' is not an origin",
        "\n  control.secrets: 'lower' is not a control name",
    ] {
        assert!(err.contains(expected), "{expected:?} in:\n{err}");
    }
    // Serde's own words never reach the reader; a pruned value's default is not blamed.
    for never in [
        "invalid type",
        "at line",
        "expected u32",
        "version: must be",
    ] {
        assert!(!err.contains(never), "{never:?} in:\n{err}");
    }
}

#[test]
fn one_problem_is_one_line_and_bad_json_says_where() {
    let err = parse(json!({"name": "e", "version": "1"})).unwrap_err();
    assert_eq!(
        err,
        "run: must name the handler command, e.g. [\"./handler.sh\"]"
    );
    let err = parse(json!({"version": "1", "run": ["x"]})).unwrap_err();
    assert_eq!(err, "name: missing (a string is required)");
    let err = parse(json!(["x"])).unwrap_err();
    assert_eq!(err, "expected an object, found a list");
    let err = Manifest::read(b"{\"name\": \"e\",\n \"version\" 1}").unwrap_err();
    assert_eq!(err, "not valid JSON: expected `:` (line 2, column 12)");
    let err = Manifest::read(b"{\"name\": \"e\",").unwrap_err();
    assert_eq!(err, "not valid JSON: it ends early (line 1)");
    let err = Manifest::read(br#"{"name": "a", "name": "b"}"#).unwrap_err();
    assert!(err.contains("duplicate key \"name\""), "{err}");
}

#[test]
fn a_handler_is_resolved_only_when_run_itself_is_right() {
    let dir = std::env::temp_dir();
    let bytes = br#"{"name": "e", "version": "1", "run": ["no-such-program-xyz", 1]}"#;
    let err = Manifest::admit(bytes, &dir.join("murmur.json")).unwrap_err();
    assert_eq!(err, "run[1]: expected a string, found the number 1");
    let bytes = br#"{"name": "E", "version": "1", "run": ["no-such-program-xyz"]}"#;
    let err = Manifest::admit(bytes, &dir.join("murmur.json")).unwrap_err();
    assert!(
        err.starts_with("2 problems:")
            && err.contains(
                "\n  run: the handler 'no-such-program-xyz' is not an executable on PATH"
            ),
        "{err}"
    );
}
