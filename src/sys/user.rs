//! The system's user database (`/etc/passwd`, or whatever the C library's name service reads):
//! who a user named in the environment (`SUDO_USER`) is.

use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// The home directory of `user` in the system's user database, when it has an absolute one.
pub fn home_of(user: &OsStr) -> Option<PathBuf> {
    let name = CString::new(user.as_bytes()).ok()?;
    // SAFETY: an all-zero `passwd` is a valid value for getpwnam_r to fill.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: every pointer is to a live local of the size given; the strings getpwnam_r points
    // `entry`'s fields at live in `buf`, read below while it lives.
    let rc = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut entry,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() || entry.pw_dir.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated string inside `buf`, which is still alive.
    let dir = unsafe { CStr::from_ptr(entry.pw_dir) };
    let dir = PathBuf::from(OsStr::from_bytes(dir.to_bytes()));
    dir.is_absolute().then_some(dir)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn root_has_a_home_in_the_user_database() {
        assert_eq!(home_of(OsStr::new("root")), Some(PathBuf::from("/root")));
        assert_eq!(home_of(OsStr::new("no-such-user-mur")), None);
        assert_eq!(home_of(OsStr::new("nul\0in")), None);
    }
}
