//! Looking into a [`Dir`] without opening what is in it: its names, and what `fstatat` says of
//! one entry (never following a link).
//!
//! On Linux a listing is `getdents64(2)` on the directory's own descriptor, rewound first: three
//! system calls for a small directory. `fdopendir` would take a descriptor of its own (a dup)
//! and, in musl, check and set its flags again — nine calls for the same names, on every task's
//! directory several times a task.

use std::ffi::{OsStr, OsString};
use std::fs::Metadata;
use std::io;

use super::{Dir, check, component};

/// What an entry is, as `fstatat(AT_SYMLINK_NOFOLLOW)` says (a link is described, never
/// followed), or as `fstat` says of an open directory ([`Entry::of`]): enough to tell whether a
/// name still holds the very inode a descriptor holds, and whether it is ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub dev: u64,
    pub ino: u64,
    pub uid: u32,
    /// The file type and permission bits (`st_mode`).
    pub mode: u32,
}

// `mode_t` is `u32` on Linux, `u16` on macOS.
#[allow(clippy::unnecessary_cast)]
const TYPE_BITS: u32 = libc::S_IFMT as u32;
#[allow(clippy::unnecessary_cast)]
const DIRECTORY: u32 = libc::S_IFDIR as u32;
#[allow(clippy::unnecessary_cast)]
const LINK: u32 = libc::S_IFLNK as u32;

impl Entry {
    pub fn is_dir(&self) -> bool {
        self.mode & TYPE_BITS == DIRECTORY
    }

    pub fn is_link(&self) -> bool {
        self.mode & TYPE_BITS == LINK
    }

    /// The same of an open file's `fstat`.
    pub fn of(meta: &Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            uid: meta.uid(),
            mode: meta.mode(),
        }
    }

    /// Whether `other` is the same inode.
    pub fn same_inode(&self, other: &Self) -> bool {
        (self.dev, self.ino) == (other.dev, other.ino)
    }
}

impl Dir {
    /// What the entry `name` is, without following a link.
    #[allow(clippy::unnecessary_cast)] // `struct stat`'s field types differ between platforms
    pub fn entry(&self, name: impl AsRef<OsStr>) -> io::Result<Entry> {
        let c_name = component(name.as_ref())?;
        let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `c_name` is NUL-terminated and `stat` points at writable space for one
        // `struct stat`, read only if the call succeeded (and so filled it).
        check(unsafe {
            libc::fstatat(
                self.fd(),
                c_name.as_ptr(),
                stat.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })?;
        // SAFETY: fstatat returned 0, so it wrote the whole struct.
        let stat = unsafe { stat.assume_init() };
        Ok(Entry {
            dev: stat.st_dev as u64,
            ino: stat.st_ino as u64,
            uid: stat.st_uid,
            mode: stat.st_mode as u32,
        })
    }

    /// The names in this directory (without `.` and `..`), in no particular order. Two threads
    /// must not list one `Dir` at once: they share its offset.
    #[cfg(target_os = "linux")]
    pub fn names(&self) -> io::Result<Vec<OsString>> {
        use std::os::unix::ffi::OsStringExt;
        /// `getdents64`'s buffer, aligned as the records it holds are.
        #[repr(C, align(8))]
        struct Records([u8; 4096]);
        // Every listing starts at the beginning, whatever an earlier one left.
        // SAFETY: lseek on a descriptor this value holds open.
        if unsafe { libc::lseek(self.fd(), 0, libc::SEEK_SET) } == -1 {
            return Err(io::Error::last_os_error());
        }
        let mut records = Records([0; 4096]);
        let mut names = Vec::new();
        loop {
            // SAFETY: the buffer is writable for its whole length, which is what is passed.
            let got = unsafe {
                libc::syscall(
                    libc::SYS_getdents64,
                    self.fd(),
                    records.0.as_mut_ptr(),
                    records.0.len(),
                )
            };
            let Ok(got) = usize::try_from(got) else {
                return Err(io::Error::last_os_error());
            };
            if got == 0 {
                return Ok(names);
            }
            // Each record: d_ino (8), d_off (8), d_reclen (2), d_type (1), the NUL-ended name.
            let mut at = 0;
            while let Some(record) = records.0[..got.min(records.0.len())].get(at..) {
                let Some(&[lo, hi]) = record.get(16..18) else {
                    break;
                };
                let len = usize::from(u16::from_ne_bytes([lo, hi]));
                let Some(name) = record.get(19..len) else {
                    return Err(io::Error::from_raw_os_error(libc::EIO));
                };
                let name = name.split(|&b| b == 0).next().unwrap_or_default();
                if name != b"." && name != b".." {
                    names.push(OsString::from_vec(name.to_vec()));
                }
                at += len;
            }
        }
    }

    /// The names in this directory (without `.` and `..`), in no particular order, through a
    /// `DIR` stream on a copy of its descriptor.
    #[cfg(not(target_os = "linux"))]
    pub fn names(&self) -> io::Result<Vec<OsString>> {
        // SAFETY: F_DUPFD_CLOEXEC on a descriptor we hold; the result is checked.
        let dup = check(unsafe { libc::fcntl(self.fd(), libc::F_DUPFD_CLOEXEC, 0) })?;
        // SAFETY: `dup` is a fresh descriptor; on success the DIR stream owns it (closedir
        // closes it), on failure we close it here.
        let stream = unsafe { libc::fdopendir(dup) };
        if stream.is_null() {
            let err = io::Error::last_os_error();
            // SAFETY: `dup` is still ours: fdopendir failed without taking it.
            unsafe { libc::close(dup) };
            return Err(err);
        }
        let listed = read_stream(stream);
        // SAFETY: `stream` came from fdopendir and is closed exactly once.
        unsafe { libc::closedir(stream) };
        listed
    }
}

/// Every name a `DIR` stream yields but `.` and `..`.
#[cfg(not(target_os = "linux"))]
fn read_stream(stream: *mut libc::DIR) -> io::Result<Vec<OsString>> {
    use std::ffi::CStr;
    use std::os::unix::ffi::OsStringExt;
    let mut names = Vec::new();
    // SAFETY: `stream` is a valid DIR stream; rewinding resets the offset the dup shares with
    // the original descriptor, so every listing starts at the beginning.
    unsafe { libc::rewinddir(stream) };
    loop {
        // SAFETY: the errno location is this thread's own, valid for the thread's life.
        unsafe { *libc::__error() = 0 };
        // SAFETY: `stream` is a valid DIR stream, used from this thread only.
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            let err = io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(0) | None => Ok(names),
                Some(_) => Err(err),
            };
        }
        // SAFETY: a non-null readdir result points at a dirent whose d_name is NUL-terminated,
        // valid until the next readdir on this stream; the bytes are copied out at once.
        let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) }.to_bytes();
        if name != b"." && name != b".." {
            names.push(OsString::from_vec(name.to_vec()));
        }
    }
}
