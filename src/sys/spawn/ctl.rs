//! The control socket between the session and one of its subreapers (`reaper.rs`): a
//! `SOCK_SEQPACKET` pair, so every message arrives whole and alone, whichever thread sent it.
//!
//! A message is a tag and a task's generation — a number no other task of this process is
//! given — so a word meant for a task that has ended never reaches the next one its subreaper
//! runs:
//! - session → subreaper: [`GO`], a task's handler to start, its descriptors attached
//!   (`SCM_RIGHTS`) and its plan lent through the subreaper's frame; [`TERMINATE`] or [`KILL`]
//!   that task's tree;
//! - subreaper → session: [`DONE`], the task's tree is gone and its outcome is in the frame; the
//!   subreaper then waits for its next task.
//!
//! The socket's end says the other side is gone: the session (the subreaper kills its tree and
//! exits), or the subreaper (it exited). Everything here makes raw calls only, on the caller's
//! stack: the subreaper runs it too (`raw`'s rules: no allocation, no errno, no thread-local).

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use super::exec::MAX_KEEP;
use crate::sys::raw;

/// Session → subreaper: start this task's handler.
pub const GO: u8 = b'G';
/// Session → subreaper: SIGTERM to the task's handler group and to every orphan it left.
pub const TERMINATE: u8 = b'T';
/// Session → subreaper: kill the task's whole tree now.
pub const KILL: u8 = b'K';
/// Subreaper → session: the task's tree is gone.
pub const DONE: u8 = b'D';

/// The most descriptors a [`GO`] carries: the handler's stdio, those it inherits, its ruleset.
pub const MAX_FDS: usize = 3 + MAX_KEEP + 1;

/// A message's bytes: its tag, then the generation (little-endian).
const LEN: usize = 9;

/// What one receive heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// A message; for a [`GO`], the descriptors that came with it are the first `fds` of the
    /// buffer given (any with another tag are closed, and `fds` is 0).
    Message {
        tag: u8,
        generation: u64,
        fds: usize,
    },
    /// The other side is gone (end of file, or the socket broke).
    End,
}

/// The ancillary data of a message carrying descriptors, laid out as the kernel reads it.
#[repr(C)]
struct Control {
    header: libc::cmsghdr,
    fds: [RawFd; MAX_FDS],
}

impl Control {
    fn empty() -> Self {
        // SAFETY: all-zero is a valid `cmsghdr` (a zero length) and descriptor array.
        unsafe { std::mem::zeroed() }
    }
}

/// The one buffer of a message: `bytes`.
fn buffer(bytes: &mut [u8; LEN]) -> libc::iovec {
    libc::iovec {
        iov_base: bytes.as_mut_ptr().cast(),
        iov_len: LEN,
    }
}

/// A message header of the buffer `iov` and the first `control_len` bytes of `control` (no
/// ancillary data when 0).
fn header(iov: &mut libc::iovec, control: &mut Control, control_len: usize) -> libc::msghdr {
    // SAFETY: all-zero is a valid `msghdr` (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    if control_len > 0 {
        msg.msg_control = (control as *mut Control).cast();
        msg.msg_controllen = control_len as _;
    }
    msg
}

/// A new control socket pair, both ends close-on-exec.
pub fn pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut ends = [-1; 2];
    let kind = (libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC) as usize;
    let args = [
        libc::AF_UNIX as usize,
        kind,
        0,
        ends.as_mut_ptr() as usize,
        0,
        0,
    ];
    // SAFETY: a pointer to two live integers the kernel fills.
    unsafe { raw::call(libc::SYS_socketpair, args) }.map_err(std::io::Error::from_raw_os_error)?;
    // SAFETY: both were just returned to us and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) })
}

