//! Landlock (Linux ≥ 5.13): an unprivileged process restricts itself, and everything it starts,
//! to the file hierarchies (and, ABI ≥ 4, the TCP ports) a ruleset allows; from ABI 6 it can no
//! longer signal, or reach by an abstract Unix socket, any process outside its domain.
//!
//! The ruleset is built in the session (paths opened as `O_PATH` descriptors, the rules added),
//! and only the last two steps happen in the handler between its clone and its exec
//! ([`restrict`]: `PR_SET_NO_NEW_PRIVS`, `landlock_restrict_self`), raw calls on a descriptor,
//! no allocation: the rules of [`crate::sys::spawn`]'s child.
//!
//! Rights are asked for by ABI: a right the kernel does not know makes `landlock_create_ruleset`
//! fail, so [`Ruleset::new`] handles exactly those of the ABI found, and every grant is cut to
//! them. Handled and not granted means denied; a right the ABI does not handle (ABI 1's rename
//! across directories, which it always refuses) is outside Landlock's say.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use super::raw;

/// The system call numbers: the same on x86_64 and every asm-generic architecture (aarch64).
const SYS_CREATE_RULESET: libc::c_long = 444;
const SYS_ADD_RULE: libc::c_long = 445;
const SYS_RESTRICT_SELF: libc::c_long = 446;
/// `landlock_create_ruleset`'s flag: answer the ABI version instead.
const CREATE_RULESET_VERSION: usize = 1;
const RULE_PATH_BENEATH: usize = 1;
const RULE_NET_PORT: usize = 2;

/// Filesystem rights (`LANDLOCK_ACCESS_FS_*`).
const EXECUTE: u64 = 1 << 0;
const WRITE_FILE: u64 = 1 << 1;
pub const READ_FILE: u64 = 1 << 2;
pub const READ_DIR: u64 = 1 << 3;
/// ABI 2: link or rename a file into another directory.
const REFER: u64 = 1 << 13;
/// ABI 3: truncate a file.
const TRUNCATE: u64 = 1 << 14;
/// ABI 5: `ioctl` on a device file.
const IOCTL_DEV: u64 = 1 << 15;
/// Read and run: what the system's directories grant.
pub const READ_EXEC: u64 = EXECUTE | READ_FILE | READ_DIR;
/// Every right on a hierarchy: what a writable directory grants.
pub const ALL: u64 = (1 << 16) - 1;
/// The rights that mean anything on a file that is not a directory (others are refused there).
const FILE_RIGHTS: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
/// ABI 4: connect a TCP socket.
const CONNECT_TCP: u64 = 1 << 1;
/// ABI 6 scopes: abstract Unix sockets and signals stay inside the domain.
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

/// `struct landlock_ruleset_attr`; its size passed says which fields the caller knows.
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `struct landlock_path_beneath_attr` (packed: 12 bytes).
#[repr(C, packed)]
struct PathBeneath {
    allowed_access: u64,
    parent_fd: i32,
}

/// `struct landlock_net_port_attr`.
#[repr(C)]
struct NetPort {
    allowed_access: u64,
    port: u64,
}

/// The kernel's Landlock ABI version; the `Err` says why there is none (`ENOSYS`: not built
/// in; `EOPNOTSUPP`: built in but not enabled at boot).
pub fn abi() -> io::Result<u32> {
    // SAFETY: a null attribute with size 0 and the version flag: the kernel reads no memory.
    let version = unsafe { raw::call(SYS_CREATE_RULESET, [0, 0, CREATE_RULESET_VERSION, 0, 0, 0]) };
    version
        .map(|v| v as u32)
        .map_err(io::Error::from_raw_os_error)
}

/// The filesystem rights ABI `abi` knows.
fn fs_rights(abi: u32) -> u64 {
    match abi {
        0 => 0,
        1 => REFER - 1,
        2 => TRUNCATE - 1,
        3 | 4 => IOCTL_DEV - 1,
        _ => ALL,
    }
}

/// A ruleset being built: its descriptor is what [`restrict`] is given in the child.
#[derive(Debug)]
pub struct Ruleset {
    fd: OwnedFd,
    /// The filesystem rights it handles: every grant is cut to them.
    handled: u64,
}

