//! JSON-RPC at a public echo door: every body gets HTTP 200 and a JSON-RPC 2.0 answer that is
//! exactly one of result or error, with a scalar id.
#![no_main]
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use libfuzzer_sys::fuzz_target;
use mur::id::SessionId;
use mur::json::manifest::Lifecycle;
use mur::net::server::{Handler, Request};
use mur::session::door::Door;
use mur::session::tasks::{Capsule, Engine};

fuzz_target!(|data: &[u8]| {
    let door = Door {
        session_id: SessionId::parse("ses_0199c4e2f1b7712a9d3e4f5061728394").unwrap(),
        name: "echo".into(),
        version: "0".into(),
        addr: "127.0.0.1:1".into(),
        engine: Engine::new(
            Capsule::Echo,
            Lifecycle::default(),
            vec![],
            Arc::new(Vec::new),
            None,
        ),
        auth: None,
        control: None,
        stop_requested: AtomicBool::new(false),
    };
    let response = door.handle(Request {
        method: "POST".into(),
        path: "/".into(),
        headers: vec![],
        body: data.to_vec(),
        peer: "127.0.0.1:2".parse().unwrap(),
        keep_alive: true,
    });
    assert_eq!(response.status, 200);
    let answer: serde_json::Value = serde_json::from_slice(&response.body).expect("JSON answer");
    assert_eq!(answer["jsonrpc"], "2.0");
    assert!(answer.get("result").is_some() != answer.get("error").is_some());
    assert!(matches!(
        answer["id"],
        serde_json::Value::Null | serde_json::Value::String(_) | serde_json::Value::Number(_)
    ));
});
