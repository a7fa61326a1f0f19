//! A directory held by its descriptor: opened without following a symbolic link, and everything
//! inside it — list, read, write, rename, unlink — done relative to that descriptor.
//!
//! Invariants:
//! - A [`Dir`] is opened `O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC`: a symbolic link in its place is
//!   refused (`ELOOP`), never followed. Only the last component is guarded by [`Dir::open`]; the
//!   murmur home's own directories are each opened from their parent's descriptor
//!   ([`Dir::open_child`]), so no link is followed below `$HOME`.
//! - Every operation on an entry takes a *name* (one path component) and goes through the
//!   directory's descriptor (`openat`, `mkdirat`, `renameat`, `unlinkat`): a directory renamed
//!   away and replaced by a link after it was opened redirects nothing.
//! - Files are opened `O_NOFOLLOW|O_NONBLOCK`: a link is refused, a FIFO never blocks a reader.
//! - The path a [`Dir`] keeps is for messages only; nothing re-resolves it.
//! - A directory is re-moded only through a descriptor of that very directory (`fchmod`, or
//!   `/proc/self/fd/<fd>` of an `O_PATH|O_NOFOLLOW` one), after `fstat` on it shows it ours;
//!   never by a name, which a link could redirect.

use std::ffi::{CString, OsStr, OsString};
use std::fs::{File, Metadata, Permissions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::fs::{PRIVATE_FILE_MODE, ReadRefusal, open_refusal, read_bounded};

/// An open directory. Cloning shares the one descriptor.
#[derive(Debug, Clone)]
pub struct Dir(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    file: File,
    path: PathBuf,
}

/// A small regular file read whole through a [`Dir`], with what `fstat` said of the very file
/// read (not of whatever holds its name now).
#[derive(Debug)]
pub struct Small {
    pub bytes: Vec<u8>,
    pub meta: Metadata,
    file: File,
}

impl Small {
    /// `fchmod` the file that was read.
    pub fn set_mode(&self, mode: u32) -> io::Result<()> {
        self.file.set_permissions(Permissions::from_mode(mode))
    }
}

/// Why opening `path` as a directory failed, for a message: a link and a non-directory are
/// named as such.
pub fn explain(path: &Path, err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::ELOOP) => format!(
            "{} is a symbolic link: mur follows no link for a directory it keeps; \
             fix: remove the link (mur creates the directory itself)",
            path.display()
        ),
        Some(libc::ENOTDIR) => format!("{}: exists and is not a directory", path.display()),
        _ => format!("{}: {err}", path.display()),
    }
}

/// `name` as a C string naming one entry: not empty, not `.` or `..`, no `/`, no NUL.
fn component(name: &OsStr) -> io::Result<CString> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{:?} is not a single file name", name),
        ));
    }
    CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a name"))
}

/// `-1` as the `io::Error` of `errno`; anything else as `Ok`.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// The owner's read, write and search bits: what emptying a directory takes.
const OWNER_RWX: u32 = 0o700;

const DIR_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;

