//! The controlling terminal.

use std::os::unix::fs::OpenOptionsExt;

/// Whether this process has a controlling terminal — what decides a record's
/// `outlives_launcher`: a capsule attached to a terminal dies with that window.
///
/// Opening `/dev/tty` rather than `isatty` on stdio, so redirecting a stream does not change the
/// answer (a session started as `mur run >log 2>&1 &` from a terminal still dies with it).
pub fn has_controlling_terminal() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOCTTY)
        .open("/dev/tty")
        .is_ok()
}
