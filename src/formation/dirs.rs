//! `~/.murmur/formations/<frm_id>/`: one directory per launched formation, with its ownership
//! marker and one workdir per peer member; ended ones pruned, the most recent 10 per project kept.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::id::FormationId;
use crate::sys::fs;

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

/// `~/.murmur/formations`, created at `0700` (with `~/.murmur`).
pub fn formations_dir() -> Result<PathBuf, String> {
    let home = crate::home::location()?;
    fs::ensure_private_dir(&home)?;
    let dir = home.join("formations");
    fs::ensure_private_dir(&dir)?;
    Ok(dir)
}

/// Create `<formations>/<id>/` with its marker; the directory.
pub fn create(formations: &Path, id: &FormationId, marker: &Marker) -> Result<PathBuf, String> {
    let dir = formations.join(id.as_str());
    fs::ensure_private_dir(&dir)?;
    let body = serde_json::to_vec_pretty(marker).expect("a marker always serializes");
    fs::write_private(&dir.join(MARKER), &body)?;
    Ok(dir)
}

/// Remove the ended formation directories of `project_dir` beyond the newest [`KEEP_ENDED`];
/// the ones removed. A directory whose launcher is alive, or whose marker cannot be read, is
/// never touched.
pub fn prune_ended(formations: &Path, project_dir: &Path) -> Vec<PathBuf> {
    let Ok(listing) = std::fs::read_dir(formations) else {
        return Vec::new();
    };
    let mut ended: Vec<(String, PathBuf)> = listing
        .flatten()
        .filter_map(|item| {
            let name = item.file_name().into_string().ok()?;
            FormationId::parse(&name).ok()?;
            let path = item.path();
            let bytes = fs::read_small_regular(&path.join(MARKER), 64 * 1024).ok()?;
            let marker: Marker = serde_json::from_slice(&bytes).ok()?;
            let gone = matches!(
                crate::process::check(marker.launcher_pid, &marker.launcher_start),
                Err(crate::process::NotSignallable::Gone(_))
            );
            (marker.project_dir == project_dir && gone).then_some((name, path))
        })
        .collect();
    ended.sort_by(|a, b| b.0.cmp(&a.0));
    ended
        .into_iter()
        .skip(KEEP_ENDED)
        .filter(|(_, path)| std::fs::remove_dir_all(path).is_ok())
        .map(|(_, path)| path)
        .collect()
}
