//! The life of a subreaper: the process between the session and its handlers — one at a time —
//! that answers for everything each handler starts.
//!
//! It is cloned from a session thread with `CLONE_VM` (no copy of the session's memory, no
//! copy-on-write afterwards) on a stack of its own, and so lives under the same rules as a
//! handler before its exec, for its whole life: raw system calls only ([`crate::sys::raw`]),
//! on its stack and the [`Frame`] the session keeps for it until it is reaped — no allocation,
//! no lock, no thread-local (it has no thread pointer: one would fault, [`raw::clone`]), nothing
//! that can panic on a path it takes. Every signal is blocked in it (the session blocked them
//! across the clone); it waits on descriptors instead.
//!
//! It is kept for task after task (`shim.rs`: cloning one, its start and its exit were a fifth
//! of a task's overhead), and every task finds it as the last one left it: no child, no
//! descriptor but its own two, its signals at their defaults. What it does:
//! 1. once: closes every descriptor it was cloned with but its control socket, so it holds
//!    nothing of the session's (another task's pipes, the door) and the socket is the
//!    session's alone; becomes a child subreaper (`PR_SET_CHILD_SUBREAPER`): whatever a handler
//!    starts and orphans — `setsid`, double forks, at any depth — is reparented to it, not to
//!    the session; puts every caught signal (and SIGPIPE, SIGCHLD) back to its default;
//! 2. for each task ([`ctl::GO`], with the handler's descriptors and a generation): starts the
//!    handler ([`super::exec`]) on the plan the session lent it — again, a few times, while its
//!    exec fails with `ETXTBSY` — and closes those descriptors, telling the session nothing: the
//!    session reads the handler's start from the plan once the task is done, and writes the
//!    handler's stdin meanwhile;
//! 3. reaps adopted orphans as they exit while the handler runs, and on the session's word for
//!    this task's generation — a word for another is ignored — SIGTERMs the handler's group and
//!    its adopted orphans ([`ctl::TERMINATE`]) or kills the tree ([`ctl::KILL`]);
//! 4. once the handler has exited — or the session asks, or its control socket ends because the
//!    session is gone, however — kills the tree: the handler's group while its unreaped leader
//!    still holds the group id, then every child it has, again and again as each death
//!    reparents the next generation to it, until it has no child left. Only its own unreaped
//!    children are ever signalled, so a signal can name nothing but the task's own processes;
//!    repeated until the tree is empty, never for a fixed number of generations, and given up
//!    after [`TREE_KILL_LIMIT_NS`] (a process stuck in the kernel keeps its SIGKILL pending and
//!    dies when it leaves; it is then no longer this task's to wait for);
//! 5. leaves the handler's wait status in the frame and says [`ctl::DONE`]; then waits for the
//!    next task. It exits instead — its control socket closing is then how the session learns
//!    that the task's processes are gone — when the session is gone, when it gave up on a tree,
//!    or when the session ends it (the socket shut).

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};

use super::ctl::{self, Heard};
use super::exec::{self, Exec, Launch};
use crate::sys::raw;

/// How long the subreaper keeps killing a tree that will not die (processes in uninterruptible
/// sleep) before it gives up and exits.
const TREE_KILL_LIMIT_NS: u64 = 10_000_000_000;
/// How long one wait lasts while killing (each death also wakes it) and, without a signalfd,
/// ever.
const KILLING_TICK_MS: i64 = 10;
/// The longest wait at all: a bound on any wake-up the subreaper could miss.
const IDLE_TICK_MS: i64 = 1_000;

/// A subreaper's process name (`comm`: at most 15 bytes).
const NAME: &[u8] = b"mur-subreaper\0";

/// How many times a handler whose exec fails with `ETXTBSY` is started again, [`BUSY_WAIT_MS`]
/// apart. ETXTBSY is passing: the program is open for writing somewhere — just written, or its
/// writer's descriptor held by a child another process forked and has not yet exec'd.
const BUSY_RETRIES: u32 = 20;
const BUSY_WAIT_MS: i64 = 10;

