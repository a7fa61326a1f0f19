//! Child processes: signalling one's process group, and reaping the children no one waits for.
//!
//! A child leading its own process group has its pid as its pgid. While the leader is unreaped —
//! exited or not — the kernel keeps its pid, and so its pgid, from being handed out again, so a
//! group signal sent before the reap can only reach the child and what it started: callers wait
//! for the exit *without* reaping ([`super::pidref::PidRef::wait_child_exit`]), signal the group
//! for stragglers, and reap last.

/// Send `signal` to the process group `pgid` led by an unreaped child of ours. A pgid of 0 or
/// one that does not fit a `pid_t` is refused (`killpg(0)` would signal our own group).
pub fn signal_group(pgid: u32, signal: libc::c_int) -> std::io::Result<()> {
    let Some(pgid) = super::proc::as_pid_t(pgid) else {
        return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
    };
    // SAFETY: integers only; `pgid` is positive, so this names one group, never ours by 0.
    if unsafe { libc::killpg(pgid, signal) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Reap every child of this process that has exited and that no thread of it waits for: a
/// wrapper's sidecar this process inherited from before `exec mur`, an orphan reparented to it
/// as a namespace's pid 1. Never signals one: a process the session did not start is only ever
/// reaped, once it has exited on its own.
///
/// They are the children the kernel lists under the main thread (where it reparents orphans and
/// where a child of an exited thread goes; the main thread lives as long as the process and
/// starts no child itself in a session). A handler's subreaper is listed under the thread that
/// cloned it, or here once that thread has ended: it is reaped here only once it has exited —
/// killed from outside while it waited for a task — and the supervisor, finding it gone when it
/// next ends or uses it (`ECHILD`, or its socket's end), gives it no task. Reaped by pid, so no
/// other child's status is taken.
/// Nothing without procfs (macOS), where no orphan is reparented to a session.
pub fn reap_strangers() {
    // SAFETY: `getpid` takes no argument and cannot fail.
    let pid = unsafe { libc::getpid() };
    let Ok(list) = std::fs::read_to_string(format!("/proc/self/task/{pid}/children")) else {
        return;
    };
    for child in list.split_ascii_whitespace().filter_map(|p| p.parse().ok()) {
        // SAFETY: a zeroed `siginfo_t` the kernel fills; `child` is our own child, and WNOHANG
        // reaps it only if it has already exited.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(libc::P_PID, child, &mut info, libc::WEXITED | libc::WNOHANG);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::time::Duration;

    #[test]
    fn a_group_is_signalled_and_its_leader_seen_to_exit_before_the_reap() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let held = crate::sys::pidref::PidRef::child(child.id());
        assert!(!held.wait_child_exit(Duration::from_millis(50)));
        signal_group(child.id(), libc::SIGKILL).unwrap();
        assert!(held.wait_child_exit(Duration::from_secs(10)));
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert!(signal_group(0, libc::SIGTERM).is_err());
    }
}
