//! A stack for a child cloned to share mur's memory (a task's subreaper; a child between its
//! clone and its exec): its own mapping, with an inaccessible guard page below it, so an overrun
//! faults instead of writing into whatever the heap put next to it.
//!
//! A stack no child runs on any more is kept for the next ([`Stack::give_back`], up to
//! [`MAX_SPARES`]) rather than unmapped: mapping two stacks and their guards per task and
//! unmapping them after — each unmapping a TLB shootdown on every core the session's threads
//! run on — was a measurable part of starting a handler.

use std::io;
use std::sync::Mutex;

/// The most stacks kept for later children: two a running task, for a few at once.
const MAX_SPARES: usize = 16;

/// Stacks no child runs on, for [`Stack::take`].
static SPARES: Mutex<Vec<Stack>> = Mutex::new(Vec::new());

/// How much stack a child gets: its calls are raw system calls and a few hundred bytes of frame,
/// plus the subreaper's 512-byte read buffer.
const SIZE: usize = 64 * 1024;

/// `[guard][stack]`, unmapped on drop.
pub struct Stack {
    base: *mut libc::c_void,
    page: usize,
    size: usize,
}

// SAFETY: the mapping is owned by this value alone; moving it between threads moves nothing.
unsafe impl Send for Stack {}

impl Stack {
    /// A kept stack, or a new one.
    pub fn take() -> io::Result<Self> {
        let spare = SPARES.lock().unwrap_or_else(|p| p.into_inner()).pop();
        spare.map_or_else(Self::map, Ok)
    }

    /// Keep this stack for a later [`Stack::take`] (or unmap it, when enough are kept). Only for
    /// a stack no child runs on any more: its child was reaped, or its clone has returned.
    pub fn give_back(self) {
        let mut spares = SPARES.lock().unwrap_or_else(|p| p.into_inner());
        if spares.len() < MAX_SPARES {
            spares.push(self);
        }
    }

    fn map() -> io::Result<Self> {
        // SAFETY: sysconf takes an integer.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096);
        let size = SIZE.next_multiple_of(page);
        // SAFETY: an anonymous private mapping the kernel places; no pointer is passed in.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page + size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Self { base, page, size };
        // SAFETY: the first page of the mapping just made.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The top of the stack, the end of the mapping (page-aligned, so 16-byte aligned).
    pub fn top(&self) -> *mut libc::c_void {
        // SAFETY: one past the end of the mapping, which is what a downward stack starts at.
        unsafe { self.base.cast::<u8>().add(self.page + self.size).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the whole mapping made in `map`; nothing runs on it any more (its owner keeps
        // it until the child using it has exec'd or been reaped, or leaks it).
        unsafe { libc::munmap(self.base, self.page + self.size) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stack_sits_above_an_inaccessible_page() {
        let stack = Stack::take().unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let perms = |addr: usize| {
            maps.lines()
                .find_map(|line| {
                    let (range, rest) = line.split_once(' ')?;
                    let (lo, hi) = range.split_once('-')?;
                    let lo = usize::from_str_radix(lo, 16).ok()?;
                    let hi = usize::from_str_radix(hi, 16).ok()?;
                    (lo..hi).contains(&addr).then(|| rest[..4].to_string())
                })
                .unwrap()
        };
        let base = stack.base as usize;
        assert_eq!(perms(base), "---p", "the guard");
        assert_eq!(perms(base + stack.page), "rw-p");
        assert_eq!(perms(stack.top() as usize - 1), "rw-p");
        assert_eq!(stack.top() as usize % 16, 0);
    }
}
