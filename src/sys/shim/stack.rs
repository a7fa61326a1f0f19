//! The stacks a task's subreaper and its handler (before the exec) run on: one mapping, each
//! stack with an inaccessible guard page below it, so an overrun faults instead of writing into
//! whatever the heap put next to it.

use std::io;

/// How much stack each of the two gets: their calls are raw system calls and a few hundred
/// bytes of frame, plus the subreaper's 512-byte read buffer.
const STACK: usize = 64 * 1024;

/// `[guard][handler stack][guard][subreaper stack]`, unmapped on drop.
pub struct Stacks {
    base: *mut libc::c_void,
    page: usize,
}

// SAFETY: the mapping is owned by this value alone; moving it between threads moves nothing.
unsafe impl Send for Stacks {}

impl Stacks {
    pub fn map() -> io::Result<Self> {
        // SAFETY: sysconf takes an integer.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096);
        let stack = STACK.next_multiple_of(page);
        let len = 2 * (page + stack);
        // SAFETY: an anonymous private mapping the kernel places; no pointer is passed in.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stacks = Self { base, page };
        for guard in [0, page + stack] {
            // SAFETY: a page-aligned page inside the mapping just made.
            if unsafe { libc::mprotect(stacks.at(guard), page, libc::PROT_NONE) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(stacks)
    }

    fn stack(&self) -> usize {
        STACK.next_multiple_of(self.page)
    }

    fn at(&self, offset: usize) -> *mut libc::c_void {
        // SAFETY: callers pass offsets within the mapping (at most its length).
        unsafe { self.base.cast::<u8>().add(offset).cast() }
    }

    /// The top of the handler's stack (16-byte aligned: page-aligned).
    pub fn handler_top(&self) -> *mut libc::c_void {
        self.at(self.page + self.stack())
    }

    /// The top of the subreaper's stack, the end of the mapping.
    pub fn reaper_top(&self) -> *mut libc::c_void {
        self.at(2 * (self.page + self.stack()))
    }
}

impl Drop for Stacks {
    fn drop(&mut self) {
        // SAFETY: the whole mapping made in `map`; nothing runs on it any more (the owner keeps
        // it until the subreaper is reaped, or leaks it).
        unsafe { libc::munmap(self.base, 2 * (self.page + self.stack())) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stack_sits_above_an_inaccessible_page() {
        let stacks = Stacks::map().unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let base = stacks.base as usize;
        let perms = |addr: usize| {
            maps.lines()
                .find_map(|line| {
                    let (range, rest) = line.split_once(' ')?;
                    let (lo, hi) = range.split_once('-')?;
                    let (lo, hi) = (
                        usize::from_str_radix(lo, 16).ok()?,
                        usize::from_str_radix(hi, 16).ok()?,
                    );
                    (lo..hi).contains(&addr).then(|| rest[..4].to_string())
                })
                .unwrap()
        };
        let stack = stacks.stack();
        assert_eq!(perms(base), "---p", "guard below the handler's stack");
        assert_eq!(perms(base + stacks.page), "rw-p");
        assert_eq!(
            perms(base + stacks.page + stack),
            "---p",
            "guard below the subreaper's"
        );
        assert_eq!(perms(stacks.reaper_top() as usize - 1), "rw-p");
        assert_eq!(stacks.handler_top() as usize % 16, 0);
    }
}
