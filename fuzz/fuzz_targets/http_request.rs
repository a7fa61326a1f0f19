//! The door's request framing: a parsed request never carries more than 1 MiB of body, consumes
//! exactly its head and body from the buffer, and splitting the input anywhere gives the same
//! request (so a slow client is framed like a fast one).
#![no_main]
use libfuzzer_sys::fuzz_target;
use mur::net::server::{MAX_BODY, parse_buffered};

fuzz_target!(|data: &[u8]| {
    let peer = "127.0.0.1:1".parse().unwrap();
    let mut whole = data.to_vec();
    let parsed = parse_buffered(&mut whole, peer);
    if let Ok(Some(request)) = &parsed {
        assert!(request.body.len() <= MAX_BODY);
        assert!(whole.len() + request.body.len() <= data.len());
        // Fed in two pieces, the same request comes out once the second piece arrives.
        let cut = data.len() / 2;
        let mut piecewise = data[..cut].to_vec();
        let first = parse_buffered(&mut piecewise, peer);
        if !matches!(first, Ok(Some(_))) {
            piecewise.extend_from_slice(&data[cut..]);
            if let Ok(Some(again)) = parse_buffered(&mut piecewise, peer) {
                assert_eq!(again.method, request.method);
                assert_eq!(again.path, request.path);
                assert_eq!(again.body, request.body);
            }
        }
    }
    if let Err(response) = parsed {
        assert!(
            matches!(response.status, 400 | 413 | 431 | 501),
            "{}",
            response.status
        );
    }
});
