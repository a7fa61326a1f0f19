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

/// How many kernel bytes a thread draws at once for [`batched`].
const BATCH: usize = 512;

thread_local! {
    /// This thread's unused kernel bytes for [`batched`] and how many of them are spent.
    static DRAWN: std::cell::RefCell<([u8; BATCH], usize)> =
        const { std::cell::RefCell::new(([0; BATCH], BATCH)) };
}

/// `N` random bytes from the kernel drawn `BATCH` at a time per thread: for ids, of which a
/// busy door mints two a request (a task's and its context's) — one `getrandom(2)` each was two
/// system calls of about nine per answered request. Each byte is handed out once, never again;
/// keys ([`bytes`]) are never drawn from a batch, so a key's bytes never sat in memory before it.
/// A child forked from this process inherits the unused bytes: only a child that execs (all of
/// mur's do) may call this safely, which is why keys do not use it.
pub fn batched<const N: usize>() -> Result<[u8; N], String> {
    const { assert!(N <= BATCH) };
    DRAWN.with(|drawn| {
        let (pool, spent) = &mut *drawn.borrow_mut();
        if BATCH - *spent < N {
            fill(pool)?;
            *spent = 0;
        }
        let mut out = [0u8; N];
        out.copy_from_slice(&pool[*spent..*spent + N]);
        // Spent bytes are wiped: nothing handed out stays behind to be read twice.
        pool[*spent..*spent + N].fill(0);
        *spent += N;
        Ok(out)
    })
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

    /// Batched draws never hand out the same bytes twice, across refills too.
    #[test]
    fn batched_draws_are_each_fresh() {
        let draws: Vec<[u8; 16]> = (0..100).map(|_| super::batched::<16>().unwrap()).collect();
        let distinct: std::collections::HashSet<_> = draws.iter().collect();
        assert_eq!(distinct.len(), draws.len(), "100 draws over three refills");
        assert!(draws.iter().all(|d| *d != [0u8; 16]));
    }

    /// Longer than one `getentropy` call may give (256 bytes): filled across several draws.
    #[test]
    fn a_long_buffer_is_filled_to_its_end() {
        let long = super::bytes::<1000>().unwrap();
        assert_ne!(long[744..], [0u8; 256]);
    }
}