impl Ruleset {
    /// A ruleset for ABI `abi` handling every filesystem right it knows, TCP connects too when
    /// `connect` (ABI ≥ 4; then only the ports [`Ruleset::allow_port`] adds may be reached), and
    /// (ABI ≥ 6) scoping signals and abstract Unix sockets.
    pub fn new(abi: u32, connect: bool) -> io::Result<Self> {
        let handled = fs_rights(abi);
        let attr = RulesetAttr {
            handled_access_fs: handled,
            handled_access_net: if connect && abi >= 4 { CONNECT_TCP } else { 0 },
            scoped: if abi >= 6 {
                SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
            } else {
                0
            },
        };
        let size = match abi {
            ..=3 => 8,
            4 | 5 => 16,
            _ => size_of::<RulesetAttr>(),
        };
        // SAFETY: `attr` is a live struct of at least `size` bytes the kernel only reads.
        let fd = unsafe {
            raw::call(
                SYS_CREATE_RULESET,
                [(&raw const attr) as usize, size, 0, 0, 0, 0],
            )
        }
        .map_err(io::Error::from_raw_os_error)?;
        // SAFETY: the kernel just returned this descriptor (close-on-exec), ours alone.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        Ok(Self { fd, handled })
    }

    /// Allow `access` beneath `held` (a directory, or a file: then only the rights a file takes).
    pub fn allow(&self, held: &Held, access: u64) -> io::Result<()> {
        let mut allowed = access & self.handled;
        if !held.dir {
            allowed &= FILE_RIGHTS;
        }
        if allowed == 0 {
            return Ok(());
        }
        let rule = PathBeneath {
            allowed_access: allowed,
            parent_fd: held.file.as_raw_fd(),
        };
        self.add(RULE_PATH_BENEATH, (&raw const rule) as usize)
    }

    /// Allow TCP connects to `port` (on a ruleset that handles them).
    pub fn allow_port(&self, port: u16) -> io::Result<()> {
        let rule = NetPort {
            allowed_access: CONNECT_TCP,
            port: port.into(),
        };
        self.add(RULE_NET_PORT, (&raw const rule) as usize)
    }

    fn add(&self, kind: usize, rule: usize) -> io::Result<()> {
        let fd = self.fd.as_raw_fd() as usize;
        // SAFETY: `rule` points at a live attribute struct of the kind named, read by the kernel
        // during the call only.
        unsafe { raw::call(SYS_ADD_RULE, [fd, kind, rule, 0, 0, 0]) }
            .map(drop)
            .map_err(io::Error::from_raw_os_error)
    }

    /// The descriptor [`restrict`] takes in the child.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A path held open (`O_PATH`) for rules: what it was when opened is what a rule names, however
/// its name changes later.
#[derive(Debug)]
pub struct Held {
    file: File,
    dir: bool,
}

impl Held {
    /// Hold `path`, following links in it when `follow`, else refusing one at its end (which is
    /// then `Ok(None)`: a link grants nothing, its target is what would be checked).
    ///
    /// Opened by a raw `openat`: std's `OpenOptions` drops `O_PATH` on musl, whose `O_ACCMODE`
    /// includes it, and so would open the file itself (a tty without a controlling terminal:
    /// ENXIO; a link with `O_NOFOLLOW`: ELOOP).
    pub fn open(path: &Path, follow: bool) -> io::Result<Option<Self>> {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
        let flags = (libc::O_PATH | libc::O_CLOEXEC | nofollow) as usize;
        let at = [
            libc::AT_FDCWD as usize,
            path.as_ptr() as usize,
            flags,
            0,
            0,
            0,
        ];
        // SAFETY: a NUL-terminated path the kernel only reads during the call.
        let fd =
            unsafe { raw::call(libc::SYS_openat, at) }.map_err(io::Error::from_raw_os_error)?;
        // SAFETY: the kernel just returned this descriptor (close-on-exec), ours alone.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        let kind = file.metadata()?.file_type();
        Ok((!kind.is_symlink()).then_some(Self {
            file,
            dir: kind.is_dir(),
        }))
    }