/// What the session and the subreaper share. The session hands it over as a raw pointer
/// (`Box::into_raw`) and holds no `Box` or `&mut` while the subreaper lives: what either writes
/// after the clone is an atomic. The session takes it back only after reaping the subreaper, and
/// not even then while a handler may still be running on it ([`Frame::cloning`]): it is leaked
/// instead.
///
/// A task's fields — [`Frame::plan`], [`Frame::status`], [`Frame::reaped`] — are the session's
/// to set while the subreaper waits for its next task, and the subreaper's from the task's
/// [`ctl::GO`] until its [`ctl::DONE`]: the messages order the two.
pub struct Frame {
    /// The subreaper's end of the control socket.
    pub ctl: RawFd,
    /// The top of the stack the handler runs on until its exec.
    pub handler_stack: *mut libc::c_void,
    /// The signals it puts back to their defaults ([`crate::sys::signal::reset_on_exec`]), read
    /// just before its clone.
    pub reset: u64,
    /// The errno of its set-up, when that failed: it then exits before any task.
    pub broken: AtomicI32,
    /// The task's plan, lent by the session (`Box::into_raw`) before its go and taken back only
    /// once the task is done, or once the subreaper is reaped and no handler's clone is under
    /// way; leaked otherwise.
    pub plan: AtomicPtr<Exec>,
    /// Set by the subreaper just before it clones a handler, cleared once that clone has
    /// returned — when the handler has exec'd or exited and uses none of this memory any more.
    /// Still set once the subreaper is reaped, it died inside the clone (SIGKILLed while the
    /// handler was between its clone and its exec): the handler may still read the plan and the
    /// subreaper's stack, write [`Exec::failed`] and run on its own stack, so the frame, the
    /// plan and both stacks are never freed.
    pub cloning: AtomicBool,
    /// The handler's wait status, once [`Frame::reaped`].
    pub status: AtomicI32,
    pub reaped: AtomicBool,
}

/// The subreaper's entry, on the frame's address.
pub extern "C" fn main(frame: *mut libc::c_void) -> libc::c_int {
    // SAFETY: the frame the session handed over (`Box::into_raw`): freed only once this process
    // has been reaped, and never while a handler it cloned may still use it (`Frame::cloning`);
    // while this runs, nothing holds a `&mut` to it and every field written is an atomic, so a
    // shared reference is sound.
    let frame = unsafe { &*frame.cast::<Frame>() };
    live(frame)
}

fn live(f: &Frame) -> ! {
    keep_only(f.ctl);
    let sfd = match setup(f.reset) {
        Ok(sfd) => sfd,
        Err(errno) => {
            // Nothing started: the session finds why once it has reaped this process.
            f.broken.store(errno, Ordering::Release);
            raw::exit(0)
        }
    };
    let me = call(libc::SYS_getpid, [0; 6]).unwrap_or(0) as i32;
    let mut fds = [-1; ctl::MAX_FDS];
    loop {
        match ctl::receive(f.ctl, &mut fds) {
            Heard::Message {
                tag: ctl::GO,
                generation,
                fds: count,
            } => {
                let emptied = serve(f, me, generation, &fds[..count], sfd);
                if !emptied || ctl::send(f.ctl, ctl::DONE, generation, &[]).is_err() {
                    raw::exit(0)
                }
            }
            Heard::End => raw::exit(0),
            // A word for a task that has ended.
            Heard::Message { .. } => {}
        }
    }
}

