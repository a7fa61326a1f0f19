//! The system's user database (`/etc/passwd`, or whatever the C library's name service reads):
//! who a user named in the environment (`SUDO_USER`) or a manifest (`sandbox.user`) is; and the
//! one change of identity mur makes, a handler's (Linux: raw calls that change the calling
//! thread alone, as the kernel does, never the C library's process-wide broadcast).

use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// A user and its primary group, by number: whom a handler runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids {
    pub uid: u32,
    pub gid: u32,
}

/// What the database says of one user: its ids and home directory.
struct Entry {
    ids: Ids,
    home: Option<PathBuf>,
}

/// `user`'s entry in the user database, looked up by name or (`by_uid`) by number.
fn lookup(name: Option<&OsStr>, by_uid: u32) -> Option<Entry> {
    let name = name.map(|n| CString::new(n.as_bytes())).transpose().ok()?;
    // SAFETY: an all-zero `passwd` is a valid value for getpw*_r to fill.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: every pointer is to a live local of the size given; the strings the call points
    // `entry`'s fields at live in `buf`, read below while it lives.
    let rc = unsafe {
        match &name {
            Some(name) => libc::getpwnam_r(
                name.as_ptr(),
                &mut entry,
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            ),
            None => libc::getpwuid_r(by_uid, &mut entry, buf.as_mut_ptr(), buf.len(), &mut found),
        }
    };
    if rc != 0 || found.is_null() {
        return None;
    }
    let home = (!entry.pw_dir.is_null()).then(|| {
        // SAFETY: a NUL-terminated string inside `buf`, which is still alive.
        let dir = unsafe { CStr::from_ptr(entry.pw_dir) };
        PathBuf::from(OsStr::from_bytes(dir.to_bytes()))
    });
    Some(Entry {
        ids: Ids {
            uid: entry.pw_uid,
            gid: entry.pw_gid,
        },
        home: home.filter(|dir| dir.is_absolute()),
    })
}

/// The home directory of `user` in the system's user database, when it has an absolute one.
pub fn home_of(user: &OsStr) -> Option<PathBuf> {
    lookup(Some(user), 0)?.home
}

/// The ids of `user` in the system's user database.
pub fn ids_of(user: &OsStr) -> Option<Ids> {
    Some(lookup(Some(user), 0)?.ids)
}

/// This process's effective user and group: whom mur runs as.
pub fn mine() -> Ids {
    // SAFETY: getegid(2) takes nothing and cannot fail.
    let gid = unsafe { libc::getegid() };
    Ids {
        uid: crate::sys::proc::euid(),
        gid,
    }
}

/// Whether `uid` belongs to a user of the system's user database.
pub fn uid_is_known(uid: u32) -> bool {
    lookup(None, uid).is_some()
}

/// Whom a handler becomes: a user and group, and the capabilities it keeps across the change
/// and its exec (ambient), as a mask of `1 << CAP_…` bits; 0 keeps none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Becomes {
    pub ids: Ids,
    pub keeps: u64,
}

/// `CAP_DAC_OVERRIDE` and `CAP_DAC_READ_SEARCH`: root's access to files by their modes, and
/// nothing else of root's — no signal, ptrace or `/proc/PID/environ` of another uid's process, no
/// mode or owner change of a file not its own, no module, mount or raw socket. What a root
/// session's handlers keep by default (Landlock then decides which files).
pub const FILE_ACCESS: u64 = 1 << 1 | 1 << 2;

