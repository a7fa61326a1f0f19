//! The roster: parsing and admission never panic, and a roster admission accepts has unique,
//! well-formed names, exactly one entry, and no edge into the entry or out of a non-member.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mur::json::manifest::is_valid_name;
use mur::json::roster::Roster;

fuzz_target!(|data: &[u8]| {
    let Ok(roster) = Roster::from_slice(data) else {
        return;
    };
    let dir = std::env::temp_dir();
    if let Ok(formation) = mur::formation::admission::check(&roster, &dir) {
        assert_eq!(formation.members.iter().filter(|m| m.entry).count(), 1);
        let entry = formation.entry().name.clone();
        let mut names: Vec<&str> = formation.members.iter().map(|m| m.name.as_str()).collect();
        assert!(names.iter().all(|n| is_valid_name(n)));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), formation.members.len());
        for member in &formation.members {
            assert!(!member.callees.contains(&entry));
            assert!(!member.callees.contains(&member.name));
            assert!(member.callees.iter().all(|c| names.contains(&c.as_str())));
        }
    }
});
