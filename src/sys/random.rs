//! Randomness straight from the kernel: `getrandom(2)`, no userspace generator to seed or fork.

/// Fill `buf` with random bytes from `getrandom(2)`, retrying on `EINTR` and short reads.
///
/// The `Err` is the OS error; callers treat it as fatal for whatever needed the bytes (a token
/// key drawn from a weak source would be worse than no session).
pub fn fill(buf: &mut [u8]) -> Result<(), String> {
    let mut filled = 0;
    while filled < buf.len() {
        let rest = &mut buf[filled..];
        // SAFETY: the pointer and length describe `rest`, a live, writable slice; flags 0 blocks
        // until the pool is initialised, which happens once, early in boot.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(format!("getrandom failed: {err}"));
        }
        filled += n as usize;
    }
    Ok(())
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
}
