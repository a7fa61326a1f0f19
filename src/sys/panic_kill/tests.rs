use super::*;
use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// `command` started and registered; reaped by [`Registered::reap`], not by std's `Child`.
#[allow(clippy::zombie_processes)]
fn registered(command: &str, args: &[&str]) -> Registered {
    let child = std::process::Command::new(command)
        .args(args)
        .spawn()
        .unwrap();
    Registered::new(PidRef::child(child.id()), Kill::Process(child.id()))
}

fn is_registered(value: i32) -> bool {
    REGISTRY
        .iter()
        .any(|cell| cell.load(Ordering::SeqCst) == value)
}

#[test]
fn a_member_is_registered_until_it_has_exited_and_forgotten_by_its_reap() {
    let mut member = registered("sleep", &["30"]);
    let value = -i32::try_from(member.held().pid()).unwrap();
    assert!(is_registered(value));
    member.held().signal_child(libc::SIGKILL).unwrap();
    assert_eq!(member.reap().unwrap().signal(), Some(libc::SIGKILL));
    assert!(!is_registered(value));
    assert_eq!(
        member.reap().unwrap_err().raw_os_error(),
        Some(libc::ECHILD)
    );
}

/// The hook's moment: while it holds a slot claimed, the release (and so the reap after it)
/// waits.
#[test]
fn a_release_waits_while_the_hook_signals_the_slot() {
    let mut member = registered("true", &[]);
    let (slot, value) = member.slot.unwrap();
    REGISTRY[slot]
        .compare_exchange(value, CLAIMED, Ordering::SeqCst, Ordering::SeqCst)
        .unwrap();
    let reaped = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&reaped);
    let reaper = std::thread::spawn(move || {
        let status = member.reap().unwrap();
        flag.store(true, Ordering::SeqCst);
        status
    });
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !reaped.load(Ordering::SeqCst),
        "reaped while the hook held its slot"
    );
    REGISTRY[slot].store(value, Ordering::SeqCst);
    assert!(reaper.join().unwrap().success());
    assert!(!is_registered(value));
}

/// What the hook would signal, looked at (signal 0) over and over while members exit and are
/// reaped: a number it reads is never one already reaped (`ESRCH`) — the race of reaping first
/// and unregistering after.
#[test]
fn the_hook_never_reads_a_reaped_member() {
    let done = Arc::new(AtomicBool::new(false));
    let stop = Arc::clone(&done);
    let observer = std::thread::spawn(move || {
        let (mut reaped_seen, mut looked) = (0, 0);
        while !stop.load(Ordering::SeqCst) {
            each_registered(|value| {
                looked += 1;
                // SAFETY: signal 0 sends nothing; it asks whether the number names a process.
                let rc = unsafe { libc::kill(-value, 0) };
                if value < 0
                    && rc != 0
                    && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
                {
                    reaped_seen += 1;
                }
            });
        }
        (reaped_seen, looked)
    });
    for _ in 0..300 {
        registered("true", &[]).reap().unwrap();
    }
    done.store(true, Ordering::SeqCst);
    let (reaped_seen, looked) = observer.join().unwrap();
    assert!(looked > 0, "the observer never saw a registered member");
    assert_eq!(reaped_seen, 0, "the hook read reaped members");
}
