use super::*;
use serde_json::{Value, json};
use std::fs;
use std::os::unix::fs::PermissionsExt;

/// A project directory, removed on drop, holding capsules `a` (no peer tasks), `b` and `c`
/// (accepting peer tasks), every door authenticated, each with an executable handler.
struct Project {
    /// The directory's canonical path, as `admit` makes the roster's directory.
    path: PathBuf,
    /// Holds the directory until the project is dropped.
    _dir: crate::scratch::Scratch,
}

impl Project {
    fn new() -> Project {
        let dir = crate::scratch::Scratch::new("admission");
        // Canonical, as `admit` makes the roster's directory.
        let project = Project {
            path: fs::canonicalize(&dir).unwrap(),
            _dir: dir,
        };
        project.capsule("a", &manifest("a", false, true));
        project.capsule("b", &manifest("b", true, true));
        project.capsule("c", &manifest("c", true, true));
        project
    }

    fn capsule(&self, name: &str, manifest: &Value) {
        let dir = self.path.join(name);
        fs::create_dir_all(&dir).unwrap();
        let handler = dir.join("handler.sh");
        fs::write(&handler, "#!/bin/sh\ncat\n").unwrap();
        fs::set_permissions(&handler, fs::Permissions::from_mode(0o755)).unwrap();
        self.write(&format!("{name}/murmur.json"), &manifest.to_string());
    }

