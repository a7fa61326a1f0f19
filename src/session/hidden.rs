//! What no handler may reach, whatever its sandbox grants: every place mur knows that holds a
//! token or a key.
//!
//! That is more than the session's own murmur home. A handler of a session kept in
//! `$MURMUR_HOME` may run with its workdir at `~`, where the default `~/.murmur` of the same user
//! holds other sessions' operator tokens; under `sudo` the invoking user's `~/.murmur` is one
//! `..` away; a formation member's mounted directory (`--formation-dir`, `MURMUR_FORMATION_DIR`)
//! holds its door key — with which any peer's `mft1` token can be minted — and a token for each
//! callee. Landlock grants whole trees, so each of these must sit outside every granted tree, or
//! the tree is granted entry by entry around it ([`super::sandbox`]).
//!
//! Invariant: every path is absolute and resolved as far as it exists (links followed, as
//! Landlock follows them when a rule is added), and the list holds each once. A place that does
//! not exist yet is still listed: a tree containing it is granted around it, so a handler cannot
//! make it before a later session does.

use std::path::{Path, PathBuf};

/// One place no handler may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// Absolute, resolved as far as it exists.
    pub path: PathBuf,
    /// What it is, for messages: "the murmur home", "the formation directory"…
    pub what: String,
}

/// The places no handler of this session may reach: the murmur home it keeps its record in
/// first, then the default `$HOME/.murmur`, `$MURMUR_HOME`, the `~/.murmur` of the user who ran
/// `sudo`, and `formation_dir`. The `Err`: the session's own home cannot be named.
pub fn places(formation_dir: Option<&Path>) -> Result<Vec<Place>, String> {
    let own = crate::home::location()?;
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|home| home.is_absolute())
        .map(|home| home.join(".murmur"));
    let murmur_home = std::env::var_os("MURMUR_HOME")
        .map(PathBuf::from)
        .filter(|path| path.is_absolute());
    let sudoer = std::env::var_os("SUDO_USER").and_then(|user| {
        let home = crate::sys::user::home_of(&user)?.join(".murmur");
        Some((home, user))
    });
    let formation = formation_dir.map(|dir| std::path::absolute(dir).unwrap_or(dir.into()));
    let named = [
        Some((own, "the murmur home".to_string())),
        home.map(|path| (path, "the default murmur home".into())),
        murmur_home.map(|path| (path, "MURMUR_HOME".into())),
        sudoer.map(|(path, user)| {
            let user = user.to_string_lossy();
            (path, format!("the murmur home of {user} (SUDO_USER)"))
        }),
        formation.map(|path| (path, "the formation directory".into())),
    ];
    let mut places: Vec<Place> = Vec::new();
    for (path, what) in named.into_iter().flatten() {
        let path = resolved(&path);
        if !places.iter().any(|place| place.path == path) {
            places.push(Place { path, what });
        }
    }
    Ok(places)
}

/// `path` with its longest existing ancestor resolved (links followed) and the rest as written:
/// what a rule for it, or for a tree around it, would name.
fn resolved(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            return missing
                .iter()
                .rev()
                .fold(real, |real, part| real.join(part));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tail_is_kept_under_its_resolved_ancestor() {
        let scratch = crate::scratch::Scratch::new("hidden");
        let real = scratch.join("real");
        std::fs::create_dir(&real).unwrap();
        let link = scratch.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let real = std::fs::canonicalize(&real).unwrap();
        assert_eq!(resolved(&link.join("a/b")), real.join("a/b"));
        assert_eq!(resolved(&link), real);
    }
}
