//! `memcpy` and `memmove` for the static x86_64 musl build, in place of musl's (the copies
//! themselves are compiled, and tested, on every x86_64 build).
//!
//! musl's x86_64 `memcpy` (`src/string/x86_64/memcpy.s`) copies with `rep movsq` and then byte
//! by byte with `movsb`, whatever the length: every copy pays the string instructions' start-up
//! cost, and the door makes hundreds of copies per request, nearly all of 1 to 40 bytes
//! (`serde_json` writing punctuation, `format!` writing a digit). Profiled under load (issue 26),
//! it was 27% of the installed binary's door time against 2.6% for glibc's `memcpy` in the glibc
//! build. These two do what glibc's do for small copies — a few overlapping unaligned loads,
//! then the stores — and leave long copies (over 64 bytes) to `rep movsb`, which processors with
//! ERMS/FSRM run at full speed.
//!
//! Both are defined together: musl's `memmove` jumps into its `memcpy` object
//! (`__memcpy_fwd`), so defining `memcpy` alone would pull that object in beside this one. The
//! static linker takes a symbol from `libc.a` only when nothing before it defines the symbol, so
//! these replace musl's for the whole program, musl's own callers included. There is no loop here
//! for the compiler to turn back into a call to `memcpy`.

use core::arch::asm;
use core::ptr::{read_unaligned, write_unaligned};

/// Copy `n <= 64` bytes from `src` to `dest`, every load before any store, so the two may
/// overlap.
///
/// # Safety
/// `src` must be valid for reads and `dest` for writes of `n` bytes, and `n <= 64`.
#[inline(always)]
unsafe fn copy_small(dest: *mut u8, src: *const u8, n: usize) {
    // SAFETY: every access below lies within the first `n` bytes of `src` or `dest` (each
    // branch's length bounds make `n - k >= 0` and `n - k + k <= n`), which the caller vouches
    // for; the reads and writes are unaligned ones.
    unsafe {
        if n > 32 {
            let a = read_unaligned(src.cast::<u128>());
            let b = read_unaligned(src.add(16).cast::<u128>());
            let c = read_unaligned(src.add(n - 32).cast::<u128>());
            let d = read_unaligned(src.add(n - 16).cast::<u128>());
            write_unaligned(dest.cast::<u128>(), a);
            write_unaligned(dest.add(16).cast::<u128>(), b);
            write_unaligned(dest.add(n - 32).cast::<u128>(), c);
            write_unaligned(dest.add(n - 16).cast::<u128>(), d);
        } else if n > 16 {
            let a = read_unaligned(src.cast::<u128>());
            let b = read_unaligned(src.add(n - 16).cast::<u128>());
            write_unaligned(dest.cast::<u128>(), a);
            write_unaligned(dest.add(n - 16).cast::<u128>(), b);
        } else if n >= 8 {
            let a = read_unaligned(src.cast::<u64>());
            let b = read_unaligned(src.add(n - 8).cast::<u64>());
            write_unaligned(dest.cast::<u64>(), a);
            write_unaligned(dest.add(n - 8).cast::<u64>(), b);
        } else if n >= 4 {
            let a = read_unaligned(src.cast::<u32>());
            let b = read_unaligned(src.add(n - 4).cast::<u32>());
            write_unaligned(dest.cast::<u32>(), a);
            write_unaligned(dest.add(n - 4).cast::<u32>(), b);
        } else if n >= 2 {
            let a = read_unaligned(src.cast::<u16>());
            let b = read_unaligned(src.add(n - 2).cast::<u16>());
            write_unaligned(dest.cast::<u16>(), a);
            write_unaligned(dest.add(n - 2).cast::<u16>(), b);
        } else if n == 1 {
            *dest = *src;
        }
    }
}

/// Copy `n` bytes forward with `rep movsb`.
///
/// # Safety
/// `src` must be valid for reads and `dest` for writes of `n` bytes; if they overlap, `dest`
/// must not lie after `src`.
#[inline(always)]
unsafe fn copy_forward(dest: *mut u8, src: *const u8, n: usize) {
    // SAFETY: `rep movsb` copies `rcx` bytes from `rsi` to `rdi`, ascending (the ABI keeps the
    // direction flag clear): within the ranges the caller vouches for. It touches no stack and
    // clobbers only the three registers named.
    unsafe {
        asm!(
            "rep movsb",
            inout("rcx") n => _,
            inout("rdi") dest => _,
            inout("rsi") src => _,
            options(nostack, preserves_flags)
        );
    }
}

