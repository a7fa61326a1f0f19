//! What a hostile record, handler or client can make `mur` do (DESIGN.md §2, §4, §5): one
//! regression test per finding of the hardening review, each failing on the code before it.

// Test scaffolding provokes the kernel directly (kill, prctl, waitpid, chroot); each block says
// why it is sound. `unsafe` stays denied in the product, outside `src/sys`.
#![allow(unsafe_code)]

#[allow(dead_code)] // each test file uses a subset of the shared helpers
mod common;

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::home::Home;
use common::process::{Proc, alive, start_token};
use common::records::{record, session_id, status_of};
use common::skip::skipped;
use common::wait::wait_until;

/// A port nothing listens on: the door of a record that is never reached.
const SILENT_DOOR: &str = "127.0.0.1:9";

/// A record naming (`pid`, its real start time) is refused by `mur stop --all` (exit 1, the
/// reason on stderr, the record kept) and listed `unreachable` by `mur ps` with `why` in its
/// reason; `pid` is still alive.
#[track_caller]
fn refused_everywhere(home: &Home, pid: u32, why: &str) {
    let start = start_token(pid).expect("the target's start time");
    let sid = session_id();
    let path = home.write_record(&record(&sid, pid, &start, SILENT_DOOR));
    let stop = home.mur(&["stop", "--all", "--timeout", "1"]);
    stop.expect_code(1);
    assert!(stop.stderr.contains(why), "stop said: {}", stop.stderr);
    assert!(path.exists(), "the refused record was removed");
    assert!(alive(pid), "pid {pid} was signalled");
    let ps = home.mur(&["ps", "--json"]);
    ps.expect_code(0);
    assert_eq!(
        status_of(&ps.json(), &sid).as_deref(),
        Some("unreachable"),
        "{}",
        ps.stdout
    );
    assert!(ps.stdout.contains(why), "ps listed: {}", ps.stdout);
}

#[test]
fn a_record_naming_an_ancestor_of_mur_is_never_signalled() {
    // The test process is the parent of every `mur` it runs.
    refused_everywhere(
        &Home::new(),
        std::process::id(),
        "this mur or one of its ancestors",
    );
}

#[test]
fn a_record_naming_a_thread_is_never_signalled() {
    // A thread of this test process (cargo's harness runs each test on a thread of its own).
    let me = std::process::id();
    let tid = std::fs::read_dir(format!("/proc/{me}/task"))
        .expect("/proc/self/task")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|&tid| tid != me)
        .expect("a thread other than the main one");
    refused_everywhere(&Home::new(), tid, &format!("a thread of process {me}"));
}

#[test]
fn a_record_naming_pid_1_is_never_signalled() {
    refused_everywhere(&Home::new(), 1, "pid 1 (init) is never signalled");
}

#[test]
fn a_record_naming_a_kernel_thread_is_never_signalled() {
    // kthreadd is pid 2 with parent 0 where the kernel's threads are visible.
    let visible = std::fs::read_to_string("/proc/2/status")
        .is_ok_and(|s| s.lines().any(|l| l.split_whitespace().eq(["PPid:", "0"])));
    if !visible {
        return skipped(
            "hardening::a_record_naming_a_kernel_thread_is_never_signalled",
            "no kernel thread is visible in this pid namespace",
        );
    }
    refused_everywhere(&Home::new(), 2, "pid 2 is a kernel thread");
}

#[test]
fn root_never_signals_another_users_process_through_a_record() {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skipped(
            "hardening::root_never_signals_another_users_process_through_a_record",
            "not root: another user's process cannot be started",
        );
    }
    let mut nobody = Command::new("sleep");
    nobody
        .arg("60")
        .uid(65534)
        .gid(65534)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = Proc::from_command(nobody);
    wait_until(Duration::from_secs(5), "the sleep's start time", || {
        start_token(child.pid()).is_some()
    });
    refused_everywhere(
        &Home::new(),
        child.pid(),
        "belongs to uid 65534, not to uid 0",
    );
}
