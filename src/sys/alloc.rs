//! Tuning the allocator for a long-lived server on a memory budget (DESIGN §5): memory the
//! session has freed goes back to the kernel promptly, so what it holds stays near what its
//! budget counts; and under an address-space limit (`ulimit -v`, `RLIMIT_AS`) what it *maps*
//! stays bounded too, so an allocation never fails (a failed one aborts the session, leaving its
//! record and task directories behind). Each tuning yields to the allocator's own environment
//! variable when that is set.
//!
//! glibc (the development build, and `cargo install`): a block of 128 KiB or more is mapped on
//! its own and unmapped when freed — until the first such free, after which glibc raises the
//! threshold to that block's size and later 1 MiB request bodies come from the heaps of up to
//! 16 arenas, where freed memory stays. Fixing the threshold at 128 KiB keeps it so: measured
//! with 127 concurrent 1 MiB requests, three rounds, the session peaked at 165, 178 and 204 MiB
//! with glibc's default and at 84, 94 and 108 MiB with the threshold fixed. Each arena a thread
//! opens reserves 64 MiB of address space (up to 8 per core): under an address-space limit the
//! arenas are capped so that their reservations take at most a quarter of it (`M_ARENA_MAX`).
//!
//! mimalloc (the static build) keeps pages a thread has freed for `purge_delay` (10 ms by default) before giving
//! them back to the kernel, and a thread that is not allocating — a door worker waiting for
//! its next job — may not get round to it at all. The session counts its memory in a budget
//! (DESIGN §5) and must stay under its goal whatever clients send; measured with 127
//! concurrent 1 MiB requests, three rounds, the installed binary peaked at 137, 225 and 277 MiB
//! with the default and at 134, 154 and 194 MiB purging at once, at no cost the door bench
//! could see. So it purges at once — unless `MIMALLOC_PURGE_DELAY` in the environment sets a
//! delay other than the default, which then wins.
//!
//! mimalloc also reserves its memory 1 GiB at a time (an arena, `arena_reserve`) and never
//! unmaps an arena; under an address-space limit that reservation fails (and is retried for
//! every new segment), so there it reserves none: each segment is mapped on its own and unmapped
//! when it empties. Each thread that allocates owns at least one segment, whose size is fixed when
//! mimalloc is compiled (`MI_SEGMENT_SHIFT`): install.sh builds it with 4 MiB segments instead
//! of 32 MiB, which bounds what each thread maps. And a block of 128 KiB or more is not
//! mimalloc's at all but a mapping of its own (`mapped.rs`), so that a large block another
//! thread frees is unmapped at once rather than when the thread that allocated it next
//! allocates.

#[cfg(all(target_os = "linux", any(target_env = "musl", test)))]
mod mapped;

/// The static build's global allocator: mimalloc, with a mapping of its own for each large
/// block (`mapped.rs`).
#[cfg(target_env = "musl")]
pub type Allocator = mapped::Mapped<mimalloc::MiMalloc>;
/// The one value of [`Allocator`], for `#[global_allocator]`.
#[cfg(target_env = "musl")]
pub const ALLOCATOR: Allocator = mapped::Mapped(mimalloc::MiMalloc);

#[cfg(target_env = "musl")]
use std::ffi::{c_int, c_long};

/// Tune this build's allocator (see the module's doc).
pub fn tune() {
    #[cfg(target_env = "musl")]
    {
        set_while_default(PURGE_DELAY, 0);
        if address_space_limit().is_some() {
            set_while_default(ARENA_RESERVE, 0);
        }
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    glibc(address_space_limit());
}

/// The address-space limit (`RLIMIT_AS`) in bytes, if there is one.
#[cfg(any(target_env = "musl", all(target_os = "linux", target_env = "gnu")))]
fn address_space_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) fills the one struct it is given.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) };
    (rc == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// glibc's mmap threshold, and its arenas under an address-space limit `limit`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn glibc(limit: Option<u64>) {
    /// What each arena but the main one reserves (`HEAP_MAX_SIZE` on 64-bit).
    const ARENA_RESERVE: u64 = 64 << 20;
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: mallopt(3) takes a parameter number and a value, and may be called at any
        // time; a refusal (0) leaves glibc's default, which is only less frugal.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10) };
    }
    if let Some(limit) = limit
        && std::env::var_os("MALLOC_ARENA_MAX").is_none()
    {
        let arenas = c_int_of(limit / 4 / ARENA_RESERVE).max(1);
        // SAFETY: as above.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) };
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn c_int_of(n: u64) -> libc::c_int {
    libc::c_int::try_from(n).unwrap_or(libc::c_int::MAX)
}

/// An option of mimalloc 2's `mi_option_e` (include/mimalloc.h): its index, and its default.
/// An option is set only while it reads as that default, so an index that named another
/// option in some other mimalloc (whose default would differ) is left alone, and so is a value
/// its `MIMALLOC_*` environment variable gave.
#[cfg(target_env = "musl")]
struct MiOption {
    index: c_int,
    default: c_long,
}

/// `mi_option_purge_delay`: milliseconds.
#[cfg(target_env = "musl")]
const PURGE_DELAY: MiOption = MiOption {
    index: 15,
    default: 10,
};
/// `mi_option_arena_reserve`: KiB (1 GiB on 64-bit).
#[cfg(target_env = "musl")]
const ARENA_RESERVE: MiOption = MiOption {
    index: 23,
    default: 1 << 20,
};

#[cfg(target_env = "musl")]
unsafe extern "C" {
    fn mi_option_get(option: c_int) -> c_long;
    fn mi_option_set(option: c_int, value: c_long);
}

/// Set `option` to `value` if it reads as its default (see [`MiOption`]).
#[cfg(target_env = "musl")]
fn set_while_default(option: MiOption, value: c_long) {
    // SAFETY: mimalloc's option calls take an option index (out-of-range ones are ignored) and
    // may be made at any time from any thread.
    unsafe {
        if mi_option_get(option.index) == option.default {
            mi_option_set(option.index, value);
        }
    }
}
