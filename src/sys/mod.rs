//! Every libc call `mur` makes, each behind a safe function whose doc comment states what it
//! guarantees and what it refuses.
//!
//! Nothing outside this module writes `unsafe` (the crate denies `unsafe_code`; `lib.rs` allows
//! it here alone). The functions here take readings and make calls; they decide nothing. What a
//! reading *means* — whether a record names a live capsule, whether a pid may be signalled — is
//! [`crate::process`]'s and [`crate::running`]'s business.

pub mod alloc;
pub mod child;
pub mod dir;
pub mod epoll;
pub mod fs;
#[cfg(target_os = "linux")]
pub mod landlock;
#[cfg(target_arch = "x86_64")]
pub mod mem;
pub mod panic_kill;
pub mod pidref;
pub mod pipe;
pub mod poll;
pub mod proc;
pub mod random;
#[cfg(target_os = "linux")]
pub mod raw;
pub mod sched;
pub mod signal;
pub mod socket;
pub mod spawn;
pub mod tty;
pub mod user;
pub mod wake;