/// Run one task: its handler started from the plan in the frame with the descriptors `received`
/// (closed here once it has started), then watched until its tree is gone. Whether it is: a
/// tree given up on leaves this subreaper unfit for another task.
fn serve(f: &Frame, me: i32, generation: u64, received: &[RawFd], sfd: RawFd) -> bool {
    let plan = f.plan.load(Ordering::Acquire);
    // SAFETY: the plan the session lent for this task before its go (or null): kept alive and
    // unmoved until this task is done, or this process reaped; only its atomics are written.
    let Some(plan) = (unsafe { plan.as_ref() }) else {
        ctl::close_all(received);
        return true;
    };
    let handler = match plan.received(received) {
        Some(fds) => {
            plan.parent.store(me, Ordering::Release);
            start_handler(f, &Launch { plan, fds })
        }
        None => Err(libc::EBADMSG),
    };
    ctl::close_all(received);
    // Nothing is told: the session learns that the handler ran, or why not ([`Exec::failed`]),
    // from the plan once the task is done — it does not wait on the start.
    match handler {
        Ok(pid) => supervise(f, generation, pid as libc::pid_t, sfd),
        Err(errno) => {
            plan.failed.store(errno, Ordering::Release);
            true
        }
    }
}

/// Clone the handler (`CLONE_VFORK`: back once it has exec'd or exited), and again, up to
/// [`BUSY_RETRIES`] times, while its exec fails with `ETXTBSY`: such a handler ran nothing and
/// read nothing, so its stdin, held here until it is started, is whole for the next.
fn start_handler(f: &Frame, launch: &Launch<'_>) -> raw::Result {
    let arg = (&raw const *launch).cast_mut().cast();
    let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
    let failed = &launch.plan.failed;
    let mut retries = 0;
    loop {
        f.cloning.store(true, Ordering::Release);
        // SAFETY: the handler runs `exec::child` on its own guarded stack until its exec, making
        // raw calls only, with no thread pointer, on the launch (on this stack) and the plan the
        // session lent; CLONE_VFORK holds this process until then. Should this process be
        // killed meanwhile, `cloning` stays set and the session leaks the frame, the plan and
        // both stacks rather than free them under the handler.
        let handler = unsafe { raw::clone(flags, f.handler_stack, exec::child, arg) };
        f.cloning.store(false, Ordering::Release);
        let busy = failed.load(Ordering::Acquire) == libc::ETXTBSY;
        match handler {
            Ok(pid) if busy && retries < BUSY_RETRIES => {
                // It exited 127 before its exec: reaped, and started again.
                let _ = call(libc::SYS_wait4, [pid, 0, 0, 0, 0, 0]);
                failed.store(0, Ordering::Release);
                wait([-1, -1], BUSY_WAIT_MS);
                retries += 1;
            }
            started => return started,
        }
    }
}

/// Named, become the subreaper, the signals in `reset` at their defaults, the session's
/// scheduling class, and a signalfd for SIGCHLD (-1 without one: the waits then tick).
fn setup(reset: u64) -> Result<RawFd, libc::c_int> {
    // Its own name in `ps -o comm`, `top` and `pgrep`, not the cloning thread's (its command
    // line is the session's: they share their memory).
    let name = NAME.as_ptr() as usize;
    call(
        libc::SYS_prctl,
        [libc::PR_SET_NAME as usize, name, 0, 0, 0, 0],
    )?;
    let subreaper = [libc::PR_SET_CHILD_SUBREAPER as usize, 1, 0, 0, 0, 0];
    call(libc::SYS_prctl, subreaper)?;
    raw::default_signals(reset)?;
    // Cloned by a task thread, it runs `SCHED_BATCH`; its handlers get the session's class.
    crate::sys::sched::restore_in_child();
    let sigchld: raw::SigSet = 1 << (libc::SIGCHLD - 1);
    let flags = (libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) as usize;
    let mask = (&raw const sigchld) as usize;
    let sfd = call(libc::SYS_signalfd4, [usize::MAX, mask, 8, flags, 0, 0]);
    Ok(sfd.map_or(-1, |fd| fd as RawFd))
}

/// What the subreaper knows of its tree.
struct Tree {
    /// The handler, until it is reaped.
    handler: Option<libc::pid_t>,
    /// Whether the tree is being killed, and since when (monotonic nanoseconds).
    killing: Option<u64>,
    /// Whether the session's end of the control socket may still speak.
    ctl_open: bool,
}

