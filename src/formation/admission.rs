//! Admission: the seven checks a roster passes before anything is started, in order, the first
//! refusal winning.
//!
//! 1. Member names are unique and well formed.
//! 2. Exactly one member is the entry.
//! 3. Every rule names members, and none calls itself.
//! 4. No rule calls the entry member.
//! 5. Every capsule manifest parses; its sha256 is bound to the member and re-checked by
//!    `mur run --capsule-sha256`.
//! 6. Every callee accepts peer tasks.
//! 7. If any edge exists, every member's door authenticates.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::json::manifest::{Manifest, is_valid_name};
use crate::json::roster::{Reachability, Roster};

/// The largest roster read.
const MAX_ROSTER_BYTES: u64 = 256 * 1024;

/// One member that passed admission.
#[derive(Debug, Clone)]
pub struct Admitted {
    pub name: String,
    pub entry: bool,
    /// The manifest file it was admitted with, and that file's sha256.
    pub manifest: PathBuf,
    pub sha256: String,
    /// The members it may call, sorted.
    pub callees: Vec<String>,
}

/// A roster that passed every check.
#[derive(Debug, Clone)]
pub struct Formation {
    /// The roster's directory: the entry member's workdir, and the project formations are
    /// grouped under.
    pub project_dir: PathBuf,
    /// Every member, in roster order.
    pub members: Vec<Admitted>,
}

impl Formation {
    pub fn entry(&self) -> &Admitted {
        self.members
            .iter()
            .find(|m| m.entry)
            .expect("admission proved exactly one entry")
    }

    pub fn peers(&self) -> impl Iterator<Item = &Admitted> {
        self.members.iter().filter(|m| !m.entry)
    }
}

/// Read `roster_path` and admit it. Every `Err` starts with the roster path.
pub fn admit(roster_path: &Path) -> Result<Formation, String> {
    let at = |why: String| format!("{}: {why}", roster_path.display());
    let bytes = crate::sys::fs::read_small_regular(roster_path, MAX_ROSTER_BYTES).map_err(|r| {
        at(match r {
            crate::sys::fs::ReadRefusal::Vanished => {
                "no such file (give a roster path, or run where roster.json is)".into()
            }
            crate::sys::fs::ReadRefusal::Invalid(why) | crate::sys::fs::ReadRefusal::Io(why) => why,
        })
    })?;
    let roster = Roster::from_slice(&bytes).map_err(at)?;
    let dir = roster_path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let project_dir =
        std::fs::canonicalize(dir).map_err(|err| at(format!("{}: {err}", dir.display())))?;
    check(&roster, &project_dir).map_err(at)
}

/// A member's name → the names it may call.
type Edges<'r> = BTreeMap<&'r str, BTreeSet<&'r str>>;

/// The seven checks over a parsed roster whose relative paths resolve from `dir`, in order; the
/// first refusal wins.
pub fn check(roster: &Roster, dir: &Path) -> Result<Formation, String> {
    let names = unique_names(roster)?;
    let entry = the_entry(roster)?;
    let callees = edges(roster, &names, entry)?;
    // 5. Every manifest parses; its digest is bound to the member.
    let mut loaded = BTreeMap::new();
    for member in &roster.members {
        let path = dir.join(&member.capsule);
        let manifest =
            Manifest::load(&path).map_err(|why| format!("member '{}': {why}", member.name))?;
        loaded.insert(member.name.as_str(), manifest);
    }
    callees_may_be_called(&callees, &loaded)?;
    let members = roster
        .members
        .iter()
        .map(|m| {
            let l = &loaded[m.name.as_str()];
            Admitted {
                name: m.name.clone(),
                entry: m.entry,
                manifest: l.path.clone(),
                sha256: l.sha256.clone(),
                callees: callees
                    .get(m.name.as_str())
                    .map(|set| set.iter().map(|s| s.to_string()).collect())
                    .unwrap_or_default(),
            }
        })
        .collect();
    Ok(Formation {
        members,
        project_dir: dir.to_path_buf(),
    })
}

/// 1. Names unique and well formed.
fn unique_names(roster: &Roster) -> Result<BTreeSet<&str>, String> {
    if roster.members.is_empty() {
        return Err("members: the roster has no members".into());
    }
    let mut names = BTreeSet::new();
    for member in &roster.members {
        if !is_valid_name(&member.name) {
            return Err(format!(
                "members: '{}' is not a member name (a lowercase letter, then up to 31 of a-z, 0-9, -)",
                member.name.escape_debug()
            ));
        }
        if !names.insert(member.name.as_str()) {
            return Err(format!("members: '{}' appears twice", member.name));
        }
    }
    Ok(names)
}

