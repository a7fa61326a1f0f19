//! Identifiers and records made the way `mur` makes them, and reading `mur ps --json`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::process::Proc;

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// `PREFIX` + the 32 lowercase hex digits of a UUIDv7 minted at Unix-ms `ms`.
pub fn id_at(prefix: &str, ms: u64) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let seed = splitmix(n ^ (u64::from(std::process::id()) << 32) ^ now_ms().rotate_left(17));
    let rand_a = seed & 0xfff;
    let rand_b = (splitmix(seed) & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{prefix}{:012x}7{rand_a:03x}{rand_b:016x}",
        ms & 0xffff_ffff_ffff
    )
}

/// Now in Unix ms, but strictly later than every earlier call in this process: ids minted one
/// after the other sort in the order they were minted, as `mur` assumes of real ones.
fn next_ms() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let mut last = LAST.load(Ordering::SeqCst);
    loop {
        let next = now_ms().max(last + 1);
        match LAST.compare_exchange(last, next, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return next,
            Err(actual) => last = actual,
        }
    }
}

/// A fresh session id, minted now, later than every one minted before it.
pub fn session_id() -> String {
    id_at("ses_", next_ms())
}

/// A fresh formation id, minted now.
pub fn formation_id() -> String {
    id_at("frm_", next_ms())
}

/// `id` with its last characters replaced by `suffix` (lowercase hex).
pub fn with_suffix(id: &str, suffix: &str) -> String {
    format!("{}{suffix}", &id[..id.len() - suffix.len()])
}

/// Now as RFC 3339 UTC, less `ago_secs` (mur's own formatter, pinned by known-date vectors in
/// `src/time.rs`).
pub fn rfc3339_ago(ago_secs: u64) -> String {
    mur::time::format_rfc3339(mur::time::unix_now() - ago_secs as i64)
}

/// A record with exactly the nine required keys.
pub fn record(session_id: &str, pid: u32, process_start: &str, url: &str) -> Value {
    json!({
        "session_id": session_id,
        "url": url,
        "pid": pid,
        "process_start": process_start,
        "capsule_name": "echo",
        "capsule_version": "0.1.0",
        "workdir": "/tmp",
        "outlives_launcher": true,
        "started_at": rfc3339_ago(90),
    })
}

/// A record naming `process` (its pid and its real start time).
pub fn record_for(session_id: &str, process: &Proc, url: &str) -> Value {
    record(session_id, process.pid(), &process.start(), url)
}

/// A pseudo-random `u64` (not for secrets): different on every call.
pub fn random_u64() -> u64 {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    splitmix(
        nanos ^ (u64::from(std::process::id()) << 40) ^ splitmix(N.fetch_add(1, Ordering::Relaxed)),
    )
}

/// Write `bytes` to `path`, mode `0600`.
pub fn write_private(path: &Path, bytes: &[u8]) {
    fs::write(path, bytes).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
}

/// Write `record` as `<dir>/<session_id>.json` the way `mur` does: a `0600` staging file whose
/// name does not end in `.json`, renamed into place, so no reader ever sees it half-written.
pub fn write_record_atomically(dir: &Path, record: &Value) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let id = record["session_id"].as_str().expect("session_id");
    let target = dir.join(format!("{id}.json"));
    let staging = dir.join(format!(
        ".{id}.json.test{}.{}.tmp",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    fs::write(&staging, serde_json::to_vec(record).unwrap()).unwrap();
    fs::set_permissions(&staging, fs::Permissions::from_mode(0o600)).unwrap();
    fs::rename(&staging, &target).unwrap();
    target
}

// ---------------------------------------------------------------------------------------------
// Reading `mur ps`
// ---------------------------------------------------------------------------------------------

/// `mur ps --json`'s rows: its `capsules` array, one object per session.
pub fn ps_rows(doc: &Value) -> Vec<Value> {
    doc["capsules"]
        .as_array()
        .unwrap_or_else(|| panic!("no capsules array in {doc}"))
        .clone()
}

/// The `mur ps --json` row (capsule object) of `session_id`, if listed.
pub fn ps_row<'a>(doc: &'a Value, session_id: &str) -> Option<&'a Value> {
    doc["capsules"]
        .as_array()?
        .iter()
        .find(|c| c["session_id"] == session_id)
}

/// The status `mur ps --json` gives `session_id`, or `None` when it is not listed.
pub fn status_of(doc: &Value, session_id: &str) -> Option<String> {
    ps_row(doc, session_id).map(|c| c["status"].as_str().unwrap_or("").to_string())
}