/// Watch the handler and its orphans until the handler has ended and the tree is empty, heeding
/// the session's words for task `generation`. Whether the tree is empty: `false` once it was
/// given up on.
fn supervise(f: &Frame, generation: u64, handler: libc::pid_t, sfd: RawFd) -> bool {
    let mut tree = Tree {
        handler: Some(handler),
        killing: None,
        ctl_open: true,
    };
    loop {
        if !reap_exited(f, &mut tree) {
            return true;
        }
        if let Some(since) = tree.killing {
            if monotonic_ns().saturating_sub(since) >= TREE_KILL_LIMIT_NS {
                return false;
            }
            if let Some(leader) = tree.handler {
                let _ = raw::kill(-leader, libc::SIGKILL);
            }
            signal_children(libc::SIGKILL, None);
        }
        let tick = if tree.killing.is_some() || sfd < 0 {
            KILLING_TICK_MS
        } else {
            IDLE_TICK_MS
        };
        let ctl = if tree.ctl_open { f.ctl } else { -1 };
        let [ctl_ready, _] = wait([ctl, sfd], tick);
        if ctl_ready {
            heed(f.ctl, generation, &mut tree);
        }
        drain(sfd);
    }
}

/// Act on what the session wrote for task `generation` (or on its end closing).
fn heed(ctl: RawFd, generation: u64, tree: &mut Tree) {
    let mut fds = [-1; ctl::MAX_FDS];
    match ctl::receive(ctl, &mut fds) {
        Heard::Message {
            tag,
            generation: meant,
            fds: count,
        } => {
            // A go while a task runs is no word of the session's: what came with it goes.
            ctl::close_all(&fds[..count]);
            if meant != generation {
                return;
            }
            match tag {
                ctl::TERMINATE => {
                    if let Some(leader) = tree.handler {
                        let _ = raw::kill(-leader, libc::SIGTERM);
                    }
                    signal_children(libc::SIGTERM, tree.handler);
                }
                ctl::KILL => start_killing(tree),
                _ => {}
            }
        }
        // The session is gone, however it ended.
        Heard::End => {
            tree.ctl_open = false;
            start_killing(tree);
        }
    }
}

fn start_killing(tree: &mut Tree) {
    if tree.killing.is_none() {
        tree.killing = Some(monotonic_ns());
    }
}

/// Reap every child that has exited — the handler's group SIGKILLed while its exited leader is
/// still unreaped, then the leader, its status kept — and say whether any child is left.
fn reap_exited(f: &Frame, tree: &mut Tree) -> bool {
    loop {
        // SAFETY: a zeroed `siginfo_t` is a valid value; the kernel fills it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let options = (libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) as usize;
        let peek = [
            libc::P_ALL as usize,
            0,
            (&raw mut info) as usize,
            options,
            0,
            0,
        ];
        match call(libc::SYS_waitid, peek) {
            Ok(_) => {}
            Err(libc::EINTR) => continue,
            // No child at all (a handler the kernel reaped unasked is gone too).
            Err(libc::ECHILD) => {
                tree.handler = None;
                return false;
            }
            Err(_) => return true,
        }
        // SAFETY: reads the pid the kernel wrote for a child-exit `siginfo_t`.
        let pid = unsafe { info.si_pid() };
        if pid == 0 {
            return true;
        }
        if tree.handler == Some(pid) {
            // Until the leader is reaped its pid — the group's id — names nothing else.
            let _ = raw::kill(-pid, libc::SIGKILL);
            tree.handler = None;
            start_killing(tree);
            let mut status = 0;
            if call(
                libc::SYS_wait4,
                [pid as usize, (&raw mut status) as usize, 0, 0, 0, 0],
            )
            .is_ok()
            {
                f.status.store(status, Ordering::Release);
                f.reaped.store(true, Ordering::Release);
            }
        } else {
            let reap = [pid as usize, 0, libc::WNOHANG as usize, 0, 0, 0];
            let _ = call(libc::SYS_wait4, reap);
        }
    }
}

