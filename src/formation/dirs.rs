//! `~/.murmur/formations/<frm_id>/`: one directory per launched formation, with its ownership
//! marker and one workdir per peer member; ended ones pruned, the most recent 10 per project kept.
//!
//! All of it through directory descriptors ([`Dir`]): `formations/` and each formation directory
//! are opened without following a link, the marker is written and read by name, and an ended
//! formation is removed entry by entry (`unlinkat`), never following a link a member left in its
//! workdir.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::id::FormationId;
use crate::sys::dir::Dir;

/// The marker file's name. Member names start with a letter and hold no `.`, so it never collides
/// with a member's directory.
pub const MARKER: &str = "formation.json";
/// Ended formation directories kept per project.
pub const KEEP_ENDED: usize = 10;

/// Who launched a formation, from which project: the marker's contents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    pub project_dir: PathBuf,
    pub launcher_pid: u32,
    pub launcher_start: String,
}

/// `~/.murmur/formations`, created at `0700` (with `~/.murmur`), opened without following a link
/// and trusted only if the effective uid owns it (see [`crate::home`]).
pub fn formations_dir() -> Result<Dir, String> {
    Ok(crate::home::private_dir("formations")?)
}

/// Create `<formations>/<id>/` (through `formations`' descriptor, `0700`) with its marker; the
/// directory.
pub fn create(formations: &Dir, id: &FormationId, marker: &Marker) -> Result<Dir, String> {
    let dir = crate::home::create_held(formations, id.as_str())?;
    let body = serde_json::to_vec_pretty(marker).expect("a marker always serializes");
    dir.write_private(MARKER, &body)?;
    Ok(dir)
}

/// Remove the ended formation directories of `project_dir` beyond the newest [`KEEP_ENDED`];
/// the ones removed. A directory whose launcher is alive, or whose marker cannot be read or is
/// not the effective uid's, is never touched. Everything goes through `formations`' descriptor,
/// and a directory is removed without following any link inside it.
pub fn prune_ended(formations: &Dir, project_dir: &Path) -> Vec<PathBuf> {
    let Ok(names) = formations.names() else {
        return Vec::new();
    };
    let me = crate::sys::proc::euid();
    let mut ended: Vec<String> = names
        .into_iter()
        .filter_map(|name| {
            let name = name.into_string().ok()?;
            FormationId::parse(&name).ok()?;
            let small = formations
                .open_child(&name)
                .ok()?
                .read_small(MARKER, 64 * 1024)
                .ok()?;
            if small.meta.uid() != me {
                return None;
            }
            let marker: Marker = serde_json::from_slice(&small.bytes).ok()?;
            let gone = matches!(
                crate::process::check(marker.launcher_pid, &marker.launcher_start),
                Err(crate::process::NotSignallable::Gone(_))
            );
            (marker.project_dir == project_dir && gone).then_some(name)
        })
        .collect();
    ended.sort_by(|a, b| b.cmp(a));
    ended
        .into_iter()
        .skip(KEEP_ENDED)
        .filter(|name| formations.remove_tree(name).is_ok())
        .map(|name| formations.join(name))
        .collect()
}
