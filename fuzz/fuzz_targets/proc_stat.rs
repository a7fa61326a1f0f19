//! `/proc/<pid>/stat` lines: the start token, when found, is one non-empty field free of the
//! ASCII whitespace the kernel separates fields with, taken from after the line's last `)`.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mur::sys::proc::{start_token_from_stat, state_from_stat};

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(token) = start_token_from_stat(line) {
        assert!(!token.is_empty() && !token.bytes().any(|b| b.is_ascii_whitespace()));
        let after = &line[line.rfind(')').expect("a token implies a close paren")..];
        assert!(after.contains(token));
    }
    if let Some(state) = state_from_stat(line) {
        assert!(!state.is_empty());
    }
});
