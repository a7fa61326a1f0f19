//! The life of a task's subreaper: the process between the session and one handler that answers
//! for everything the handler starts.
//!
//! It is cloned from a session thread with `CLONE_VM` (no copy of the session's memory, no
//! copy-on-write afterwards) on a stack of its own, and so lives under the same rules as a
//! handler before its exec, for its whole life: raw system calls only ([`crate::sys::raw`]),
//! on its stack and the [`Frame`] the session keeps for it until it is reaped — no allocation,
//! no lock, no thread-local (it has no thread pointer: one would fault, [`raw::clone`]), nothing
//! that can panic on a path it takes. Every signal is blocked in it (the session blocked them
//! across the clone); it waits on descriptors instead.
//!
//! What it does, in order:
//! 1. closes every descriptor it was cloned with but its own few, so it holds nothing of the
//!    session's (another task's pipes, the door) and its control socket is the session's alone;
//! 2. becomes a child subreaper (`PR_SET_CHILD_SUBREAPER`): whatever the handler starts and
//!    orphans — `setsid`, double forks, at any depth — is reparented to it, not to the session;
//! 3. puts every caught signal (and SIGPIPE, SIGCHLD) back to its default, and starts the
//!    handler ([`super::exec`]) — again, a few times, while its exec fails with `ETXTBSY` —
//!    telling the session nothing: the session reads the handler's start from the frame once
//!    this process is reaped, and writes the handler's stdin meanwhile;
//! 4. reaps adopted orphans as they exit while the handler runs, and on the session's word
//!    SIGTERMs the handler's group and its adopted orphans (`T`) or kills the tree (`K`);
//! 5. once the handler has exited — or the session asks, or its control socket reaches EOF
//!    because the session is gone, however — kills the tree: the handler's group while its
//!    unreaped leader still holds the group id, then every child it has, again and again as each
//!    death reparents the next generation to it, until it has no child left. Only its own
//!    unreaped children are ever signalled, so a signal can name nothing but the task's own
//!    processes; repeated until the tree is empty, never for a fixed number of generations, and
//!    given up after [`TREE_KILL_LIMIT_NS`] (a process stuck in the kernel keeps its SIGKILL
//!    pending and dies when it leaves; it is then no longer this task's to wait for);
//! 6. leaves the handler's wait status in the frame and exits. Its control socket closing is
//!    how the session learns that the task's processes are all gone.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use super::exec::{self, Exec};
use crate::sys::raw;

/// How long the subreaper keeps killing a tree that will not die (processes in uninterruptible
/// sleep) before it gives up and exits.
const TREE_KILL_LIMIT_NS: u64 = 10_000_000_000;
/// How long one wait lasts while killing (each death also wakes it) and, without a signalfd,
/// ever.
const KILLING_TICK_MS: i64 = 10;
/// The longest wait at all: a bound on any wake-up the subreaper could miss.
const IDLE_TICK_MS: i64 = 1_000;

/// The session asks: SIGTERM to the handler's group and to every orphan the task left.
pub const TERMINATE: u8 = b'T';
/// The session asks: kill the whole tree now.
pub const KILL: u8 = b'K';
/// How many times a handler whose exec fails with `ETXTBSY` is started again, [`BUSY_WAIT_MS`]
/// apart. ETXTBSY is passing: the program is open for writing somewhere — just written, or its
/// writer's descriptor held by a child another process forked and has not yet exec'd.
const BUSY_RETRIES: u32 = 20;
const BUSY_WAIT_MS: i64 = 10;

/// What the session and the subreaper share. The session hands it over as a raw pointer
/// (`Box::into_raw`) and holds no `Box` or `&mut` while the subreaper lives: both sides only
/// read it, and what either writes after the clone is an atomic ([`Exec::parent`],
/// [`Exec::failed`], [`Exec::in_cwd`], [`Frame::cloning`], [`Frame::status`],
/// [`Frame::reaped`]). The session takes it back only after reaping the subreaper, and not even
/// then while a handler may still be running on it ([`Frame::cloning`]): it is leaked instead.
pub struct Frame {
    pub exec: Exec,
    /// The subreaper's end of the control socket.
    pub ctl: RawFd,
    /// The top of the stack the handler runs on until its exec.
    pub handler_stack: *mut libc::c_void,
    /// Set by the subreaper just before it clones the handler, cleared once that clone has
    /// returned — when the handler has exec'd or exited and uses none of this memory any more.
    /// Still set once the subreaper is reaped, it died inside the clone (SIGKILLed while the
    /// handler was between its clone and its exec): the handler may still read the plan, write
    /// [`Exec::failed`] and run on its stack, so the frame and that stack are never freed.
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
    let [stdin, stdout, stderr] = f.exec.stdio;
    let [a, b, c, d] = f.exec.keep;
    let landlock = f.exec.landlock;
    keep_only([f.ctl, stdin, stdout, stderr, a, b, c, d, landlock]);
    let sfd = match setup(f.exec.reset) {
        Ok(sfd) => sfd,
        Err(errno) => {
            // Nothing started: the session finds why once it has reaped this process.
            f.exec.failed.store(errno, Ordering::Release);
            raw::exit(0)
        }
    };
    f.exec.parent.store(
        call(libc::SYS_getpid, [0; 6]).unwrap_or(0) as i32,
        Ordering::Release,
    );
    let handler = start_handler(f);
    for fd in [stdin, stdout, stderr, a, b, c, d, landlock]
        .into_iter()
        .filter(|&fd| fd >= 0)
    {
        let _ = raw::close(fd);
    }
    // Nothing is told: the session learns that the handler ran, or why not ([`Exec::failed`]),
    // from the frame once it has reaped this process — it does not wait on the start.
    match handler {
        Ok(pid) => supervise(f, pid as libc::pid_t, sfd),
        Err(errno) => f.exec.failed.store(errno, Ordering::Release),
    }
    raw::exit(0)
}

