//! JSON-RPC at a public echo door, in both A2A generations: every body, under any `A2A-Version`
//! header, gets HTTP 200 and a JSON-RPC 2.0 answer that is exactly one of result or error, with a
//! scalar id; under `A2A-Version: 1.0` every error is ProtoJSON, carrying a `google.rpc.ErrorInfo`.
//!
//! The first byte picks the header: `1` is `1.0`, `0` is `0.3`, `h` takes the header's value
//! from the bytes up to the first newline; `{` and `[` start the body with no header (so the
//! seeds of the 0.3-only door still work), and any other byte means no header.
#![no_main]
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::task::{Poll, Waker};

use libfuzzer_sys::fuzz_target;
use mur::id::SessionId;
use mur::json::manifest::Lifecycle;
use mur::net::server::{Handler, Request};
use mur::session::budget::Budget;
use mur::session::door::Door;
use mur::session::tasks::{Capsule, Engine};

fuzz_target!(|data: &[u8]| {
    let engine = Engine::new(
        Capsule::Echo,
        Lifecycle::default(),
        vec![],
        Arc::new(Vec::new),
        None,
        None,
    );
    let door = Door {
        session_id: SessionId::parse("ses_0199c4e2f1b7712a9d3e4f5061728394").unwrap(),
        name: "echo".into(),
        version: "0".into(),
        addr: "127.0.0.1:1".into(),
        guests: Budget::guests(engine.budget()),
        engine,
        auth: None,
        control: None,
        cors: Vec::new(),
        advertise: None,
        stop_requested: Arc::new(AtomicBool::new(false)),
        streams: Arc::default(),
        public_card: std::sync::OnceLock::new(),
    };
    let (version, body): (Option<&[u8]>, &[u8]) = match data.split_first() {
        None => (None, data),
        Some((b'{' | b'[', _)) => (None, data),
        Some((b'1', rest)) => (Some(b"1.0"), rest),
        Some((b'0', rest)) => (Some(b"0.3"), rest),
        Some((b'h', rest)) => match rest.iter().position(|&b| b == b'\n') {
            Some(end) => (Some(&rest[..end]), &rest[end + 1..]),
            None => (Some(rest), &[]),
        },
        Some((_, rest)) => (None, rest),
    };
    let headers = version
        .map(|v| vec![("a2a-version".to_string(), v.to_vec())])
        .unwrap_or_default();
    let mut response = door.handle(Request {
        method: "POST".into(),
        path: "/".into(),
        headers,
        body: body.to_vec(),
        peer: "127.0.0.1:2".parse().unwrap(),
        keep_alive: true,
        hold: None,
    });
    // An answer that waits (a blocking send): the echo capsule settles at once.
    if let Some(mut deferred) = response.deferred.take() {
        response = ready(|waker| deferred.poll(waker));
    }
    assert_eq!(response.status, 200);
    // A stream (the echo capsule settles at once, so it ends): each piece one JSON-RPC answer.
    let bodies: Vec<Vec<u8>> = match response.stream {
        // Read while a piece comes: `murmur.WatchSession`'s stream never ends, and what it has
        // not got is not waited for. A keep-alive comment is a piece of no answer.
        Some(mut stream) => std::iter::from_fn(|| soon(|waker| stream.poll_next(waker)).flatten())
            .filter(|piece| !piece.starts_with(b":"))
            .map(|piece| {
                let text = String::from_utf8(piece).expect("events are UTF-8");
                let data = text.strip_prefix("data: ").expect("a data line");
                data.strip_suffix("\n\n")
                    .expect("one event")
                    .as_bytes()
                    .to_vec()
            })
            .collect(),
        None => vec![response.body],
    };
    assert!(!bodies.is_empty());
    for body in bodies {
        check(&body, version);
    }
});

/// One JSON-RPC 2.0 answer: exactly one of result or error, a scalar id, and under
/// `A2A-Version: 1.0` an error carrying a `google.rpc.ErrorInfo`.
fn check(body: &[u8], version: Option<&[u8]>) {
    let answer: serde_json::Value = serde_json::from_slice(body).expect("JSON answer");
    assert_eq!(answer["jsonrpc"], "2.0");
    assert!(answer.get("result").is_some() != answer.get("error").is_some());
    if version == Some(b"1.0") && answer.get("error").is_some() {
        assert_eq!(
            answer["error"]["data"][0]["@type"], "type.googleapis.com/google.rpc.ErrorInfo",
            "{answer}"
        );
    }
    assert!(matches!(
        answer["id"],
        serde_json::Value::Null | serde_json::Value::String(_) | serde_json::Value::Number(_)
    ));
}

/// What `poll` gives if it is ready within a few thousand tries (yielding between them), else
/// `None`: for a stream that may never end.
fn soon<T>(mut poll: impl FnMut(&Waker) -> Poll<T>) -> Option<T> {
    (0..10_000).find_map(|_| match poll(Waker::noop()) {
        Poll::Ready(out) => Some(out),
        Poll::Pending => {
            std::thread::yield_now();
            None
        }
    })
}

/// What `poll` gives once it is ready, polled again and again: what the door's server would
/// wait for with a waker, here only ever a moment away (the echo capsule).
fn ready<T>(mut poll: impl FnMut(&Waker) -> Poll<T>) -> T {
    loop {
        if let Poll::Ready(out) = poll(Waker::noop()) {
            return out;
        }
        std::thread::yield_now();
    }
}