/// Send `signal` to every child of this process but `except`: each an unreaped child, so its
/// pid can name no other process. Read from `/proc/thread-self/children` (this process has one
/// thread); without procfs, nothing is sent and the handler's group is all that is reached.
fn signal_children(signal: libc::c_int, except: Option<libc::pid_t>) {
    const PATH: &[u8] = b"/proc/thread-self/children\0";
    let flags = (libc::O_RDONLY | libc::O_CLOEXEC) as usize;
    let open = [
        libc::AT_FDCWD as usize,
        PATH.as_ptr() as usize,
        flags,
        0,
        0,
        0,
    ];
    let Ok(fd) = call(libc::SYS_openat, open) else {
        return;
    };
    let mut buf = [0u8; 512];
    let mut pid: Option<libc::pid_t> = None;
    let send = |pid: libc::pid_t| {
        if Some(pid) != except && pid > 0 {
            let _ = raw::kill(pid, signal);
        }
    };
    loop {
        let read = [fd, buf.as_mut_ptr() as usize, buf.len(), 0, 0, 0];
        let n = match call(libc::SYS_read, read) {
            Ok(0) => break,
            Ok(n) => n.min(buf.len()),
            Err(libc::EINTR) => continue,
            Err(_) => break,
        };
        for &byte in buf.iter().take(n) {
            if byte.is_ascii_digit() {
                let digit = libc::pid_t::from(byte - b'0');
                pid = Some(pid.unwrap_or(0).saturating_mul(10).saturating_add(digit));
            } else if let Some(done) = pid.take() {
                send(done);
            }
        }
    }
    if let Some(done) = pid {
        send(done);
    }
    let _ = raw::close(fd as RawFd);
}

/// Wait until `fds[i]` (negative: none) is readable or `tick_ms` passes; which were.
fn wait(fds: [RawFd; 2], tick_ms: i64) -> [bool; 2] {
    let mut polled = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let timeout = libc::timespec {
        tv_sec: (tick_ms / 1000) as _,
        tv_nsec: ((tick_ms % 1000) * 1_000_000) as _,
    };
    let args = [
        polled.as_mut_ptr() as usize,
        polled.len(),
        (&raw const timeout) as usize,
        0,
        8,
        0,
    ];
    if call(libc::SYS_ppoll, args).is_err() {
        return [false; 2];
    }
    polled.map(|p| p.revents != 0)
}

/// Empty the signalfd (its readings are only wake-ups).
fn drain(sfd: RawFd) {
    if sfd < 0 {
        return;
    }
    let mut buf = [0u8; 128];
    while call(
        libc::SYS_read,
        [sfd as usize, buf.as_mut_ptr() as usize, 128, 0, 0, 0],
    )
    .is_ok_and(|n| n > 0)
    {}
}

/// Close every descriptor but `keep`: `close_range(2)` either side of it, or one `close` per
/// number below 65,536 where the kernel has none (before 5.9).
fn keep_only(keep: RawFd) {
    let keep = keep.max(0) as usize;
    if keep > 0 {
        close_range(0, keep - 1);
    }
    close_range(keep + 1, u32::MAX as usize);
}

fn close_range(low: usize, high: usize) {
    if call(libc::SYS_close_range, [low, high, 0, 0, 0, 0]).is_ok() {
        return;
    }
    for fd in low..=high.min(65_535) {
        let _ = raw::close(fd as RawFd);
    }
}

fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let args = [
        libc::CLOCK_MONOTONIC as usize,
        (&raw mut now) as usize,
        0,
        0,
        0,
        0,
    ];
    let _ = call(libc::SYS_clock_gettime, args);
    (now.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(now.tv_nsec as u64)
}

/// [`raw::call`] for the calls here, each of which passes integers or pointers to this frame's
/// locals and constants, valid for the call.
fn call(number: libc::c_long, args: [usize; 6]) -> raw::Result {
    // SAFETY: see above: every pointer argument is to a live local or a static constant.
    unsafe { raw::call(number, args) }
}
