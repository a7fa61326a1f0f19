//! Tuning the allocator for a long-lived server on a memory budget (DESIGN §5): memory the
//! session has freed goes back to the kernel promptly, so what it holds stays near what its
//! budget counts. Each tuning yields to the allocator's own environment variable when that is
//! set.
//!
//! glibc (the development build, and `cargo install`): a block of 128 KiB or more is mapped on
//! its own and unmapped when freed — until the first such free, after which glibc raises the
//! threshold to that block's size and later 1 MiB request bodies come from the heaps of up to
//! 16 arenas, where freed memory stays. Fixing the threshold at 128 KiB keeps it so: measured
//! with 127 concurrent 1 MiB requests, three rounds, the session peaked at 165, 178 and 204 MiB
//! with glibc's default and at 84, 94 and 108 MiB with the threshold fixed.
//!
//! mimalloc (the static build) keeps pages a thread has freed for `purge_delay` (10 ms by default) before giving
//! them back to the kernel, and a thread that is not allocating — a door worker waiting for
//! its next job — may not get round to it at all. The session counts its memory in a budget
//! (DESIGN §5) and must stay under its goal whatever clients send; measured with 127
//! concurrent 1 MiB requests, three rounds, the installed binary peaked at 137, 225 and 277 MiB
//! with the default and at 134, 154 and 194 MiB purging at once, at no cost the door bench
//! could see. So it purges at once — unless `MIMALLOC_PURGE_DELAY` in the environment sets a
//! delay other than the default, which then wins.

#[cfg(target_env = "musl")]
use std::ffi::{c_int, c_long};

/// Tune this build's allocator (see the module's doc).
pub fn tune() {
    #[cfg(target_env = "musl")]
    purge_at_once();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: mallopt(3) takes a parameter number and a value, and may be called at any
        // time; a refusal (0) leaves glibc's default, which is only less frugal.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10) };
    }
}

#[cfg(target_env = "musl")]
/// `mi_option_purge_delay` in mimalloc 2's `mi_option_e` (include/mimalloc.h), and its
/// default: the option is set only while it reads as that default, so an index that named
/// another option in some other mimalloc (whose default would differ) is left alone.
const PURGE_DELAY: c_int = 15;
#[cfg(target_env = "musl")]
const PURGE_DELAY_DEFAULT: c_long = 10;

#[cfg(target_env = "musl")]
unsafe extern "C" {
    fn mi_option_get(option: c_int) -> c_long;
    fn mi_option_set(option: c_int, value: c_long);
}

/// Have mimalloc give freed pages back at once (see the module's doc).
#[cfg(target_env = "musl")]
fn purge_at_once() {
    // SAFETY: mimalloc's option calls take an option index (out-of-range ones are ignored) and
    // may be made at any time from any thread.
    unsafe {
        if mi_option_get(PURGE_DELAY) == PURGE_DELAY_DEFAULT {
            mi_option_set(PURGE_DELAY, 0);
        }
    }
}