    /// Write `text` at `path`, relative to the project.
    fn write(&self, path: &str, text: &str) {
        let path = self.path.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
}

/// A manifest for capsule `name` running `./handler.sh`: `accept` peer tasks or not, with an
/// authenticated door (no declared credentials) or a public one.
fn manifest(name: &str, accept: bool, auth: bool) -> Value {
    let mut m = json!({
        "name": name,
        "version": "1.0.0",
        "run": ["./handler.sh"],
        "lifecycle": {"task_timeout_secs": 60},
        "exports": {"peer_tasks": {"accept": accept}},
    });
    if auth {
        m["network"] = json!({"authentication": {"credentials": []}});
    }
    m
}

fn member(name: &str, capsule: &str, entry: bool) -> Value {
    json!({"name": name, "capsule": capsule, "entry": entry})
}

fn roster(members: Vec<Value>, reachability: Option<Value>) -> String {
    let mut roster = json!({"members": members});
    if let Some(r) = reachability {
        roster["reachability"] = r;
    }
    roster.to_string()
}

/// One refused roster: what it shows, the files written over the project's three capsules
/// (path relative to the project, contents), the roster (`None`: there is none) and the path
/// it is admitted from, and what the refusal must say. `{project}` in a fragment stands for
/// the project directory.
struct Case {
    what: &'static str,
    files: Vec<(&'static str, String)>,
    roster: Option<String>,
    at: &'static str,
    says: Vec<&'static str>,
}

/// `roster`, written as `roster.json`, is refused saying each of `says`.
fn refused(what: &'static str, roster: String, says: &[&'static str]) -> Case {
    Case {
        what,
        files: vec![],
        roster: Some(roster),
        at: "roster.json",
        says: says.to_vec(),
    }
}

/// There is no roster at `at`: refused saying each of `says`.
fn missing(what: &'static str, at: &'static str, says: &[&'static str]) -> Case {
    Case {
        what,
        files: vec![],
        roster: None,
        at,
        says: says.to_vec(),
    }
}

impl Case {
    fn with_file(mut self, path: &'static str, text: String) -> Case {
        self.files.push((path, text));
        self
    }
}

/// The three members every case builds from: the entry `a`, and `b` and `c`.
fn abc() -> (Value, Value, Value) {
    (
        member("a", "a", true),
        member("b", "b", false),
        member("c", "c", false),
    )
}

/// Checks 1 to 4: names, the entry, the rules.
fn roster_cases() -> Vec<Case> {
    let (a, b, _) = abc();
    vec![
        // 1. Member names.
        refused(
            "a malformed member name",
            roster(vec![a.clone(), member("Bad_Name", "b", false)], None),
            &["'Bad_Name' is not a member name"],
        ),
        refused(
            "a duplicate name",
            roster(vec![a.clone(), b.clone(), member("b", "c", false)], None),
            &["'b' appears twice"],
        ),
        // 2. The entry.
        refused(
            "no entry",
            roster(vec![member("a", "a", false), b.clone()], None),
            &["no member is the entry"],
        ),
        refused(
            "two entries",
            roster(vec![a.clone(), member("b", "b", true)], None),
            &["a, b are all marked entry"],
        ),
        // 3. Rules name members and none calls itself.
        refused(
            "a rule calling a non-member",
            roster(
                vec![a.clone(), b.clone()],
                Some(json!([{"from": "a", "to": ["b", "ghost"]}])),
            ),
            &["'ghost' is not a member"],
        ),
        refused(
            "a rule from a non-member",
            roster(
                vec![a.clone(), b.clone()],
                Some(json!([{"from": "ghost", "to": ["b"]}])),
            ),
            &["'ghost' is not a member"],
        ),
        refused(
            "a member calling itself",
            roster(
                vec![a.clone(), b.clone()],
                Some(json!([{"from": "b", "to": ["b"]}])),
            ),
            &["'b' may not call itself"],
        ),
        // 4. Nobody calls the entry.
        refused(
            "a rule calling the entry",
            roster(
                vec![a.clone(), b.clone()],
                Some(json!([{"from": "b", "to": ["a"]}])),
            ),
            &["'b' may not call 'a'", "entry member"],
        ),
    ]
}

/// Checks 5 to 7: the manifests, peer tasks, authentication.
fn manifest_cases() -> Vec<Case> {
    let (a, b, c) = abc();
    let mut colour = manifest("c", true, true);
    colour["colour"] = json!("blue");
    vec![
        // 5. Every manifest parses.
        refused(
            "a manifest that does not parse",
            roster(
                vec![a.clone(), b.clone(), c.clone()],
                Some(json!([{"from": "a", "to": ["b"]}])),
            ),
            &["member 'c'", "{project}/c/murmur.json"],
        )
        .with_file("c/murmur.json", "{\"name\": \"c\",".into()),
        refused(
            "a manifest with an unknown key (a manifest that does not parse, the key named)",
            roster(
                vec![a.clone(), b.clone(), c.clone()],
                Some(json!([{"from": "a", "to": ["b"]}])),
            ),
            &["member 'c'", "{project}/c/murmur.json", "colour"],
        )
        .with_file("c/murmur.json", colour.to_string()),
        // 6. Callees accept peer tasks.
        refused(
            "a callee that does not accept peer tasks",
            roster(
                vec![member("b", "b", true), member("a", "a", false)],
                Some(json!([{"from": "b", "to": ["a"]}])),
            ),
            &[
                "member 'a'",
                "does not accept peer tasks",
                "{project}/a/murmur.json",
            ],
        ),
        // 7. With an edge, every door authenticates: c authenticates and is called; a (the
        // entry, calling nobody) has a public door.
        refused(
            "an edge while a member's door does not authenticate",
            roster(
                vec![a.clone(), b.clone(), c.clone()],
                Some(json!([{"from": "b", "to": ["c"]}])),
            ),
            &[
                "member 'a'",
                "must authenticate",
                "network.authentication",
                "{project}/a/murmur.json",
            ],
        )
        .with_file("a/murmur.json", manifest("a", false, false).to_string()),
    ]
}

/// The roster file itself, and which refusal wins when several apply.
fn file_and_order_cases() -> Vec<Case> {
    let a = abc().0;
    vec![
        // The roster itself.
        refused(
            "an unknown roster key",
            json!({"members": [a.clone()], "reachabilty": "all"}).to_string(),
            &["unknown field `reachabilty`"],
        ),
        refused(
            "an unknown member key",
            json!({"members": [{"name": "a", "capsule": "a", "entry": true, "port": 1}]})
                .to_string(),
            &["unknown field `port`"],
        ),
        missing(
            "no roster.json",
            "roster.json",
            &["{project}/roster.json", "no such file"],
        ),
        missing(
            "no roster at the path given",
            "elsewhere/team.json",
            &["elsewhere/team.json", "no such file"],
        ),
        // The first refusal wins, in the order of the checks. c's manifest is broken
        // throughout. Duplicate names, no entry and a ghost rule: names are checked first.
        refused(
            "the first refusal: names",
            roster(
                vec![member("b", "b", false), member("b", "c", false)],
                Some(json!([{"from": "b", "to": ["ghost"]}])),
            ),
            &["'b' appears twice"],
        )
        .with_file("c/murmur.json", "not json".into()),
        // Then the entry, then the rules, then the manifests.
        refused(
            "the first refusal: the entry",
            roster(
                vec![member("b", "b", false), member("c", "c", false)],
                Some(json!([{"from": "b", "to": ["ghost"]}])),
            ),
            &["no member is the entry"],
        )
        .with_file("c/murmur.json", "not json".into()),
        refused(
            "the first refusal: the rules",
            roster(
                vec![member("b", "b", true), member("c", "c", false)],
                Some(json!([{"from": "b", "to": ["ghost"]}])),
            ),
            &["'ghost' is not a member"],
        )
        .with_file("c/murmur.json", "not json".into()),
    ]
}

#[test]
fn each_bad_roster_is_refused_naming_what_is_wrong() {
    let cases = roster_cases()
        .into_iter()
        .chain(manifest_cases())
        .chain(file_and_order_cases());
    for case in cases {
        let project = Project::new();
        for (path, text) in &case.files {
            project.write(path, text);
        }
        if let Some(roster) = &case.roster {
            project.write(case.at, roster);
        }
        let roster_path = project.path.join(case.at);
        let err = match admit(&roster_path) {
            Ok(formation) => panic!("{}: admitted {formation:?}", case.what),
            Err(err) => err,
        };
        // Every refusal starts with the roster's path (the applet puts `mur formation: `
        // before it).
        assert!(
            err.starts_with(&format!("{}: ", roster_path.display())),
            "{}: {err}",
            case.what
        );
        for fragment in &case.says {
            let fragment = fragment.replace("{project}", &project.path.display().to_string());
            assert!(
                err.contains(&fragment),
                "{}: {fragment:?} not in {err}",
                case.what
            );
        }
    }
}

#[test]
fn public_doors_are_admitted_when_nobody_calls_anybody() {
    // The members refused above for a public door, without the edge: the check is about
    // edges.
    let project = Project::new();
    project.capsule("a", &manifest("a", false, false));
    project.write(
        "roster.json",
        &roster(
            vec![
                member("a", "a", true),
                member("b", "b", false),
                member("c", "c", false),
            ],
            None,
        ),
    );
    let formation = admit(&project.path.join("roster.json")).unwrap();
    assert_eq!(formation.entry().name, "a");
    assert_eq!(formation.peers().count(), 2);
    assert!(formation.members.iter().all(|m| m.callees.is_empty()));
}
