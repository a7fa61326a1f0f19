//! Ids and addresses: an id that parses re-parses to itself and has its exact shape; resolving
//! any address among a few records never panics and only ever names one of them.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mur::address::{Named, resolve};
use mur::id::{FormationId, SessionId};
use mur::json::record::RunningRecord;
use mur::running::Entry;
use mur::sys::dir::Dir;

/// `/`, opened once: entries need a directory to name, and resolving never touches it.
fn root() -> &'static Dir {
    static ROOT: std::sync::OnceLock<Dir> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| Dir::open(std::path::Path::new("/")).expect("open /"))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(id) = SessionId::parse(text) {
        assert_eq!(id.as_str(), text);
        assert_eq!(text.len(), 36);
    }
    let _ = FormationId::parse(text);
    let entries: Vec<Entry> = [
        "0199c4e2f1b7712a9d3e4f5061728391",
        "0199c4e2f1b7712a9d3e4f5061728392",
    ]
    .iter()
    .map(|hex| {
        let json = serde_json::json!({"session_id": format!("ses_{hex}"), "url": "127.0.0.1:1",
                "pid": 1, "process_start": "1", "capsule_name": "c", "capsule_version": "1",
                "workdir": "/", "outlives_launcher": true, "started_at": "2026-01-01T00:00:00Z",
                "formation_id": format!("frm_{hex}")});
        let record = RunningRecord::from_slice(json.to_string().as_bytes()).unwrap();
        Entry::new(root(), "x.json", record)
    })
    .collect();
    match resolve(text, &entries) {
        Ok(Named::Session(e)) => assert!(entries.iter().any(|x| x.record == e.record)),
        Ok(Named::Formation(_, members)) => assert!(!members.is_empty()),
        Err(_) => {}
    }
});
