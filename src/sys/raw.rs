//! Linux system calls made without libc: results come back as `Err(errno)` and nothing is ever
//! written to `errno`.
//!
//! Why: code that runs in a child sharing this process's memory (`CLONE_VM`: the per-task
//! subreaper of [`super::spawn::Shim`], a handler between its clone and its exec) has no thread
//! of its own: cloned as libc clones, it would run on the thread pointer of the session thread
//! that cloned it, so libc's `errno` in that child would *be* that thread's — and the thread goes
//! on running; [`clone`] gives it no thread pointer at all, so a thread-local access faults there
//! instead. Either way a libc wrapper, which writes `errno` on failure, cannot run in it. These
//! calls also leave libc's own signal bookkeeping alone: a mask set here blocks libc's internal
//! signals too, which `pthread_sigmask` quietly refuses to.
//!
//! x86_64 and aarch64 are written out; another Linux architecture goes through `libc::syscall`,
//! which is correct but may write `errno` on failure (said here, not hidden).

/// A raw system call's result: the kernel's non-negative return, or the errno it reported.
pub type Result = std::result::Result<usize, libc::c_int>;

/// Make system call `number` with `args` (unused ones zero).
///
/// # Safety
///
/// The caller upholds the call's own contract: every pointer among `args` is valid for what
/// the kernel does with it, for as long as it does it.
pub unsafe fn call(number: libc::c_long, args: [usize; 6]) -> Result {
    // SAFETY: the caller's contract.
    result(unsafe { trap(number, args) })
}

/// The kernel returns -4095..=-1 for an error, anything else is a result.
fn result(ret: isize) -> Result {
    if (-4095..0).contains(&ret) {
        Err(-ret as libc::c_int)
    } else {
        Ok(ret as usize)
    }
}

#[cfg(target_arch = "x86_64")]
unsafe fn trap(number: libc::c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the `syscall` instruction with the kernel's x86_64 convention; it clobbers only
    // rcx and r11 besides rax. The caller vouches for the arguments.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") number as isize => ret,
            in("rdi") a[0], in("rsi") a[1], in("rdx") a[2],
            in("r10") a[3], in("r8") a[4], in("r9") a[5],
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

#[cfg(target_arch = "aarch64")]
unsafe fn trap(number: libc::c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: `svc 0` with the kernel's aarch64 convention: number in x8, arguments and result
    // in x0..x5; the kernel preserves every other register. The caller vouches for the arguments.
    unsafe {
        std::arch::asm!(
            "svc 0",
            in("x8") number,
            inlateout("x0") a[0] as isize => ret,
            in("x1") a[1], in("x2") a[2], in("x3") a[3], in("x4") a[4], in("x5") a[5],
            options(nostack),
        );
    }
    ret
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
unsafe fn trap(number: libc::c_long, a: [usize; 6]) -> isize {
    // SAFETY: the caller vouches for the arguments. (libc may write errno on failure here.)
    let ret = unsafe { libc::syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]) };
    if ret == -1 {
        -(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO) as isize)
    } else {
        ret as isize
    }
}

/// Start a child process on `stack_top` that runs `entry(arg)` and exits with what it returns;
/// its pid in the parent. Like libc's `clone`, but it writes no errno, the child never returns
/// into the code that cloned it, and the child has **no thread pointer** (`CLONE_SETTLS` with
/// 0): a child sharing this memory would otherwise run on the cloning thread's, so a
/// thread-local it touched (errno, a panic's count, the allocator's heap) would be that thread's,
/// which goes on running. With none, any thread-local access faults at an unmapped address and
/// the fault kills the child (its signals are blocked, so no handler runs): the rule that such a
/// child reaches no thread-local is kept by the kernel, not only by the code it runs.
///
/// # Safety
///
/// `stack_top` is the 16-byte-aligned top of memory the child may use as its stack for as long
/// as it runs on it; `entry` is safe to run in the child that `flags` make (with `CLONE_VM`: only
/// raw system calls on memory that stays valid, no allocation, no lock).
pub unsafe fn clone(
    flags: libc::c_int,
    stack_top: *mut libc::c_void,
    entry: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> Result {
    let flags = flags | libc::CLONE_SETTLS;
    // SAFETY: the caller's contract; the flags carry the child's exit signal in the low byte.
    result(unsafe { trampoline(flags as usize, stack_top, entry, arg) })
}

#[cfg(target_arch = "x86_64")]
unsafe fn trampoline(
    flags: usize,
    stack_top: *mut libc::c_void,
    entry: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> isize {
    let ret: isize;
    // SAFETY: `clone` with no tid pointers and a null TLS (r8, for `CLONE_SETTLS`). In the
    // parent it returns the pid (or -errno) and falls through. The child starts on `stack_top`
    // (16-byte aligned, so `call` leaves it as a function entry expects) with r12/r13 as they
    // were, calls `entry(arg)` and leaves by `exit_group`, never reaching the code after the asm.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r12",
            "call r13",
            "mov edi, eax",
            "mov eax, {exit}",
            "syscall",
            "ud2",
            "2:",
            exit = const libc::SYS_exit_group,
            inlateout("rax") libc::SYS_clone as isize => ret,
            in("rdi") flags, in("rsi") stack_top,
            in("rdx") 0usize, in("r10") 0usize, in("r8") 0usize,
            in("r12") arg, in("r13") entry,
            lateout("rcx") _, lateout("r11") _,
        );
    }
    ret
}

