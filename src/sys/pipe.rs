//! Descriptors a parent handed down by number (`MURMUR_FORMATION_LIFELINE=<fd>`).

use std::fs::File;
use std::os::fd::FromRawFd;

/// Take ownership of inherited descriptor `fd`: check it is open, mark it close-on-exec so no
/// handler inherits it, and wrap it. The `Err` names the descriptor.
///
/// Call once per descriptor: the `File` closes it when dropped.
pub fn take_inherited(fd: i32) -> Result<File, String> {
    if fd < 3 {
        return Err(format!(
            "descriptor {fd} is a standard stream, not an inherited pipe"
        ));
    }
    // SAFETY: F_GETFD/F_SETFD read and set flags of a descriptor number; no pointers.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(format!("descriptor {fd} is not open"));
    }
    // SAFETY: as above.
    unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
    // SAFETY: the descriptor is open (checked above) and, by the contract of the variable that
    // named it, ours alone to own from here on.
    Ok(unsafe { File::from_raw_fd(fd) })
}
