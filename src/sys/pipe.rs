//! Pipes between a parent and one child: created close-on-exec, handed to exactly one child by
//! number (`MURMUR_FORMATION_LIFELINE=<fd>`, `MURMUR_FORMATION_CHANNEL=<fd>`), taken over there.

use std::fs::File;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

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
    match add_flag(fd, FD_FLAGS, libc::FD_CLOEXEC) {
        Err(err) if err.raw_os_error() == Some(libc::EBADF) => {
            return Err(format!("descriptor {fd} is not open"));
        }
        Err(err) => {
            return Err(format!(
                "descriptor {fd} cannot be made close-on-exec: {err}"
            ));
        }
        Ok(()) => {}
    }
    // SAFETY: the descriptor is open (checked above) and, by the contract of the variable that
    // named it, ours alone to own from here on.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// A pipe whose both ends are close-on-exec: no child inherits either end unless
/// the spawn clears the flag in that one child (`keep_open_in_child` where there is no `clone`).
pub fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    make_pipe(false).map_err(|err| format!("cannot create a pipe: {err}"))
}

/// A pipe whose both ends are close-on-exec and non-blocking: a full pipe never blocks a writer
/// (a signal handler's, say) and an empty one never blocks a reader.
pub fn nonblocking_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    make_pipe(true)
}

/// `pipe2(2)` with `O_CLOEXEC` (and `O_NONBLOCK` if asked): both flags set atomically, so no
/// child forked meanwhile by another thread inherits an end.
#[cfg(not(target_vendor = "apple"))]
fn make_pipe(nonblocking: bool) -> std::io::Result<(OwnedFd, OwnedFd)> {
    let flags = libc::O_CLOEXEC | if nonblocking { libc::O_NONBLOCK } else { 0 };
    let mut fds = [-1 as libc::c_int; 2];
    // SAFETY: `fds` is a live two-element array the kernel fills with two new descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), flags) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just returned to us and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// macOS has no `pipe2`: `pipe(2)`, then the flags one `fcntl` at a time. A child another thread
/// forks between the two inherits both ends until it execs — the window `pipe2` closes, which
/// macOS leaves open; the ends are owned at once, so a failed `fcntl` closes them.
#[cfg(target_vendor = "apple")]
fn make_pipe(nonblocking: bool) -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1 as libc::c_int; 2];
    // SAFETY: `fds` is a live two-element array the kernel fills with two new descriptors.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just returned to us and are owned by nobody else.
    let ends = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    for fd in fds {
        add_flag(fd, FD_FLAGS, libc::FD_CLOEXEC)?;
        if nonblocking {
            set_nonblocking(fd)?;
        }
    }
    Ok(ends)
}

/// Make `fd` non-blocking (`O_NONBLOCK` in its status flags).
pub fn set_nonblocking(fd: RawFd) -> std::io::Result<()> {
    add_flag(fd, STATUS_FLAGS, libc::O_NONBLOCK)
}

/// The `fcntl` commands that read and set a descriptor's own flags (`FD_CLOEXEC`)…
pub(super) const FD_FLAGS: (libc::c_int, libc::c_int) = (libc::F_GETFD, libc::F_SETFD);
/// … and those of its open file description (`O_NONBLOCK`).
const STATUS_FLAGS: (libc::c_int, libc::c_int) = (libc::F_GETFL, libc::F_SETFL);

/// OR `flag` into the flags that `(get, set)` read and write; `EBADF` if `fd` is not open.
pub(super) fn add_flag(
    fd: RawFd,
    (get, set): (libc::c_int, libc::c_int),
    flag: libc::c_int,
) -> std::io::Result<()> {
    // SAFETY: F_GETFD/F_GETFL read flags of a descriptor number; no pointers.
    let flags = unsafe { libc::fcntl(fd, get) };
    // SAFETY: F_SETFD/F_SETFL set them; integers only.
    if flags < 0 || unsafe { libc::fcntl(fd, set, flags | flag) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Let the child `command` spawns inherit `fds` (under the same numbers): their close-on-exec
/// flag is cleared in the child only, between fork and exec, so no other child — spawned by
/// any thread — ever sees them. (Where there is no `clone` path: on Linux the spawn clears the
/// flag itself, [`super::spawn`].)
#[cfg(not(target_os = "linux"))]
pub fn keep_open_in_child(command: &mut std::process::Command, fds: Vec<RawFd>) {
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
