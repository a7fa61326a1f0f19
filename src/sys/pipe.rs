//! Pipes between a parent and one child: created close-on-exec, handed to exactly one child by
//! number (`MURMUR_FORMATION_LIFELINE=<fd>`, `MURMUR_FORMATION_CHANNEL=<fd>`), taken over there.

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
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) } < 0 {
        return Err(format!(
            "descriptor {fd} cannot be made close-on-exec: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: the descriptor is open (checked above) and, by the contract of the variable that
    // named it, ours alone to own from here on.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// A pipe whose both ends are close-on-exec (`pipe2(O_CLOEXEC)`): no child inherits either end
/// unless [`keep_open_in_child`] says so for that one child.
pub fn pipe() -> Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd), String> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a live two-element array the kernel fills with two new descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!(
            "cannot create a pipe: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: both descriptors were just returned to us and are owned by nobody else.
    Ok(unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    })
}

/// Let the child `command` spawns inherit `fds` (under the same numbers): their close-on-exec
/// flag is cleared in the child only, between fork and exec, so no other child — spawned by
/// any thread — ever sees them.
pub fn keep_open_in_child(command: &mut std::process::Command, fds: Vec<std::os::fd::RawFd>) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and calls only `fcntl`, which is
    // async-signal-safe; it allocates nothing and touches no lock.
    unsafe {
        command.pre_exec(move || {
            for &fd in &fds {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}
