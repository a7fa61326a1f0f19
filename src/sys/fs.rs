//! Files that hold records and secrets: private directories, staged writes, bounded reads that
//! follow no link.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Mode of every directory `mur` creates or holds under the murmur home.
pub const PRIVATE_DIR_MODE: u32 = 0o700;
/// Mode of every record and secret file.
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// Create `dir` (one level) at `0700` if it is missing; re-mode it to `0700` if it is wider.
///
/// The mode is set with `chmod` after `mkdir`, so the process umask (even `000`) never widens it.
/// The `Err` names the path and the OS error.
pub fn ensure_private_dir(dir: &Path) -> Result<(), String> {
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(format!("{}: cannot create: {err}", dir.display())),
    }
    let meta = fs::metadata(dir).map_err(|err| format!("{}: {err}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!("{}: exists and is not a directory", dir.display()));
    }
    if meta.permissions().mode() & 0o7777 != PRIVATE_DIR_MODE {
        fs::set_permissions(dir, fs::Permissions::from_mode(PRIVATE_DIR_MODE))
            .map_err(|err| format!("{}: cannot set mode 0700: {err}", dir.display()))?;
    }
    Ok(())
}

/// Write `bytes` to `target` at mode `0600`: into a staging file beside it (named
/// `.<name>.<pid>.<n>.tmp`, so a scanner reading only `.json` never sees it half-written), then
/// renamed onto it.
///
/// A reader therefore sees the old file, the new one, or none — never a partial one. The staging
/// file is removed if any step fails. The `Err` names the path; it never carries `bytes`.
pub fn write_private(target: &Path, bytes: &[u8]) -> Result<(), String> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = target
        .file_name()
        .map_or_else(|| "file".into(), |name| name.to_string_lossy().into_owned());
    let staging = target.with_file_name(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| -> io::Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(PRIVATE_FILE_MODE)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&staging)?;
        // The umask may have removed bits from `mode`; set exactly 0600.
        file.set_permissions(fs::Permissions::from_mode(PRIVATE_FILE_MODE))?;
        file.write_all(bytes)?;
        fs::rename(&staging, target)
    })();
    written.map_err(|err| {
        let _ = fs::remove_file(&staging);
        format!("cannot write {}: {err}", target.display())
    })
}

/// Why a file could not be read as a small regular file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadRefusal {
    /// The file is not something `mur` wrote: a link, a FIFO or device, or larger than allowed.
    /// Evidence enough to remove it from a directory that holds only `mur`'s own files.
    Invalid(String),
    /// It vanished between listing and opening (a session ended meanwhile).
    Vanished,
    /// The read itself failed (`EACCES`, `EMFILE`, `EIO`…): no evidence about the file.
    Io(String),
}

/// The whole of `path`, if it is a regular file of at most `max` bytes, opened without following
/// a symbolic link and without blocking on a FIFO.
pub fn read_small_regular(path: &Path, max: u64) -> Result<Vec<u8>, ReadRefusal> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|err| match err.raw_os_error() {
            Some(libc::ENOENT) => ReadRefusal::Vanished,
            Some(libc::ELOOP) => ReadRefusal::Invalid("is a symbolic link".into()),
            _ => ReadRefusal::Io(err.to_string()),
        })?;
    let meta = file
        .metadata()
        .map_err(|err| ReadRefusal::Io(err.to_string()))?;
    if !meta.file_type().is_file() {
        return Err(ReadRefusal::Invalid("is not a regular file".into()));
    }
    if meta.len() > max {
        return Err(ReadRefusal::Invalid(format!(
            "is {} bytes, larger than the {max} allowed",
            meta.len()
        )));
    }
    let mut body = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1)
        .read_to_end(&mut body)
        .map_err(|err| ReadRefusal::Io(err.to_string()))?;
    if body.len() as u64 > max {
        return Err(ReadRefusal::Invalid(format!(
            "grew past the {max} bytes allowed while being read"
        )));
    }
    Ok(body)
}

/// Remove a file (a link is removed, not followed); a file already gone is not an error.
pub fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    }
}

/// The permission bits of `path`, not following a final link.
pub fn mode_of(path: &Path) -> io::Result<u32> {
    Ok(fs::symlink_metadata(path)?.permissions().mode() & 0o7777)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    struct Scratch(PathBuf);
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
    fn scratch_dir() -> Scratch {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mur-unit-fs-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    #[test]
    fn a_private_dir_is_created_0700_and_a_wide_one_is_remoded() {
        let root = scratch_dir();
        let dir = root.0.join("d");
        ensure_private_dir(&dir).unwrap();
        assert_eq!(mode_of(&dir).unwrap(), 0o700);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&dir).unwrap();
        assert_eq!(mode_of(&dir).unwrap(), 0o700);
    }

    #[test]
    fn a_file_in_the_place_of_a_dir_is_an_error_naming_it() {
        let root = scratch_dir();
        let file = root.0.join("f");
        fs::write(&file, "").unwrap();
        let err = ensure_private_dir(&file).unwrap_err();
        assert!(err.starts_with(&file.display().to_string()), "{err}");
    }

    #[test]
    fn a_private_write_is_0600_and_leaves_no_staging_file() {
        let root = scratch_dir();
        let target = root.0.join("x.json");
        write_private(&target, b"one").unwrap();
        write_private(&target, b"two").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"two");
        assert_eq!(mode_of(&target).unwrap(), 0o600);
        assert_eq!(fs::read_dir(&root.0).unwrap().count(), 1);
    }

    #[test]
    fn links_fifos_and_large_files_are_refused() {
        let root = scratch_dir();
        let big = root.0.join("big");
        fs::write(&big, vec![b'x'; 2048]).unwrap();
        assert!(matches!(
            read_small_regular(&big, 1024),
            Err(ReadRefusal::Invalid(_))
        ));
        assert_eq!(read_small_regular(&big, 4096).unwrap().len(), 2048);
        let link = root.0.join("link");
        std::os::unix::fs::symlink(&big, &link).unwrap();
        assert_eq!(
            read_small_regular(&link, 4096),
            Err(ReadRefusal::Invalid("is a symbolic link".into()))
        );
        let fifo = root.0.join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        assert!(matches!(
            read_small_regular(&fifo, 4096),
            Err(ReadRefusal::Invalid(_))
        ));
        assert_eq!(
            read_small_regular(&root.0.join("none"), 1),
            Err(ReadRefusal::Vanished)
        );
    }
}