/// Send `tag` for task `generation`, with `fds` attached (at most [`MAX_FDS`]), without
/// blocking and without SIGPIPE. The `Err`: the errno (`EPIPE`: the other side is gone).
pub fn send(ctl: RawFd, tag: u8, generation: u64, fds: &[RawFd]) -> raw::Result {
    let mut bytes = [0u8; LEN];
    bytes[0] = tag;
    bytes[1..].copy_from_slice(&generation.to_le_bytes());
    let mut iov = buffer(&mut bytes);
    let mut control = Control::empty();
    let count = fds.len().min(MAX_FDS);
    control.fds[..count].copy_from_slice(&fds[..count]);
    let data = std::mem::size_of::<libc::cmsghdr>() + count * std::mem::size_of::<RawFd>();
    control.header.cmsg_len = data as _;
    control.header.cmsg_level = libc::SOL_SOCKET;
    control.header.cmsg_type = libc::SCM_RIGHTS;
    // The space the kernel steps over: the data rounded up to the header's alignment.
    let space = data.next_multiple_of(std::mem::align_of::<libc::cmsghdr>());
    let msg = header(&mut iov, &mut control, if count > 0 { space } else { 0 });
    let flags = (libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) as usize;
    // SAFETY: the message, its one buffer and its control data are live locals of the sizes
    // given; the descriptors are only read by the kernel.
    unsafe {
        raw::call(
            libc::SYS_sendmsg,
            [ctl as usize, (&raw const msg) as usize, flags, 0, 0, 0],
        )
    }
}

/// Wait for the next message (`EINTR` retried) and say what it was; descriptors attached to a
/// [`GO`] are put in `fds` (close-on-exec), any others closed.
pub fn receive(ctl: RawFd, fds: &mut [RawFd; MAX_FDS]) -> Heard {
    let mut bytes = [0u8; LEN];
    loop {
        let mut iov = buffer(&mut bytes);
        let mut control = Control::empty();
        let mut msg = header(&mut iov, &mut control, std::mem::size_of::<Control>());
        let flags = libc::MSG_CMSG_CLOEXEC as usize;
        // SAFETY: the message, its buffer and its control space are live locals of the sizes
        // given, which the kernel fills.
        let read = unsafe {
            raw::call(
                libc::SYS_recvmsg,
                [ctl as usize, (&raw mut msg) as usize, flags, 0, 0, 0],
            )
        };
        let len = match read {
            Ok(0) => return Heard::End,
            Ok(len) => len,
            Err(libc::EINTR) => continue,
            Err(_) => return Heard::End,
        };
        let came = attached(&msg, &control);
        let whole = len == LEN && msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) == 0;
        let tag = if whole { bytes[0] } else { 0 };
        let kept = if tag == GO { came } else { 0 };
        close_all(&control.fds[kept..came]);
        fds[..kept].copy_from_slice(&control.fds[..kept]);
        if !whole {
            continue;
        }
        let mut generation = [0u8; 8];
        generation.copy_from_slice(&bytes[1..]);
        return Heard::Message {
            tag,
            generation: u64::from_le_bytes(generation),
            fds: kept,
        };
    }
}

/// How many descriptors a received message carried in `control`. (The lengths are `size_t` in
/// glibc's structures, `socklen_t` in musl's.)
#[allow(clippy::unnecessary_cast)]
fn attached(msg: &libc::msghdr, control: &Control) -> usize {
    let header = std::mem::size_of::<libc::cmsghdr>();
    let rights = msg.msg_controllen as usize >= header
        && control.header.cmsg_level == libc::SOL_SOCKET
        && control.header.cmsg_type == libc::SCM_RIGHTS;
    if !rights {
        return 0;
    }
    let data = (control.header.cmsg_len as usize).saturating_sub(header);
    (data / std::mem::size_of::<RawFd>()).min(MAX_FDS)
}

/// Close each of `fds` (raw calls: the subreaper's too).
pub fn close_all(fds: &[RawFd]) {
    for &fd in fds {
        let _ = raw::close(fd);
    }
}
