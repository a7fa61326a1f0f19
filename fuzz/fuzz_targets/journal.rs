//! The task journal (a named session's store): whatever reads is a prefix of the input, and
//! every entry read writes back to the same bytes; reducing what was read never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mur::session::journal::format::{self, Damage};

fuzz_target!(|data: &[u8]| {
    let (entries, damage) = format::read(data);
    let valid = match damage {
        None => data.len(),
        Some(Damage::Torn { valid } | Damage::Corrupt { valid, .. }) => valid,
    };
    assert!(valid <= data.len());
    if valid >= format::MAGIC.len() {
        let mut again = format::MAGIC.to_vec();
        for entry in &entries {
            format::encode(&mut again, &entry.header, &entry.body);
        }
        assert_eq!(format::read(&again).0.len(), entries.len());
    }
    format::reduce(entries);
});