    pub fn is_dir(&self) -> bool {
        self.dir
    }
}

/// In the child, between clone and exec: no new privileges (Landlock's condition for an
/// unprivileged process, and what keeps a set-uid program from running outside the domain), then
/// enter a new domain of `ruleset`. Raw calls only; the `Err` is the errno.
pub fn restrict(ruleset: RawFd) -> Result<(), libc::c_int> {
    let no_new_privs = [libc::PR_SET_NO_NEW_PRIVS as usize, 1, 0, 0, 0, 0];
    // SAFETY: integers only, for both calls.
    unsafe {
        raw::call(libc::SYS_prctl, no_new_privs)?;
        raw::call(SYS_RESTRICT_SELF, [ruleset as usize, 0, 0, 0, 0, 0])?;
    }
    Ok(())
}

/// The index of the first of `paths` that a thread in a domain of `ruleset` can open for
/// reading (a directory for listing), never waiting on one (a FIFO); `None` when it opens none.
///
/// A thread of ours enters the domain — Landlock restricts the calling thread alone — tries each,
/// and ends. The call returns only once the kernel has released that thread (its
/// `/proc/self/task` entry gone, up to a second): until then it counts against `RLIMIT_NPROC`,
/// and a session started under a tight limit must not lose a thread of its own to a check that
/// has ended. The `Err`: no thread, or the domain cannot be entered.
pub fn first_open(ruleset: &Ruleset, paths: &[&Path]) -> io::Result<Option<usize>> {
    use std::os::unix::fs::OpenOptionsExt;
    let fd = ruleset.raw_fd();
    let (first, tid) = std::thread::scope(|scope| {
        let probe = std::thread::Builder::new()
            .name("landlock-probe".into())
            .spawn_scoped(scope, move || -> io::Result<(Option<usize>, usize)> {
                // SAFETY: gettid takes nothing and cannot fail.
                let tid = unsafe { raw::call(libc::SYS_gettid, [0; 6]) }
                    .map_err(io::Error::from_raw_os_error)?;
                restrict(fd).map_err(io::Error::from_raw_os_error)?;
                let opens = |path: &&Path| {
                    std::fs::OpenOptions::new()
                        .read(true)
                        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
                        .open(path)
                        .is_ok()
                };
                Ok((paths.iter().position(opens), tid))
            })?;
        probe
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the probe thread panicked")))
    })?;
    let entry = format!("/proc/self/task/{tid}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while Path::new(&entry).exists() && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rights_grow_with_the_abi() {
        assert_eq!(fs_rights(1), (1 << 13) - 1);
        assert_eq!(fs_rights(2) & REFER, REFER);
        assert_eq!(fs_rights(3) & TRUNCATE, TRUNCATE);
        assert_eq!(fs_rights(4) & IOCTL_DEV, 0);
        assert_eq!(fs_rights(5), ALL);
        assert_eq!(fs_rights(7), ALL);
        assert_eq!(size_of::<PathBeneath>(), 12);
    }

    #[test]
    fn a_link_is_held_only_when_followed() {
        let dir = crate::scratch::Scratch::new("landlock");
        let link = dir.join("link");
        std::os::unix::fs::symlink("/usr", &link).unwrap();
        assert!(
            Held::open(&link, false).unwrap().is_none(),
            "a link grants nothing"
        );
        assert!(
            Held::open(&link, true).unwrap().unwrap().is_dir(),
            "its target"
        );
    }

    #[test]
    fn a_ruleset_takes_directories_files_and_ports_where_the_kernel_has_landlock() {
        let Ok(abi) = abi() else {
            eprintln!("*** SKIPPED: no Landlock in this kernel ***");
            return;
        };
        let ruleset = Ruleset::new(abi, true).unwrap();
        let usr = Held::open(Path::new("/usr"), true).unwrap().unwrap();
        assert!(usr.is_dir());
        ruleset.allow(&usr, READ_EXEC).unwrap();
        // A directory's rights on a file are cut to a file's, not refused.
        let null = Held::open(Path::new("/dev/null"), true).unwrap().unwrap();
        ruleset.allow(&null, ALL).unwrap();
        if abi >= 4 {
            ruleset.allow_port(443).unwrap();
        }
    }
}
