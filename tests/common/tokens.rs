//! Tokens: base64url, a token's payload, and finding token texts in bytes or in a process's
//! memory.

use std::collections::BTreeSet;
use std::fs;
use std::io::{Read, Seek, SeekFrom};

use serde_json::Value;

/// Every distinct `PREFIX<b64url>.<b64url>` token text in the memory of `pid` (its writable
/// mappings), read through `/proc/<pid>/mem`. `Err` when the memory cannot be read.
pub fn tokens_in_memory(pid: u32, prefix: &str) -> Result<BTreeSet<String>, String> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).map_err(|e| e.to_string())?;
    let mut mem = fs::File::open(format!("/proc/{pid}/mem")).map_err(|e| e.to_string())?;
    let mut found = BTreeSet::new();
    let mut read_any = false;
    for line in maps.lines() {
        let mut parts = line.split_whitespace();
        let (Some(range), Some(perms)) = (parts.next(), parts.next()) else {
            continue;
        };
        if !perms.starts_with("rw") || line.contains("[vvar") || line.contains("[vsyscall]") {
            continue;
        }
        let Some((start, end)) = range.split_once('-') else {
            continue;
        };
        let (start, end) = (
            u64::from_str_radix(start, 16).unwrap(),
            u64::from_str_radix(end, 16).unwrap(),
        );
        if end - start > 256 << 20 {
            continue;
        }
        let mut bytes = vec![0u8; (end - start) as usize];
        if mem.seek(SeekFrom::Start(start)).is_err() || mem.read_exact(&mut bytes).is_err() {
            continue;
        }
        read_any = true;
        found.extend(find_tokens(&bytes, prefix));
    }
    if read_any {
        Ok(found)
    } else {
        Err(format!("no mapping of {pid} could be read"))
    }
}

/// Whether `candidate` is shaped `PREFIX<b64url>.<b64url(32 bytes)>` with a payload that decodes
/// to JSON.
pub fn is_token(candidate: &str) -> bool {
    let parts: Vec<&str> = candidate.split('.').collect();
    parts.len() == 3
        && parts[2].len() == 43
        && b64_decode(parts[1])
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .is_some()
}

/// Every `PREFIX<b64url>.<b64url>` in `bytes` whose payload decodes to JSON.
pub fn find_tokens(bytes: &[u8], prefix: &str) -> BTreeSet<String> {
    let p = prefix.as_bytes();
    let mut found = BTreeSet::new();
    let mut i = 0;
    while i + p.len() <= bytes.len() {
        if &bytes[i..i + p.len()] != p {
            i += 1;
            continue;
        }
        let mut j = i + p.len();
        while j < bytes.len()
            && (bytes[j].is_ascii_alphanumeric() || matches!(bytes[j], b'-' | b'_' | b'.'))
        {
            j += 1;
        }
        let candidate = String::from_utf8_lossy(&bytes[i..j]).into_owned();
        if is_token(&candidate) {
            found.insert(candidate);
        }
        i = j.max(i + 1);
    }
    found
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// base64url without padding.
pub fn b64_encode(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &b)| acc | (u32::from(b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

pub fn b64_decode(text: &str) -> Option<Vec<u8>> {
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for c in text.bytes() {
        let v = B64.iter().position(|&b| b == c)? as u32;
        bits = (bits << 6) | v;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
        }
    }
    Some(out)
}

/// The JSON payload of a `prefix.payload.mac` token.
pub fn token_payload(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("a token has a payload");
    serde_json::from_slice(&b64_decode(payload).expect("b64url")).expect("JSON payload")
}