/// 2. Exactly one entry member.
fn the_entry(roster: &Roster) -> Result<&str, String> {
    let entries: Vec<&str> = roster
        .members
        .iter()
        .filter(|m| m.entry)
        .map(|m| m.name.as_str())
        .collect();
    match entries.as_slice() {
        [one] => Ok(*one),
        [] => Err("members: no member is the entry (mark exactly one with \"entry\": true)".into()),
        many => Err(format!(
            "members: {} are all marked entry; exactly one may be",
            many.join(", ")
        )),
    }
}

/// 3 and 4. Edges name members, none calls itself or the entry member.
fn edges<'r>(
    roster: &'r Roster,
    names: &BTreeSet<&'r str>,
    entry: &str,
) -> Result<Edges<'r>, String> {
    let mut callees = Edges::new();
    match &roster.reachability {
        Reachability::Nothing => {}
        Reachability::All => {
            for from in names {
                for to in names {
                    if from != to && *to != entry {
                        callees.entry(from).or_default().insert(to);
                    }
                }
            }
        }
        Reachability::Rules(rules) => {
            for rule in rules {
                for name in std::iter::once(&rule.from).chain(&rule.to) {
                    if !names.contains(name.as_str()) {
                        return Err(format!(
                            "reachability: '{}' is not a member (members: {})",
                            name.escape_debug(),
                            names.iter().copied().collect::<Vec<_>>().join(", ")
                        ));
                    }
                }
                if rule.to.contains(&rule.from) {
                    return Err(format!("reachability: '{}' may not call itself", rule.from));
                }
            }
            if let Some(rule) = rules.iter().find(|r| r.to.iter().any(|t| t == entry)) {
                return Err(format!(
                    "reachability: '{}' may not call '{entry}': the entry member takes the formation's tasks and serves no peer",
                    rule.from
                ));
            }
            for rule in rules {
                callees
                    .entry(&rule.from)
                    .or_default()
                    .extend(rule.to.iter().map(String::as_str));
            }
        }
    }
    Ok(callees)
}

/// 6. Every callee accepts peer tasks; 7. if any edge exists, every door authenticates.
fn callees_may_be_called(
    callees: &Edges<'_>,
    loaded: &BTreeMap<&str, crate::json::manifest::Loaded>,
) -> Result<(), String> {
    let called: BTreeSet<&str> = callees.values().flatten().copied().collect();
    for name in &called {
        if !loaded[name].manifest.exports.peer_tasks.accept {
            return Err(format!(
                "member '{name}' is called by a peer but its capsule ({}) does not accept peer tasks (set exports.peer_tasks.accept)",
                loaded[name].path.display()
            ));
        }
    }
    // 7. Any edge: every door authenticates.
    if !called.is_empty()
        && let Some((name, l)) = loaded
            .iter()
            .find(|(_, l)| l.manifest.network.authentication.is_none())
    {
        return Err(format!(
            "member '{name}': members call each other, so every member's door must authenticate, and its capsule ({}) declares no network.authentication",
            l.path.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A project directory, removed on drop, holding capsules `a` (no peer tasks), `b` and `c`
    /// (accepting peer tasks), every door authenticated, each with an executable handler.
    struct Project(PathBuf);

    impl Drop for Project {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    impl Project {
        fn new() -> Project {
            static N: AtomicU64 = AtomicU64::new(0);
            let dir = std::env::temp_dir().join(format!(
                "mur-unit-admission-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            // Canonical, as `admit` makes the roster's directory.
            let project = Project(fs::canonicalize(&dir).unwrap());
            project.capsule("a", &manifest("a", false, true));
            project.capsule("b", &manifest("b", true, true));
            project.capsule("c", &manifest("c", true, true));
            project
        }

        fn capsule(&self, name: &str, manifest: &Value) {
            let dir = self.0.join(name);
            fs::create_dir_all(&dir).unwrap();
            let handler = dir.join("handler.sh");
            fs::write(&handler, "#!/bin/sh\ncat\n").unwrap();
            fs::set_permissions(&handler, fs::Permissions::from_mode(0o755)).unwrap();
            self.write(&format!("{name}/murmur.json"), &manifest.to_string());
        }

        /// Write `text` at `path`, relative to the project.
        fn write(&self, path: &str, text: &str) {
            let path = self.0.join(path);
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
            let roster_path = project.0.join(case.at);
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
                let fragment = fragment.replace("{project}", &project.0.display().to_string());
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
        let formation = admit(&project.0.join("roster.json")).unwrap();
        assert_eq!(formation.entry().name, "a");
        assert_eq!(formation.peers().count(), 2);
        assert!(formation.members.iter().all(|m| m.callees.is_empty()));
    }
}
