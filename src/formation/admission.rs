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
mod tests;