impl Dir {
    /// Open `path` as a directory, refusing a symbolic link in its place (`ELOOP`) and anything
    /// that is not a directory (`ENOTDIR`); [`explain`] words either.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .map_err(|err| {
                link_is_eloop(err, || {
                    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
                })
            })?;
        Ok(Self(Arc::new(Inner {
            file,
            path: path.to_path_buf(),
        })))
    }

    /// The path this directory was opened as (or under): for messages only.
    pub fn path(&self) -> &Path {
        &self.0.path
    }

    /// This directory, renamed to `name` in `parent`: known by that path from now on. The same
    /// descriptor when no clone shares it, else a copy of it.
    pub fn renamed(self, parent: &Dir, name: impl AsRef<OsStr>) -> io::Result<Self> {
        let path = parent.join(name);
        let file = match Arc::try_unwrap(self.0) {
            Ok(inner) => inner.file,
            Err(shared) => shared.file.try_clone()?,
        };
        Ok(Self(Arc::new(Inner { file, path })))
    }

    /// The display path of an entry.
    pub fn join(&self, name: impl AsRef<OsStr>) -> PathBuf {
        self.0.path.join(name.as_ref())
    }

    fn fd(&self) -> libc::c_int {
        self.0.file.as_raw_fd()
    }

    /// `openat(self, name, flags)` as an owned descriptor.
    fn open_at(&self, name: &OsStr, flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
        let c_name = component(name)?;
        // SAFETY: `c_name` is a NUL-terminated string alive for the call; the descriptor is ours.
        let fd = check(unsafe {
            libc::openat(self.fd(), c_name.as_ptr(), flags, mode as libc::c_uint)
        })?;
        // SAFETY: `fd` was just returned by openat and is owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// The subdirectory `name`, opened through this one without following a link.
    pub fn open_child(&self, name: impl AsRef<OsStr>) -> io::Result<Self> {
        let name = name.as_ref();
        let fd = self
            .open_at(name, DIR_FLAGS, 0)
            .map_err(|err| link_is_eloop(err, || self.is_link(name)))?;
        Ok(Self(Arc::new(Inner {
            file: File::from(fd),
            path: self.join(name),
        })))
    }

    /// The subdirectory `name`, created (`mkdirat`, mode `0700`) if missing, then opened as
    /// [`Dir::open_child`] does. Its mode is the caller's to check: the umask may narrow it.
    pub fn create_child(&self, name: impl AsRef<OsStr>) -> io::Result<Self> {
        let name = name.as_ref();
        let c_name = component(name)?;
        // SAFETY: `c_name` is a NUL-terminated string alive for the call.
        let made = check(unsafe { libc::mkdirat(self.fd(), c_name.as_ptr(), 0o700) });
        match made {
            Err(err) if err.raw_os_error() != Some(libc::EEXIST) => return Err(err),
            _ => {}
        }
        self.open_child(name)
    }

    /// Whether the entry `name` is a symbolic link (`fstatat` without following it).
    fn is_link(&self, name: &OsStr) -> bool {
        self.entry(name).is_ok_and(|e| e.is_link())
    }

    /// `fstat` of the directory itself.
    pub fn stat(&self) -> io::Result<Metadata> {
        self.0.file.metadata()
    }

    /// `fchmod` of the directory itself.
    pub fn set_mode(&self, mode: u32) -> io::Result<()> {
        self.0.file.set_permissions(Permissions::from_mode(mode))
    }

    /// The whole of the entry `name`, if it is a regular file of at most `max` bytes, opened
    /// without following a link and without blocking on a FIFO.
    pub fn read_small(&self, name: impl AsRef<OsStr>, max: u64) -> Result<Small, ReadRefusal> {
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
        let file = File::from(
            self.open_at(name.as_ref(), flags, 0)
                .map_err(open_refusal)?,
        );
        let (bytes, meta) = read_bounded(&file, max)?;
        Ok(Small { bytes, meta, file })
    }

    /// Write `bytes` to the entry `name` at mode `0600`: into a staging entry beside it (named
    /// `.<name>.<pid>.<n>.tmp`, created `O_EXCL|O_NOFOLLOW`), then `renameat` onto it. A reader
    /// sees the old file, the new one, or none. The staging entry is removed if a step fails.
    /// The `Err` names the path; it never carries `bytes`.
    pub fn write_private(&self, name: impl AsRef<OsStr>, bytes: &[u8]) -> Result<(), String> {
        self.write_staged(name.as_ref(), bytes, false)
    }

    /// [`Dir::write_private`], the file synced before its rename: after a machine crash the name
    /// holds the old file or the whole new one (the rename is durable once [`Dir::sync`]ed).
    pub fn write_private_synced(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        self.write_staged(name.as_ref(), bytes, true)
    }

    fn write_staged(&self, name: &OsStr, bytes: &[u8], sync: bool) -> Result<(), String> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let (pid, n) = (std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
        let mut staging = OsString::from(".");
        staging.push(name);
        staging.push(format!(".{pid}.{n}.tmp"));
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let written = (|| -> io::Result<()> {
            let mut file = File::from(self.open_at(&staging, flags, PRIVATE_FILE_MODE)?);
            // The umask may have removed bits from the mode; set exactly 0600.
            file.set_permissions(Permissions::from_mode(PRIVATE_FILE_MODE))?;
            file.write_all(bytes)?;
            if sync {
                file.sync_data()?;
            }
            self.rename(&staging, name)
        })();
        written.map_err(|err| {
            let _ = self.unlink(&staging);
            format!("cannot write {}: {err}", self.join(name).display())
        })
    }

    /// Write `bytes` over the regular file `name` in place — when it is one: ours, mode `0600`,
    /// one link — else as [`Dir::write_private`] does, after removing whatever is there. For a
    /// file no one reads while it is written: a reader could see it half-written.
    ///
    /// Why in place: a new inode per write is what some filesystems make slow. ext4 will not
    /// reuse an inode freed in the last minute, so after thousands of create-and-delete rounds
    /// each new inode is found by scanning past all those (`recently_deleted`) — a task's files
    /// written afresh took 0.3-1.2 ms where rewriting them takes 25 µs, on this project's VM.
    pub fn overwrite_private(&self, name: impl AsRef<OsStr>, bytes: &[u8]) -> Result<(), String> {
        let name = name.as_ref();
        let len = bytes.len() as u64;
        if let Some((mut file, size)) = self.open_private(name)
            && file
                .write_all(bytes)
                // Cut only a longer old file: a spare's is empty.
                .and_then(|()| {
                    if size > len {
                        file.set_len(len)
                    } else {
                        Ok(())
                    }
                })
                .is_ok()
        {
            return Ok(());
        }
        // A link, a FIFO, a directory, a stranger's file or a failed write: start afresh.
        self.remove_tree(name)
            .map_err(|err| format!("cannot replace {}: {err}", self.join(name).display()))?;
        self.write_private(name, bytes)
    }

    /// The regular file `name` opened to append to, created at mode `0600` if missing: a log a
    /// session writes line by line for as long as it runs. Refused (`EPERM`) when what holds the
    /// name is not a regular file of ours, mode `0600`, with one link — so appending cannot
    /// reach another file through a link of any kind. Opened without following a link or
    /// blocking on a FIFO.
    pub fn append_private(&self, name: impl AsRef<OsStr>) -> io::Result<File> {
        use std::os::unix::fs::MetadataExt;
        let flags = libc::O_WRONLY
            | libc::O_CREAT
            | libc::O_APPEND
            | libc::O_NOFOLLOW
            | libc::O_NONBLOCK
            | libc::O_CLOEXEC;
        let file = File::from(self.open_at(name.as_ref(), flags, PRIVATE_FILE_MODE)?);
        let meta = file.metadata()?;
        if !meta.is_file() || meta.nlink() != 1 || meta.uid() != super::proc::euid() {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
        // The umask may have taken bits away, or an old file kept wider ones: exactly 0600.
        if meta.mode() & 0o7777 != PRIVATE_FILE_MODE {
            file.set_permissions(Permissions::from_mode(PRIVATE_FILE_MODE))?;
        }
        Ok(file)
    }

    /// The entry `name` opened to read, without following a link or blocking on a FIFO; the
    /// caller checks what it is (`metadata`) before trusting it.
    pub fn open_read(&self, name: impl AsRef<OsStr>) -> io::Result<File> {
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
        Ok(File::from(self.open_at(name.as_ref(), flags, 0)?))
    }

    /// Empty the regular file `name` in place when it is ours, mode `0600`, one link (as
    /// [`Dir::overwrite_private`] would write it); remove whatever else is there.
    pub fn clear_private(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        let name = name.as_ref();
        match self.open_private(name) {
            Some((_, 0)) => Ok(()),
            Some((file, _)) => file.set_len(0),
            None => self.remove_tree(name),
        }
    }

    /// The entry `name` opened for writing, if it is a regular file of ours, mode `0600`, with
    /// one link — so writing it cannot reach a file elsewhere through a link of any kind — and
    /// its size. Opened without following a link or blocking on a FIFO.
    fn open_private(&self, name: &OsStr) -> Option<(File, u64)> {
        use std::os::unix::fs::MetadataExt;
        let flags = libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
        let file = File::from(self.open_at(name, flags, 0).ok()?);
        let meta = file.metadata().ok()?;
        let ours = meta.is_file()
            && meta.nlink() == 1
            && meta.uid() == super::proc::euid()
            && meta.mode() & 0o7777 == PRIVATE_FILE_MODE;
        ours.then_some((file, meta.len()))
    }

    /// The subdirectory `name`, opened as [`Dir::open_child`] does, to be emptied: with its
    /// owner's `rwx` given back first when it is ours and lacks any, so that it can be listed
    /// and its entries unlinked. One that cannot even be opened for want of them (`000`,
    /// `0300`: `EACCES`) is given them by `Dir::grant_owner` and opened again; a link is
    /// refused as ever, never followed.
    ///
    /// Why: a handler owns what is in its task directory and may chmod any of it; the
    /// directory is still mur's to remove, and the owner can always re-mode what it owns (as
    /// `chmod -R u+rwx` then `rm -rf` would). Nothing of another uid is re-moded.
    pub fn open_child_to_empty(&self, name: impl AsRef<OsStr>) -> io::Result<Self> {
        let name = name.as_ref();
        let dir = match self.open_child(name) {
            Err(err) if err.raw_os_error() == Some(libc::EACCES) => {
                self.grant_owner(name).map_err(|_| err)?;
                self.open_child(name)?
            }
            opened => opened?,
        };
        // Best effort: where it cannot be re-moded (a read-only filesystem), the removal's own
        // error says what kept it.
        let _ = dir.restore_owner_access();
        Ok(dir)
    }

    /// Give this directory back its owner's `rwx` (`fchmod` through its own descriptor) when it
    /// is ours and lacks any; one of another uid, or already `u+rwx`, is left as it is.
    pub fn restore_owner_access(&self) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let meta = self.stat()?;
        if meta.uid() != super::proc::euid() || meta.mode() & OWNER_RWX == OWNER_RWX {
            return Ok(());
        }
        self.set_mode(meta.mode() & 0o777 | OWNER_RWX)
    }

    /// Give the subdirectory `name` its owner's `rwx` when it is ours, without being able to
    /// read it: opened `O_PATH|O_DIRECTORY|O_NOFOLLOW` (which takes no permission on it, and
    /// refuses a link or a non-directory), checked by `fstat` on that descriptor, and re-moded
    /// through it. `fchmod` refuses an `O_PATH` descriptor (`EBADF`), so the mode is set
    /// through `/proc/self/fd/<fd>`, which names that very inode whatever is at `name` by
    /// then — the way systemd's `fchmod_opath` does. The `Err` is `EACCES` for a directory of
    /// another uid, or whatever failed (no `/proc` mounted: `ENOENT`).
    #[cfg(target_os = "linux")]
    fn grant_owner(&self, name: &OsStr) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let held = File::from(self.open_at(name, flags, 0)?);
        let meta = held.metadata()?;
        if !meta.is_dir() || meta.uid() != super::proc::euid() {
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        let by_descriptor = format!("/proc/self/fd/{}", held.as_raw_fd());
        std::fs::set_permissions(
            by_descriptor,
            Permissions::from_mode(meta.mode() & 0o777 | OWNER_RWX),
        )
    }

    /// Without `O_PATH` there is no way to re-mode a directory we cannot open by a descriptor
    /// of its own, and a re-mode by name could be sent through a link: refused (`EACCES`).
    #[cfg(not(target_os = "linux"))]
    fn grant_owner(&self, _name: &OsStr) -> io::Result<()> {
        Err(io::Error::from_raw_os_error(libc::EACCES))
    }

    /// Hand this directory to `ids` (`fchown` through its own descriptor): a handler's task
    /// directory while it runs, and back to mur after.
    pub fn set_owner(&self, ids: super::user::Ids) -> io::Result<()> {
        std::os::unix::fs::fchown(&self.0.file, Some(ids.uid), Some(ids.gid))
    }

    /// `fsync` this directory: a rename or creation in it survives a crash of the machine once
    /// this returns.
    pub fn sync(&self) -> io::Result<()> {
        self.0.file.sync_all()
    }

    /// `renameat(self, from, self, to)`.
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        self.rename_into(from, self, to)
    }

    /// `unlinkat` the entry `name` (a link is removed, never followed); one already gone is not
    /// an error.
    pub fn unlink(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        self.unlink_at(name.as_ref(), 0).or_else(absent_is_ok)
    }

    fn unlink_at(&self, name: &OsStr, flags: libc::c_int) -> io::Result<()> {
        let c_name = component(name)?;
        // SAFETY: `c_name` is a NUL-terminated string alive for the call.
        check(unsafe { libc::unlinkat(self.fd(), c_name.as_ptr(), flags) })?;
        Ok(())
    }

    /// Remove the entry `name` and, if it is a directory, everything under it, following no
    /// link: each directory is opened through its parent's descriptor and emptied with
    /// `unlinkat`. One already gone is not an error.
    ///
    /// No recursion, and two descriptors at most, however deep the tree: every directory found
    /// inside is first renamed up to the top of the tree being removed (`.flat.<n>`), then
    /// emptied from there. A handler's task directory is the handler's to fill — a nest ten
    /// thousand deep would otherwise exhaust a task thread's stack or the descriptor table.
    ///
    /// Modes do not keep a tree of ours in place: a directory of ours that a handler chmod-ed
    /// to `000` (or `0500`) is given back its owner's `rwx` on the way down, as the owner
    /// could by hand, and only through a descriptor of that very directory
    /// ([`Dir::open_child_to_empty`]). A directory owned by another uid is never re-moded.
    pub fn remove_tree(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        let name = name.as_ref();
        match self.unlink_at(name, 0) {
            Ok(()) => return Ok(()),
            Err(err) if matches!(err.raw_os_error(), Some(libc::EISDIR | libc::EPERM)) => {}
            Err(err) => return absent_is_ok(err),
        }
        let top = match self.open_child_to_empty(name) {
            Ok(top) => top,
            Err(err) => return absent_is_ok(err),
        };
        let mut pending = Vec::new();
        let mut moved = 0;
        top.flatten(None, &mut pending, &mut moved)?;
        while let Some(sub) = pending.pop() {
            match top.open_child_to_empty(&sub) {
                Ok(dir) => dir.flatten(Some(&top), &mut pending, &mut moved)?,
                Err(err) => absent_is_ok(err)?,
            }
            top.unlink_at(&sub, libc::AT_REMOVEDIR)
                .or_else(absent_is_ok)?;
        }
        self.unlink_at(name, libc::AT_REMOVEDIR)
            .or_else(absent_is_ok)
    }

    /// Unlink everything in this directory that is not a directory; note each directory in
    /// `pending` — moved up into `top` under a fresh name first, when given (this directory
    /// being one level or more below it).
    fn flatten(
        &self,
        top: Option<&Dir>,
        pending: &mut Vec<OsString>,
        moved: &mut u64,
    ) -> io::Result<()> {
        for entry in self.names()? {
            match self.unlink_at(&entry, 0) {
                Ok(()) => continue,
                Err(err) if matches!(err.raw_os_error(), Some(libc::EISDIR | libc::EPERM)) => {}
                Err(err) => {
                    absent_is_ok(err)?;
                    continue;
                }
            }
            match top {
                Some(top) => pending.extend(self.move_up(&entry, top, moved)?),
                None => pending.push(entry),
            }
        }
        Ok(())
    }

    /// Rename the directory `entry` up into `top` under a fresh name (`.flat.<n>`), skipping
    /// names the tree already uses (a handler may have made one): the new name, or `None` when
    /// `entry` vanished meanwhile.
    fn move_up(&self, entry: &OsStr, top: &Dir, moved: &mut u64) -> io::Result<Option<OsString>> {
        let mut granted = false;
        loop {
            let fresh = OsString::from(format!(".flat.{moved}"));
            *moved += 1;
            match self.rename_into(entry, top, &fresh) {
                Ok(()) => return Ok(Some(fresh)),
                Err(err) if matches!(err.raw_os_error(), Some(libc::EEXIST | libc::ENOTEMPTY)) => {}
                // Moving a directory to another parent rewrites its `..`, which takes write
                // permission on it: give the owner's back, then try again (once: a second
                // EACCES is the error).
                Err(err) if err.raw_os_error() == Some(libc::EACCES) && !granted => {
                    self.grant_owner(entry).map_err(|_| err)?;
                    granted = true;
                }
                Err(err) => return absent_is_ok(err).map(|()| None),
            }
        }
    }

    /// `renameat(self, from, to_dir, to)`.
    fn rename_into(&self, from: &OsStr, to_dir: &Dir, to: &OsStr) -> io::Result<()> {
        let (from, to) = (component(from)?, component(to)?);
        // SAFETY: both names are NUL-terminated strings alive for the call; both descriptors
        // are ours.
        check(unsafe { libc::renameat(self.fd(), from.as_ptr(), to_dir.fd(), to.as_ptr()) })?;
        Ok(())
    }
}

/// `O_DIRECTORY|O_NOFOLLOW` on a link fails `ENOTDIR` on Linux (`ELOOP` elsewhere): make a
/// link `ELOOP` everywhere, so callers tell a link from a regular file by the error alone.
fn link_is_eloop(err: io::Error, is_link: impl FnOnce() -> bool) -> io::Error {
    if err.raw_os_error() == Some(libc::ENOTDIR) && is_link() {
        io::Error::from_raw_os_error(libc::ELOOP)
    } else {
        err
    }
}

fn absent_is_ok(err: io::Error) -> io::Result<()> {
    if err.kind() == io::ErrorKind::NotFound {
        Ok(())
    } else {
        Err(err)
    }
}

mod entries;
pub use entries::Entry;
#[cfg(test)]
mod tests;
