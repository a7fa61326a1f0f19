//! The static build's global allocator: mimalloc for blocks under [`MAPPED_FROM`], and a
//! mapping of its own for each block from there up — as glibc does with its threshold fixed
//! (the module above). [`Mapped`] wraps any allocator so; the static build's is
//! `Mapped(MiMalloc)`, and the tests wrap the system's.
//!
//! Why: mimalloc keeps a large block in a segment of the thread that allocated it, and a block
//! another thread frees goes back only when that thread next allocates. A door worker parses a
//! 1 MiB body into a tree of 16 MiB, another thread drops it, and the worker, idle, keeps the
//! 16 MiB mapped: under an address-space limit the next request's allocation failed (an abort)
//! with the budget's count far below the limit. A block of its own is unmapped by whichever
//! thread frees it, and grows and shrinks in place or by moving its pages (`mremap(2)`), never
//! by a copy beside the old one.
//!
//! Invariant: a block is mapped exactly when [`mapped`] says so of its layout — the layout it
//! was allocated with, which `GlobalAlloc` hands back to `dealloc` and `realloc` — so each
//! block is freed by the allocator that made it.

use std::alloc::{GlobalAlloc, Layout};

/// Blocks of this many bytes or more are mapped on their own.
pub const MAPPED_FROM: usize = 128 << 10;
/// The alignment every mapping has, whatever the page size (at least 4 KiB on Linux).
const MAP_ALIGN: usize = 4096;

/// The allocator `.0` for small blocks, with a mapping of its own for each large block (see the
/// module's doc).
pub struct Mapped<A>(pub A);

/// Whether a block of `layout` is mapped on its own.
fn mapped(layout: &Layout) -> bool {
    layout.size() >= MAPPED_FROM && layout.align() <= MAP_ALIGN
}

// SAFETY: each method keeps `GlobalAlloc`'s contract: small blocks are `.0`'s, which keeps it; a large block is a fresh anonymous mapping of at least its size (zeroed, aligned to a
// page), unmapped only by `dealloc` or moved by `realloc`, which by the invariant above receive
// exactly the blocks mapped here; a failure is a null pointer, the old block left as it was.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Mapped<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if mapped(&layout) {
            map(layout.size())
        } else {
            // SAFETY: the caller's promises about `layout` are passed on.
            unsafe { self.0.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if mapped(&layout) {
            // A fresh anonymous mapping reads as zeroes.
            map(layout.size())
        } else {
            // SAFETY: as in `alloc`.
            unsafe { self.0.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if mapped(&layout) {
            // SAFETY: `ptr` is a mapping of `layout.size()` bytes made by `map` or `remap`
            // (the invariant), which nothing uses once it is freed.
            unsafe { libc::munmap(ptr.cast(), layout.size()) };
        } else {
            // SAFETY: `.0`'s block, freed with its layout.
            unsafe { self.0.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `GlobalAlloc::realloc`'s caller promises that `new_size`, rounded up to
        // `layout.align()`, does not overflow `isize`.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (mapped(&layout), mapped(&new)) {
            // SAFETY: a mapping of `layout.size()` bytes, moved as a whole.
            (true, true) => unsafe { remap(ptr, layout.size(), new_size) },
            // SAFETY: `.0`'s block, with its layout.
            (false, false) => unsafe { self.0.realloc(ptr, layout, new_size) },
            _ => {
                // SAFETY: `new` is a valid non-zero layout (above); the old block is live for
                // `layout.size()` bytes and the new one for `new_size`, and they are distinct.
                unsafe {
                    let moved = self.alloc(new);
                    if !moved.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    moved
                }
            }
        }
    }
}

/// A fresh private anonymous mapping of `size` bytes, or null.
fn map(size: usize) -> *mut u8 {
    // SAFETY: a new mapping at an address the kernel picks; nothing else is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p.cast()
    }
}

/// The mapping at `ptr` of `old` bytes made `new` bytes long, moved if it must be; null (and
/// the old mapping as it was) if it cannot be.
///
/// # Safety
/// `ptr` must be a mapping of `old` bytes made by [`map`] or [`remap`].
unsafe fn remap(ptr: *mut u8, old: usize, new: usize) -> *mut u8 {
    // SAFETY: the caller's promise; MREMAP_MAYMOVE lets the kernel move the pages, which
    // leaves no mapping at the old address.
    let p = unsafe { libc::mremap(ptr.cast(), old, new, libc::MREMAP_MAYMOVE) };
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p.cast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::System;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    /// Whether the `len` bytes at `p` read as `byte`s.
    ///
    /// # Safety
    /// `p` must be live for `len` bytes.
    unsafe fn all(p: *const u8, len: usize, byte: u8) -> bool {
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts(p, len) }
            .iter()
            .all(|b| *b == byte)
    }

    /// A large block through every move: zeroed, grown (mremap), shrunk below the threshold
    /// (into the inner allocator), grown back above it (a new mapping); its bytes kept each time.
    #[test]
    fn a_large_block_keeps_its_bytes_through_every_move() {
        let a = Mapped(System);
        let (large, larger, small) = (MAPPED_FROM, 4 * MAPPED_FROM, 1000);
        // SAFETY: every block is used within its size and freed once, with its layout.
        unsafe {
            let p = a.alloc_zeroed(layout(large, 8));
            assert!(!p.is_null() && (p as usize).is_multiple_of(MAP_ALIGN));
            assert!(all(p, large, 0));
            p.write_bytes(7, large);
            let p = a.realloc(p, layout(large, 8), larger);
            assert!(!p.is_null() && all(p, large, 7));
            p.write_bytes(9, larger);
            let p = a.realloc(p, layout(larger, 8), small);
            assert!(!p.is_null() && all(p, small, 9));
            let p = a.realloc(p, layout(small, 8), large);
            assert!(!p.is_null() && all(p, small, 9));
            a.dealloc(p, layout(large, 8));
        }
    }

    /// An alignment past a page's is the inner allocator's, and kept.
    #[test]
    fn a_large_block_aligned_past_a_page_is_the_inner_allocators() {
        let a = Mapped(System);
        let wide = layout(MAPPED_FROM, 4 * MAP_ALIGN);
        assert!(!mapped(&wide) && mapped(&layout(MAPPED_FROM, 8)));
        assert!(!mapped(&layout(MAPPED_FROM - 1, 8)));
        // SAFETY: allocated and freed with the same layout.
        unsafe {
            let p = a.alloc(wide);
            assert!(!p.is_null() && (p as usize).is_multiple_of(4 * MAP_ALIGN));
            a.dealloc(p, wide);
        }
    }
}
