//! Path-based file access, for files `mur` reads but does not own (manifests, rosters): bounded
//! reads that follow no final link and never block on a FIFO. Everything under the murmur home
//! — directories `mur` keeps, records and secrets it writes, re-modes or removes — goes through a
//! directory descriptor instead ([`super::dir::Dir`]), so that no link is followed anywhere in it.

use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of every directory `mur` creates or holds under the murmur home.
pub const PRIVATE_DIR_MODE: u32 = 0o700;
/// Mode of every record and secret file.
pub const PRIVATE_FILE_MODE: u32 = 0o600;

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
        .map_err(open_refusal)?;
    read_bounded(&file, max).map(|(bytes, _)| bytes)
}

/// What an `O_NOFOLLOW` open's failure shows about the file: gone, a link, or an I/O failure
/// that proves nothing about it.
pub fn open_refusal(err: io::Error) -> ReadRefusal {
    match err.raw_os_error() {
        Some(libc::ENOENT) => ReadRefusal::Vanished,
        Some(libc::ELOOP) => ReadRefusal::Invalid("is a symbolic link".into()),
        _ => ReadRefusal::Io(err.to_string()),
    }
}

/// The one bounded read under [`read_small_regular`] and [`super::dir::Dir::read_small`]: the
/// whole of `file` (opened `O_NOFOLLOW|O_NONBLOCK`) if it is a regular file of at most `max`
/// bytes, with what `fstat` said of it.
pub fn read_bounded(file: &fs::File, max: u64) -> Result<(Vec<u8>, fs::Metadata), ReadRefusal> {
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
    Ok((body, meta))
}

/// The permission bits of `path`, not following a final link.
pub fn mode_of(path: &Path) -> io::Result<u32> {
    Ok(fs::symlink_metadata(path)?.permissions().mode() & 0o7777)
}

/// Whether `path` (following links: a program may be installed as one) is a regular file with an
/// execute bit.
pub fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The first executable regular file named `program` (a bare name, no `/`) in the directories of
/// `path`, a `PATH` value — the one lookup both the manifest's check and the spawn make, so what
/// admission accepts is what runs.
///
/// Only absolute entries are searched: an empty entry, `.` or any other relative one is skipped
/// (as hardened `execvp`s and Go's `LookPath` refuse them). It would be looked up relative to
/// wherever the lookup happens but run from the handler's workdir, and a relative entry lets
/// whoever writes the current directory choose the program.
pub fn find_on_path(program: &OsStr, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

#[cfg(test)]
mod tests;

/// Take an exclusive `flock(2)` on `file` without waiting: `Ok(true)` when taken, `Ok(false)`
/// when another open file holds one. The lock lasts as long as this open file does, and the
/// kernel drops it when the process ends however it ends (SIGKILL too): a claim that can never
/// go stale.
pub fn try_lock_exclusive(file: &fs::File) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor `file` owns for the call; no pointers.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(err)
    }
}
