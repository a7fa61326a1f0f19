//! A door's answer as mur's probes and calls read it: framing by length, chunks or close never
//! panics whatever a door (or whatever holds a stale record's port) sends, and a body is never
//! longer than 1 MiB or than what was sent.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mur::net::client::{MAX_RESPONSE_BYTES, complete_response};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(response)) = complete_response(data) {
        assert!(response.body.len() <= MAX_RESPONSE_BYTES);
        assert!(response.body.len() <= data.len());
    }
});
