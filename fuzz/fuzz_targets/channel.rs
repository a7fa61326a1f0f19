//! Formation channel lines: whatever parses as a first line re-serializes to a line that parses
//! to an equal one; an error is one fixed sentence with a category and a column, and so can never
//! repeat any part of the line (which may hold tokens).
#![no_main]
use libfuzzer_sys::fuzz_target;
use mur::json::channel::{self, Addresses, Hello};

fuzz_target!(|data: &[u8]| {
    let mut reader = std::io::BufReader::new(data);
    while let Ok(Some(line)) = channel::read_line(&mut reader) {
        assert!(line.len() <= channel::MAX_LINE);
        match channel::parse::<Hello>(&line, "first") {
            Ok(hello) => {
                let again = channel::line(&hello);
                let parsed: Hello = channel::parse(&again[..again.len() - 1], "first").unwrap();
                assert_eq!(parsed, hello);
            }
            Err(why) => {
                let rest = why
                    .strip_prefix("the formation channel's first line is malformed (")
                    .and_then(|r| r.strip_suffix(')'))
                    .expect("the fixed sentence");
                let (category, column) = rest.split_once(" error at column ").expect("shape");
                assert!(
                    matches!(category, "Io" | "Syntax" | "Data" | "Eof"),
                    "{why}"
                );
                assert!(column.parse::<usize>().is_ok(), "{why}");
            }
        }
        let _ = channel::parse::<Addresses>(&line, "address");
    }
});
