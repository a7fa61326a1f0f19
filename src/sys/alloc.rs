//! Tuning the static build's allocator, mimalloc, for a long-lived server on a budget.
//!
//! mimalloc keeps pages a thread has freed for `purge_delay` (10 ms by default) before giving
//! them back to the kernel, and a thread that is not allocating — a door worker waiting for
//! its next job — may not get round to it at all. The session counts its memory in a budget
//! (DESIGN §5) and must stay under its goal whatever clients send; measured with 127
//! concurrent 1 MiB requests, three rounds, the installed binary peaked at 137, 225 and 277 MiB
//! with the default and at 134, 154 and 194 MiB purging at once, at no cost the door bench
//! could see. So it purges at once — unless `MIMALLOC_PURGE_DELAY` in the environment sets a
//! delay other than the default, which then wins.

use std::ffi::{c_int, c_long};

/// `mi_option_purge_delay` in mimalloc 2's `mi_option_e` (include/mimalloc.h), and its
/// default: the option is set only while it reads as that default, so an index that named
/// another option in some other mimalloc (whose default would differ) is left alone.
const PURGE_DELAY: c_int = 15;
const PURGE_DELAY_DEFAULT: c_long = 10;

unsafe extern "C" {
    fn mi_option_get(option: c_int) -> c_long;
    fn mi_option_set(option: c_int, value: c_long);
}

/// Have mimalloc give freed pages back at once (see the module's doc).
pub fn purge_at_once() {
    // SAFETY: mimalloc's option calls take an option index (out-of-range ones are ignored) and
    // may be made at any time from any thread.
    unsafe {
        if mi_option_get(PURGE_DELAY) == PURGE_DELAY_DEFAULT {
            mi_option_set(PURGE_DELAY, 0);
        }
    }
}
