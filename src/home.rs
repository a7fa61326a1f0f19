//! The murmur home, `$HOME/.murmur`, and the directories `mur` keeps in it.

use std::path::{Path, PathBuf};

use crate::sys::fs::ensure_private_dir;

/// `$HOME/.murmur`, resolved without touching the filesystem.
///
/// The `Err` is `HOME` unset, empty or relative: a relative home would put records wherever the
/// current directory happens to be, where no other `mur` would look.
pub fn location() -> Result<PathBuf, String> {
    match std::env::var_os("HOME") {
        Some(home) if Path::new(&home).is_absolute() => Ok(Path::new(&home).join(".murmur")),
        Some(home) if !home.is_empty() => Err(format!(
            "HOME is '{}', not an absolute path; mur keeps its state in $HOME/.murmur",
            Path::new(&home).display()
        )),
        _ => Err("HOME is not set; mur keeps its state in $HOME/.murmur".to_string()),
    }
}

/// `~/.murmur/running`, resolved without creating or re-moding anything: for readers that must
/// leave a missing directory missing.
pub fn running_location() -> Result<PathBuf, String> {
    Ok(location()?.join("running"))
}

/// `~/.murmur/running` for a reader that may prune: held at `0700` (with `~/.murmur`) if it
/// exists, left missing if it does not. The `Err` names a path that is not a usable directory.
///
/// A directory that exists but cannot be re-moded (a read-only filesystem) is still read: only
/// a running directory that cannot be read fails a reader (DESIGN.md §6). `applet` warns so.
pub fn running_dir_if_present(applet: &str) -> Result<PathBuf, String> {
    let dir = running_location()?;
    if std::fs::symlink_metadata(&dir).is_ok() {
        return match running_dir() {
            Err(why) if std::fs::metadata(&dir).is_ok_and(|m| m.is_dir()) => {
                crate::cli::warn(applet, &format!("{why}; reading it as it is"));
                Ok(dir)
            }
            held => held,
        };
    }
    Ok(dir)
}

/// `~/.murmur/running`, created if missing and held at `0700` inside a `~/.murmur` held at
/// `0700`: for anything that writes or removes there.
pub fn running_dir() -> Result<PathBuf, String> {
    let home = location()?;
    ensure_private_dir(&home)?;
    let dir = home.join("running");
    ensure_private_dir(&dir)?;
    Ok(dir)
}