/// Clone the handler (`CLONE_VFORK`: back once it has exec'd or exited), and again, up to
/// [`BUSY_RETRIES`] times, while its exec fails with `ETXTBSY`: such a handler ran nothing and
/// read nothing, so its stdin, held here until it is started, is whole for the next.
fn start_handler(f: &Frame) -> raw::Result {
    let plan = (&raw const f.exec).cast_mut().cast();
    let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
    let mut retries = 0;
    loop {
        f.cloning.store(true, Ordering::Release);
        // SAFETY: the handler runs `exec::child` on its own guarded stack until its exec, making
        // raw calls only, with no thread pointer, on the plan in the frame; CLONE_VFORK holds
        // this process until then. Should this process be killed meanwhile, `cloning` stays set
        // and the session leaks the frame and that stack rather than free them under the
        // handler.
        let handler = unsafe { raw::clone(flags, f.handler_stack, exec::child, plan) };
        f.cloning.store(false, Ordering::Release);
        let busy = f.exec.failed.load(Ordering::Acquire) == libc::ETXTBSY;
        match handler {
            Ok(pid) if busy && retries < BUSY_RETRIES => {
                // It exited 127 before its exec: reaped, and started again.
                let _ = call(libc::SYS_wait4, [pid, 0, 0, 0, 0, 0]);
                f.exec.failed.store(0, Ordering::Release);
                wait([-1, -1], BUSY_WAIT_MS);
                retries += 1;
            }
            started => return started,
        }
    }
}

/// Become the subreaper, the signals in `reset` at their defaults, and a signalfd for SIGCHLD
/// (-1 without one: the waits then tick).
fn setup(reset: u64) -> Result<RawFd, libc::c_int> {
    let subreaper = [libc::PR_SET_CHILD_SUBREAPER as usize, 1, 0, 0, 0, 0];
    call(libc::SYS_prctl, subreaper)?;
    raw::default_signals(reset)?;
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

/// Watch the handler and its orphans until the handler has ended and the tree is empty.
fn supervise(f: &Frame, handler: libc::pid_t, sfd: RawFd) {
    let mut tree = Tree {
        handler: Some(handler),
        killing: None,
        ctl_open: true,
    };
    loop {
        if !reap_exited(f, &mut tree) {
            return;
        }
        if let Some(since) = tree.killing {
            if monotonic_ns().saturating_sub(since) >= TREE_KILL_LIMIT_NS {
                return;
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
            heed(f.ctl, &mut tree);
        }
        drain(sfd);
    }
}

/// Act on what the session wrote (or on its end closing).
fn heed(ctl: RawFd, tree: &mut Tree) {
    let mut byte = 0u8;
    let read = call(
        libc::SYS_read,
        [ctl as usize, (&raw mut byte) as usize, 1, 0, 0, 0],
    );
    match read {
        Ok(1) if byte == TERMINATE => {
            if let Some(leader) = tree.handler {
                let _ = raw::kill(-leader, libc::SIGTERM);
            }
            signal_children(libc::SIGTERM, tree.handler);
        }
        Ok(1) if byte == KILL => start_killing(tree),
        Ok(1) => {}
        Err(libc::EINTR | libc::EAGAIN) => {}
        // EOF or a broken socket: the session is gone, however it ended.
        _ => {
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

/// Close every descriptor but `keep` (negative entries ignored): `close_range(2)` over the gaps,
/// or one `close` per number below 65,536 where the kernel has none (before 5.9).
fn keep_only(mut keep: [RawFd; 9]) {
    keep.sort_unstable();
    let mut low: usize = 0;
    for fd in keep.into_iter().filter(|&fd| fd >= 0).map(|fd| fd as usize) {
        if fd > low {
            close_range(low, fd - 1);
        }
        low = low.max(fd + 1);
    }
    close_range(low, u32::MAX as usize);
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
