//! base64url without padding (RFC 4648 §5), the encoding of every token part; and a lenient
//! reader for the `bytes` of A2A messages, which clients send in either alphabet.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Marks a byte outside the alphabet in [`DECODE`].
const INVALID: u8 = 0xff;

/// Each byte's six bits, or [`INVALID`]: built from [`ALPHABET`] at compile time, so decoding
/// (data parts up to 1 MiB) is one load per character rather than a search of the alphabet.
const DECODE: [u8; 256] = {
    let mut table = [INVALID; 256];
    let mut i = 0;
    while i < ALPHABET.len() {
        table[ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    table
};

pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// Decode; `None` for a character outside the alphabet, padding, or an impossible length or
/// trailing bits (so every byte string has exactly one encoding and a token cannot be altered
/// without changing its text).
pub fn decode(text: &str) -> Option<Vec<u8>> {
    if text.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for chunk in text.as_bytes().chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            let v = DECODE[usize::from(c)];
            if v == INVALID {
                return None;
            }
            n |= u32::from(v) << (18 - 6 * i);
        }
        let bytes = chunk.len() - 1;
        if n & ((1 << (24 - 8 * bytes)) - 1) != 0 {
            return None;
        }
        out.extend((0..bytes).map(|i| (n >> (16 - 8 * i)) as u8));
    }
    Some(out)
}

/// Encode in the standard alphabet with padding (RFC 4648 §4): ProtoJSON's `bytes`, which every
/// client's decoder reads.
pub fn encode_standard(bytes: &[u8]) -> String {
    let mut out = encode(bytes).replace('-', "+").replace('_', "/");
    while !out.len().is_multiple_of(4) {
        out.push('=');
    }
    out
}

/// Decode base64 in the standard (RFC 4648 §4) or the URL alphabet, padded or not — what
/// ProtoJSON accepts for `bytes`. Padding, when present, must complete the last group; the two
/// alphabets may not be mixed.
pub fn decode_any(text: &str) -> Option<Vec<u8>> {
    let unpadded = text.trim_end_matches('=');
    let padding = text.len() - unpadded.len();
    if padding > 2 || (padding > 0 && !text.len().is_multiple_of(4)) {
        return None;
    }
    let standard = unpadded.contains(['+', '/']);
    if standard && unpadded.contains(['-', '_']) {
        return None;
    }
    if standard {
        decode(&unpadded.replace('+', "-").replace('/', "_"))
    } else {
        decode(unpadded)
    }
}

#[cfg(test)]
mod tests;
