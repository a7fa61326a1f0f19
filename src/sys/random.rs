//! Randomness straight from the kernel, no userspace generator to seed or fork: `getrandom(2)`
//! on Linux, `getentropy(2)` on macOS (which has no `getrandom`).

/// Fill `buf` with random bytes from the kernel, retrying on `EINTR` and short reads.
///
/// The `Err` is the OS error; callers treat it as fatal for whatever needed the bytes (a token
/// key drawn from a weak source would be worse than no session).
pub fn fill(buf: &mut [u8]) -> Result<(), String> {
    let mut filled = 0;
    while filled < buf.len() {
        match draw(&mut buf[filled..]) {
            Ok(n) => filled += n,
            Err(err) if err.raw_os_error() == Some(libc::EINTR) => {}
            Err(err) => return Err(format!("{DRAW} failed: {err}")),
        }
    }
    Ok(())
}

#[cfg(not(target_vendor = "apple"))]
const DRAW: &str = "getrandom";

/// One `getrandom(2)` into `rest`: how many bytes it wrote (possibly fewer than asked).
#[cfg(not(target_vendor = "apple"))]
fn draw(rest: &mut [u8]) -> std::io::Result<usize> {
    // SAFETY: the pointer and length describe `rest`, a live, writable slice; flags 0 blocks
    // until the pool is initialised, which happens once, early in boot.
    let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
    usize::try_from(n).map_err(|_| std::io::Error::last_os_error())
}

#[cfg(target_vendor = "apple")]
const DRAW: &str = "getentropy";

/// The most `getentropy(2)` hands out in one call; asking for more fails `EINVAL`.
#[cfg(target_vendor = "apple")]
const ENTROPY_CALL_MAX: usize = 256;

/// One `getentropy(2)` into the first (at most 256) bytes of `rest`: how many it filled.
#[cfg(target_vendor = "apple")]
fn draw(rest: &mut [u8]) -> std::io::Result<usize> {
    let len = rest.len().min(ENTROPY_CALL_MAX);
    // SAFETY: the pointer and `len` (at most the slice's length) describe live, writable bytes.
    if unsafe { libc::getentropy(rest.as_mut_ptr().cast(), len) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(len)
}

/// `N` random bytes.
pub fn bytes<const N: usize>() -> Result<[u8; N], String> {
    let mut buf = [0u8; N];
    fill(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_draws_differ_and_are_not_zero() {
        let a = super::bytes::<32>().unwrap();
        let b = super::bytes::<32>().unwrap();
        assert_ne!(a, b);
        assert_ne!(a, [0u8; 32]);
    }

    /// Longer than one `getentropy` call may give (256 bytes): filled across several draws.
    #[test]
    fn a_long_buffer_is_filled_to_its_end() {
        let long = super::bytes::<1000>().unwrap();
        assert_ne!(long[744..], [0u8; 256]);
    }
}
