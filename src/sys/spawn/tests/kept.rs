//! Subreapers kept from task to task: what the next task finds of the last, and what becomes
//! of one that dies while it waits.

use super::*;

/// A subreaper is kept for the next task, which finds nothing of the last: not its orphans
/// (killed with it), not its descriptors, not its words — a remote of the last task, used while
/// the next runs, reaches nothing of it.
#[test]
fn a_subreaper_kept_for_the_next_task_brings_nothing_of_the_last() {
    let pool = Subreapers::default();
    let left = marker(305);
    let args = sh(&format!("setsid sleep {left} & echo $PPID"));
    let mut first = spawn(&spec("sh", &args), None, &pool).unwrap();
    let subreaper = first.shim.pid();
    let stale = first.shim.remote();
    let mut out = String::new();
    first.stdout.read_to_string(&mut out).unwrap();
    assert_eq!(first.shim.reap().unwrap().code(), Some(0));
    assert_eq!(
        out.trim(),
        subreaper.to_string(),
        "its subreaper is its parent"
    );
    assert_eq!(alive_with(&left), 0, "the orphan went with the task");

    let (keep_read, keep_write) = crate::sys::pipe::pipe().unwrap();
    use std::os::fd::AsRawFd;
    let kept = keep_write.as_raw_fd();
    let script = format!(
        "read -r line; echo \"$line\" > /proc/self/fd/{kept}; echo $PPID; ls -l /proc/$$/fd"
    );
    let args = sh(&script);
    let mut with_keep = spec("sh", &args);
    with_keep.keep = vec![kept];
    let mut second = spawn(&with_keep, None, &pool).unwrap();
    drop(keep_write);
    assert_eq!(second.shim.pid(), subreaper, "the same subreaper");
    stale.terminate();
    stale.kill();
    // Words are read in order: the first task's, then (had they reached it) this one's.
    std::thread::sleep(std::time::Duration::from_millis(50));
    second.stdin.write_all(b"hello\n").unwrap();
    drop(second.stdin);
    let mut out = String::new();
    second.stdout.read_to_string(&mut out).unwrap();
    assert_eq!(second.shim.reap().unwrap().code(), Some(0), "{out}");
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some(subreaper.to_string().as_str()));
    let mut fds: Vec<i32> = lines
        .filter_map(|line| line.split_once(" -> ")?.0.rsplit(' ').next()?.parse().ok())
        .collect();
    fds.sort_unstable();
    assert_eq!(
        fds,
        vec![0, 1, 2, kept],
        "nothing of the first task's: {out}"
    );
    let mut said = String::new();
    File::from(keep_read).read_to_string(&mut said).unwrap();
    assert_eq!(said, "hello\n");
}

/// A subreaper that died while it waited for a task (killed from outside) is replaced: the next
/// task runs under a new one. And the session's end reaps those still waiting.
#[test]
fn a_subreaper_gone_while_it_waits_is_replaced_and_those_waiting_end_with_the_session() {
    let pool = Subreapers::default();
    let mut first = spawn(&spec("true", &[]), None, &pool).unwrap();
    let gone = first.shim.pid();
    assert_eq!(first.shim.reap().unwrap().code(), Some(0));
    // An unreaped child of ours, waiting for its next task: the pid names nothing else.
    crate::sys::raw::kill(gone as i32, libc::SIGKILL).unwrap();
    let state = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                Some(
                    stat.rsplit_once(')')?
                        .1
                        .split_whitespace()
                        .next()?
                        .to_string(),
                )
            })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while state(gone).as_deref() != Some("Z") {
        assert!(
            std::time::Instant::now() < deadline,
            "the subreaper did not die"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let mut second = spawn(&spec("sh", &sh("exit 3")), None, &pool).unwrap();
    let kept = second.shim.pid();
    assert_ne!(kept, gone, "a new subreaper");
    assert_eq!(second.shim.reap().unwrap().code(), Some(3));
    assert_eq!(state(gone), None, "the dead one was reaped");
    assert!(state(kept).is_some(), "the new one waits for the next task");
    pool.retire_idle();
    assert_eq!(state(kept), None, "ended and reaped with the session");
}

/// Tasks started from many threads at once each get a subreaper of their own, kept and handed
/// to later tasks, and each handler reads its own stdin and writes its own stdout.
#[test]
fn tasks_from_many_threads_share_out_subreapers_without_mixing() {
    let pool = Subreapers::default();
    let started = std::sync::Mutex::new(std::collections::BTreeSet::new());
    std::thread::scope(|scope| {
        for thread in 0..6 {
            let (pool, started) = (&pool, &started);
            scope.spawn(move || {
                for task in 0..15 {
                    let mut child = spawn(&spec("cat", &[]), None, pool).unwrap();
                    started.lock().unwrap().insert(child.shim.pid());
                    let said = format!("{thread}/{task}\n");
                    child.stdin.write_all(said.as_bytes()).unwrap();
                    drop(child.stdin);
                    let mut out = String::new();
                    child.stdout.read_to_string(&mut out).unwrap();
                    assert_eq!(child.shim.reap().unwrap().code(), Some(0));
                    assert_eq!(out, said);
                }
            });
        }
    });
    let started = started.into_inner().unwrap().len();
    assert!(
        started <= 6,
        "90 tasks, at most 6 at once, {started} subreapers"
    );
}