#[cfg(target_arch = "aarch64")]
unsafe fn trampoline(
    flags: usize,
    stack_top: *mut libc::c_void,
    entry: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> isize {
    let ret: isize;
    // SAFETY: as on x86_64: `clone` with no tid pointers and a null TLS (x3); the parent falls
    // through with the pid (or -errno); the child, on `stack_top` with x9/x10 as they were (the
    // kernel keeps every register but x0), calls `entry(arg)` and leaves by `exit_group`.
    unsafe {
        std::arch::asm!(
            "svc 0",
            "cbnz x0, 2f",
            "mov x29, xzr",
            "mov x0, x10",
            "blr x9",
            "mov x8, #{exit}",
            "svc 0",
            "brk #0",
            "2:",
            exit = const libc::SYS_exit_group,
            in("x8") libc::SYS_clone,
            inlateout("x0") flags as isize => ret,
            in("x1") stack_top, in("x2") 0usize, in("x3") 0usize, in("x4") 0usize,
            in("x9") entry, in("x10") arg,
            lateout("x30") _,
        );
    }
    ret
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
unsafe fn trampoline(
    flags: usize,
    stack_top: *mut libc::c_void,
    entry: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> isize {
    let none = std::ptr::null_mut::<libc::c_void>();
    // SAFETY: the caller's contract; no tid pointers, a null TLS. (libc may write errno on
    // failure here.)
    let ret = unsafe {
        libc::clone(
            entry,
            stack_top,
            flags as libc::c_int,
            arg,
            none,
            none,
            none,
        )
    };
    if ret < 0 {
        -(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO) as isize)
    } else {
        ret as isize
    }
}

/// The kernel's signal set: 64 bits, one a signal (`sigset_t` in libc is larger).
pub type SigSet = u64;
/// Every signal.
pub const ALL_SIGNALS: SigSet = !0;
/// The size of [`SigSet`] the kernel is told.
const SIGSET_SIZE: usize = std::mem::size_of::<SigSet>();

/// Replace this thread's signal mask with `mask`; the old one.
pub fn set_signal_mask(mask: SigSet) -> std::result::Result<SigSet, libc::c_int> {
    let mut old: SigSet = 0;
    // SAFETY: two live 8-byte sets and their size.
    unsafe {
        call(
            libc::SYS_rt_sigprocmask,
            [
                libc::SIG_SETMASK as usize,
                (&raw const mask) as usize,
                (&raw mut old) as usize,
                SIGSET_SIZE,
                0,
                0,
            ],
        )
    }
    .map(|_| old)
}

/// The kernel's `struct sigaction` (not libc's): handler, flags, restorer, mask.
#[repr(C)]
#[derive(Default)]
struct KernelSigaction {
    handler: usize,
    flags: libc::c_ulong,
    restorer: usize,
    mask: SigSet,
}

/// Put the signals in `reset` ([`crate::sys::signal::reset_on_exec`]) back to their defaults
/// (SIGKILL and SIGSTOP have no other): writes only, no disposition read — the mask says which.
/// For a child that shares no signal table with the session.
pub fn default_signals(reset: u64) -> Result {
    let default = KernelSigaction::default();
    for signal in 1..=64usize {
        let unresettable = signal == libc::SIGKILL as usize || signal == libc::SIGSTOP as usize;
        if unresettable || reset & (1 << (signal - 1)) == 0 {
            continue;
        }
        // SAFETY: installs SIG_DFL (handler 0) from a live struct of the kernel's layout.
        unsafe {
            call(
                libc::SYS_rt_sigaction,
                [signal, (&raw const default) as usize, 0, SIGSET_SIZE, 0, 0],
            )
        }?;
    }
    Ok(0)
}

/// `kill(pid, signal)`; a negative `pid` names a process group.
pub fn kill(pid: libc::pid_t, signal: libc::c_int) -> Result {
    // SAFETY: integers only.
    unsafe { call(libc::SYS_kill, [pid as usize, signal as usize, 0, 0, 0, 0]) }
}

/// Close `fd`.
pub fn close(fd: libc::c_int) -> Result {
    // SAFETY: an integer only.
    unsafe { call(libc::SYS_close, [fd as usize, 0, 0, 0, 0, 0]) }
}

/// Exit this process (all its threads) with `code`.
pub fn exit(code: libc::c_int) -> ! {
    loop {
        // SAFETY: an integer only; it does not return.
        let _ = unsafe { call(libc::SYS_exit_group, [code as usize, 0, 0, 0, 0, 0]) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_call_reports_its_errno_and_leaves_errno_alone() {
        // SAFETY: sets errno to a marker on this thread; an integer write through libc's own
        // errno location.
        unsafe { *libc::__errno_location() = 12345 };
        assert_eq!(close(-1), Err(libc::EBADF));
        assert_eq!(kill(0x7fff_fff0, 0), Err(libc::ESRCH));
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(12345),
            "errno untouched"
        );
    }

    #[test]
    fn a_mask_set_is_read_back() {
        let old = set_signal_mask(1 << (libc::SIGUSR1 - 1)).unwrap();
        let now = set_signal_mask(old).unwrap();
        assert_eq!(now, 1 << (libc::SIGUSR1 - 1));
    }
}