/// What `memcpy` does: copy `n` bytes from `src` to `dest`, which do not overlap.
///
/// # Safety
/// As C's `memcpy`: `src` valid for reads and `dest` for writes of `n` bytes, not overlapping.
#[inline(always)]
pub unsafe fn copy(dest: *mut u8, src: *const u8, n: usize) {
    // SAFETY: the caller's promise is each helper's.
    unsafe {
        if n <= 64 {
            copy_small(dest, src, n);
        } else {
            copy_forward(dest, src, n);
        }
    }
}

/// What `memmove` does: copy `n` bytes from `src` to `dest`, which may overlap.
///
/// # Safety
/// As C's `memmove`: `src` valid for reads and `dest` for writes of `n` bytes.
#[inline(always)]
pub unsafe fn copy_overlapping(dest: *mut u8, src: *const u8, n: usize) {
    if n <= 64 {
        // SAFETY: the caller's promise; `copy_small` loads everything before it stores.
        unsafe { copy_small(dest, src, n) };
    } else if (dest as usize).wrapping_sub(src as usize) >= n {
        // `dest` before `src`, or past its end: an ascending copy never overwrites a byte it
        // has yet to read.
        // SAFETY: the caller's promise, and the order just checked.
        unsafe { copy_forward(dest, src, n) };
    } else {
        // `dest` inside `src..src + n`: copy descending, from the last byte.
        // SAFETY: with the direction flag set, `rep movsb` copies `rcx` bytes from `rsi` to
        // `rdi` descending, so starting at the last byte of each range it stays within the
        // ranges the caller vouches for; the flag is cleared again before returning, as the ABI
        // requires.
        unsafe {
            asm!(
                "std",
                "rep movsb",
                "cld",
                inout("rcx") n => _,
                inout("rdi") dest.add(n - 1) => _,
                inout("rsi") src.add(n - 1) => _,
                options(nostack)
            );
        }
    }
}

/// C's `memcpy`, for the musl build (the module's doc says why).
///
/// # Safety
/// As C's: `src` valid for reads and `dest` for writes of `n` bytes, not overlapping.
#[cfg(target_env = "musl")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcpy(dest: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller's promise is `copy`'s.
    unsafe { copy(dest, src, n) };
    dest
}

/// C's `memmove`, for the musl build (the module's doc says why).
///
/// # Safety
/// As C's: `src` valid for reads and `dest` for writes of `n` bytes.
#[cfg(target_env = "musl")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memmove(dest: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller's promise is `copy_overlapping`'s.
    unsafe { copy_overlapping(dest, src, n) };
    dest
}

#[cfg(test)]
mod tests {
    use super::{copy, copy_overlapping};

    /// Every length to 200 and every offset to 16, against a byte-by-byte reference, both
    /// directions of overlap for `memmove`.
    #[test]
    fn copies_match_a_bytewise_copy() {
        let source: Vec<u8> = (0..512u32).map(|i| (i * 7 + 3) as u8).collect();
        for n in 0..200 {
            for off in 0..16 {
                let mut got = vec![0u8; 512];
                // SAFETY: both ranges lie within their 512-byte buffers.
                unsafe { copy(got.as_mut_ptr().add(off), source.as_ptr().add(3), n) };
                let mut want = vec![0u8; 512];
                want[off..off + n].copy_from_slice(&source[3..3 + n]);
                assert_eq!(got, want, "memcpy n={n} off={off}");

                for (from, to) in [(off, 20), (20, off), (off, off)] {
                    let mut got = source.clone();
                    let p = got.as_mut_ptr();
                    // SAFETY: both ranges lie within the 512-byte buffer.
                    unsafe { copy_overlapping(p.add(to), p.add(from), n) };
                    let mut want = source.clone();
                    want.copy_within(from..from + n, to);
                    assert_eq!(got, want, "memmove n={n} from={from} to={to}");
                }
            }
        }
    }
}