/// Become `becomes.ids` — no supplementary groups, then the group, then the user, real,
/// effective and saved — keeping `becomes.keeps` (those of them this thread holds), in the
/// calling thread only: in a handler between its clone and its exec (raw calls, no `errno`), or
/// in a probe thread that ends after. The `Err` is the errno of the step that failed; after the
/// user's change the thread holds no capability but those kept, none of which can undo it.
#[cfg(target_os = "linux")]
pub fn assume(becomes: Becomes) -> Result<(), libc::c_int> {
    use crate::sys::raw::call;
    let (uid, gid) = (becomes.ids.uid as usize, becomes.ids.gid as usize);
    // capget/capset's header (version 3: two 32-bit words a set) and sets.
    let mut header = [0x2008_0522_u32, 0];
    let mut sets = [[0u32; 3]; 2];
    let keeps = if becomes.keeps == 0 {
        0
    } else {
        // SAFETY: pointers to the live locals above, of the sizes version 3 reads and writes.
        unsafe {
            call(
                libc::SYS_capget,
                [
                    header.as_mut_ptr() as usize,
                    sets.as_mut_ptr() as usize,
                    0,
                    0,
                    0,
                    0,
                ],
            )?;
        }
        // A capability this thread does not hold (a container's bounding set) cannot be kept.
        let permitted = u64::from(sets[0][1]) | u64::from(sets[1][1]) << 32;
        becomes.keeps & permitted
    };
    let prctl = |args: [usize; 6]| {
        // SAFETY: integers only.
        unsafe { call(libc::SYS_prctl, args) }
    };
    if keeps != 0 {
        // Permitted capabilities survive the change of uid below (effective ones are cleared).
        prctl([libc::PR_SET_KEEPCAPS as usize, 1, 0, 0, 0, 0])?;
    }
    // SAFETY: integers (and a null list of groups) only.
    unsafe {
        call(libc::SYS_setgroups, [0; 6])?;
        call(libc::SYS_setresgid, [gid, gid, gid, 0, 0, 0])?;
        call(libc::SYS_setresuid, [uid, uid, uid, 0, 0, 0])?;
    }
    if keeps == 0 {
        return Ok(());
    }
    // Permitted, effective and inheritable narrowed to `keeps`, then each raised ambient: the
    // only way a capability passes the exec of a file without capabilities of its own.
    let low = keeps as u32;
    let high = (keeps >> 32) as u32;
    let sets = [[low, low, low], [high, high, high]];
    // SAFETY: pointers to live locals of the sizes version 3 reads.
    unsafe {
        call(
            libc::SYS_capset,
            [
                header.as_mut_ptr() as usize,
                sets.as_ptr() as usize,
                0,
                0,
                0,
                0,
            ],
        )?;
    }
    for cap in (0..64).filter(|cap| keeps & 1 << cap != 0) {
        let raise = libc::PR_CAP_AMBIENT_RAISE as usize;
        prctl([libc::PR_CAP_AMBIENT as usize, raise, cap, 0, 0, 0])?;
    }
    Ok(())
}

/// The index of the first of `paths` a process running as `ids` cannot reach for `access`
/// (`libc::X_OK`, `R_OK`…, as `access(2)` checks it: every directory on the way searched, by
/// the ids alone — kept capabilities count for nothing there);
/// `None` when it reaches them all. Tried for real by a thread of ours that becomes `becomes`
/// ([`assume`]) and ends; the `Err`: no thread, or it could not become `becomes`. An empty
/// `paths` asks only whether a handler could become it.
#[cfg(target_os = "linux")]
pub fn first_unreachable(
    becomes: Becomes,
    paths: &[(&std::path::Path, libc::c_int)],
) -> std::io::Result<Option<usize>> {
    std::thread::scope(|scope| {
        let probe = std::thread::Builder::new()
            .name("user-probe".into())
            .spawn_scoped(scope, move || -> std::io::Result<Option<usize>> {
                assume(becomes).map_err(std::io::Error::from_raw_os_error)?;
                Ok(paths.iter().position(|(path, access)| {
                    let Ok(path) = CString::new(path.as_os_str().as_bytes()) else {
                        return true;
                    };
                    // SAFETY: a NUL-terminated path alive for the call.
                    unsafe { libc::access(path.as_ptr(), *access) != 0 }
                }))
            })?;
        probe
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the probe thread panicked")))
    })
}

/// Elsewhere no handler runs as another user: there is nothing to probe.
#[cfg(not(target_os = "linux"))]
pub fn first_unreachable(
    _becomes: Becomes,
    _paths: &[(&std::path::Path, libc::c_int)],
) -> std::io::Result<Option<usize>> {
    Err(std::io::ErrorKind::Unsupported.into())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn root_has_a_home_in_the_user_database() {
        assert_eq!(home_of(OsStr::new("root")), Some(PathBuf::from("/root")));
        assert_eq!(ids_of(OsStr::new("root")), Some(Ids { uid: 0, gid: 0 }));
        assert!(uid_is_known(0));
        assert_eq!(home_of(OsStr::new("no-such-user-mur")), None);
        assert_eq!(home_of(OsStr::new("nul\0in")), None);
    }

    #[test]
    fn a_probe_as_another_user_is_refused_what_only_root_may_reach() {
        if crate::sys::proc::euid() != 0 {
            return;
        }
        let nobody = Ids {
            uid: 65534,
            gid: 65534,
        };
        let paths = [
            (std::path::Path::new("/bin/sh"), libc::X_OK),
            (std::path::Path::new("/root"), libc::X_OK),
        ];
        let strict = Becomes {
            ids: nobody,
            keeps: 0,
        };
        assert_eq!(first_unreachable(strict, &paths).unwrap(), Some(1));
        // The probe changed its own thread only: this one is still root.
        assert_eq!(crate::sys::proc::euid(), 0);
        // Keeping root's file access, it can become nobody too (access(2) weighs the ids alone).
        let keeping = Becomes {
            ids: nobody,
            keeps: FILE_ACCESS,
        };
        assert_eq!(first_unreachable(keeping, &[]).unwrap(), None);
    }
}
