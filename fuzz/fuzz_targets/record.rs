//! The running record: whatever parses re-serializes to bytes that parse to an equal record.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mur::json::record::RunningRecord;

fuzz_target!(|data: &[u8]| {
    if let Ok(record) = RunningRecord::from_slice(data) {
        let again = RunningRecord::from_slice(&record.to_bytes()).expect("a written record parses");
        assert_eq!(again, record);
        assert!(record.session_id.as_str().starts_with("ses_"));
    }
});
