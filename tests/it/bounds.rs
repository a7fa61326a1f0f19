//! Nothing read before it is bounded and the caller known (issue 30, point 5), from the outside:
//! requests without a valid token, on every route, held open with their bodies unsent or all but
//! the last byte sent, never refuse the operator, never evict a finished task, and never make the
//! session hold their bodies; a request the budget refuses evicts nothing.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::home::Home;
use common::http::{HttpAnswer, http, parse_answer};
use common::session::Session;
use serde_json::{Value, json};

/// A door behind bearer tokens (one declared credential besides the operator), handler `cat`,
/// with a `/control` plane and the given memory budget.
fn guarded(home: &Home, budget_mib: u64) -> Session {
    let manifest = home.write_capsule(
        "guarded",
        json!({"name": "guarded", "version": "1.0.0",
               "lifecycle": {"memory_budget_mib": budget_mib},
               "control": {"settings": ["STYLE"], "secrets": ["API_KEY"]},
               "network": {"authentication": {"credentials": [
                   {"name": "sender", "scopes": ["message/send"]}]}}}),
        Some("#!/bin/sh\ncat\n"),
    );
    home.start(&[manifest.to_str().unwrap()])
}

fn connect(url: &str) -> TcpStream {
    let stream = TcpStream::connect(url).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
}

/// A request's head announcing a body of `len` bytes, with `authorization` as the header's
/// value when given.
fn head(method: &str, path: &str, authorization: Option<&str>, len: usize) -> String {
    let auth = authorization
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: {len}\r\n\r\n"
    )
}

/// The answer the door gave on `stream` so far, read until its head is whole (the door may
/// keep draining what the client sends: the connection need not close).
fn answer_head(stream: &mut TcpStream) -> HttpAnswer {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    while common::http::find(&bytes, b"\r\n\r\n").is_none() {
        let n = stream.read(&mut chunk).expect("an answer within 20 s");
        assert!(n > 0, "closed without an answer");
        bytes.extend_from_slice(&chunk[..n]);
    }
    parse_answer(&bytes).expect("an HTTP answer")
}

/// The JSON-RPC answer to `body` sent as `token` (HTTP 200 asserted).
fn rpc(session: &Session, token: &str, body: &Value) -> Value {
    let answer = http(
        &session.url,
        "POST",
        "/",
        Some(token),
        body.to_string().as_bytes(),
    )
    .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.head);
    serde_json::from_slice(&answer.body).unwrap()
}

/// A blocking `message/send` of `text` as `token`: the task it answers.
fn send(session: &Session, token: &str, text: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message":
        {"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": text}]}}});
    let task = rpc(session, token, &body);
    assert_eq!(task["result"]["status"]["state"], "completed", "{task}");
    task["result"].clone()
}

/// `tasks/get` of `id` as `token`: the JSON-RPC answer (HTTP 200 asserted).
fn get(session: &Session, token: &str, id: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": id}});
    rpc(session, token, &body)
}

/// A guarded session of `mib` MiB, the operator's token, and the id of a task it has finished.
fn with_a_finished_task(home: &Home, mib: u64) -> (Session, String, String) {
    let session = guarded(home, mib);
    let operator = home.token(&[&session.id]);
    let kept = send(&session, &operator, "kept");
    let id = kept["id"].as_str().unwrap().to_string();
    (session, operator, id)
}

/// 140 heads announcing 1 MB on `POST /` at an authenticated door, without a token or with a
/// forged one, held open without their bodies (they would fill the default 128 MiB budget if
/// counted): each is refused 401 from its head alone, while the operator is answered and a
/// finished task stays readable.
#[test]
fn anonymous_heads_never_refuse_the_operator_nor_evict_a_finished_task() {
    let home = Home::new();
    let (session, operator, id) = with_a_finished_task(&home, 128);
    let forged = format!("Bearer {}x", &operator[..operator.len() - 1]);
    let mut anonymous: Vec<TcpStream> = (0..140)
        .map(|n| {
            let mut stream = connect(&session.url);
            let auth = (n % 2 == 1).then_some(forged.as_str());
            stream
                .write_all(head("POST", "/", auth, 1_000_000).as_bytes())
                .unwrap();
            stream
        })
        .collect();
    for stream in &mut anonymous {
        let refused = answer_head(stream);
        assert_eq!(refused.status, 401, "{}", refused.head);
    }
    // The anonymous connections are still open (their bodies unsent): the operator is served.
    let task = send(&session, &operator, "operator");
    assert_eq!(common::session::artifact_text(&task), "operator");
    let read = get(&session, &operator, &id);
    assert_eq!(read["result"]["status"]["state"], "completed", "{read}");
    drop(anonymous);
}

/// 600 heads without a valid token announcing 16 KiB on `POST /` — small enough that the door
/// reads them, for the id its 401 echoes — held open without their bodies at a door with a
/// 16 MiB budget (they would hold 19 MiB if counted in the whole of it): they are counted in the
/// guests' share, an eighth, so at most 64 of them are held (each later answered 408) and the
/// rest are refused 401 from their heads, while the operator is answered and a finished task
/// stays readable.
#[test]
fn small_anonymous_bodies_hold_only_their_share() {
    let home = Home::new();
    let (session, operator, id) = with_a_finished_task(&home, 16);
    let mut anonymous: Vec<TcpStream> = (0..600)
        .map(|n| {
            let mut stream = connect(&session.url);
            let auth = (n % 2 == 1).then_some("Bearer mdt1.e30.AAAA");
            stream
                .write_all(head("POST", "/", auth, 16 << 10).as_bytes())
                .unwrap();
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let task = send(&session, &operator, "operator");
    assert_eq!(common::session::artifact_text(&task), "operator");
    let read = get(&session, &operator, &id);
    assert_eq!(read["result"]["status"]["state"], "completed", "{read}");
    let (mut held, mut refused) = (0, 0);
    for stream in &mut anonymous {
        let answer = answer_head(stream);
        match answer.status {
            408 => held += 1,
            401 => refused += 1,
            _ => panic!("{}", answer.head),
        }
    }
    eprintln!("600 small anonymous bodies: {held} held, {refused} refused");
    assert!(held <= 64, "{held} held");
    assert!(refused > 0);
}

/// 500 anonymous `PUT`s of 1 MiB — to `/control/settings/STYLE` without the control token, and
/// to a path the door does not have — each holding back its last byte: the session never holds
/// their bodies (its peak resident memory stays within twice its 16 MiB budget), and the
/// operator is answered at the door and at `/control`.
#[test]
fn anonymous_bodies_on_every_route_are_never_held() {
    let home = Home::new();
    let session = guarded(&home, 16);
    let operator = home.token(&[&session.id]);
    let control = home.token(&["--control"]);
    let body = vec![b' '; (1 << 20) - 1];
    let held: Vec<TcpStream> = (0..500)
        .map(|n| {
            let mut stream = connect(&session.url);
            let path = match n % 2 {
                0 => "/control/settings/STYLE",
                _ => "/nowhere",
            };
            stream
                .write_all(head("PUT", path, None, 1 << 20).as_bytes())
                .unwrap();
            stream.write_all(&body).unwrap();
            stream
        })
        .collect();
    let task = send(&session, &operator, "still here");
    assert_eq!(common::session::artifact_text(&task), "still here");
    let listing = http(&session.url, "GET", "/control", Some(&control), b"").unwrap();
    assert_eq!(listing.status, 200, "{}", listing.head);
    // The high-water mark, read after the session has had every byte it was sent and answered
    // the operator: whatever it held of the bodies in the meantime is in it.
    let peak = common::process::status_field(session.pid, "VmHWM").expect("VmHWM");
    drop(held);
    assert!(peak < 32 * 1024, "peak RSS {peak} KiB");
}

/// A request the budget refuses (503) evicts no finished task: with a 16 MiB budget held by
/// fifteen operator requests whose 1 MiB bodies are on their way, the sixteenth is refused — it
/// would not fit even if every finished task went — and the task finished before is still read.
#[test]
fn a_refused_request_evicts_no_finished_task() {
    let home = Home::new();
    let (session, operator, id) = with_a_finished_task(&home, 16);
    let bearer = format!("Bearer {operator}");
    let pending: Vec<TcpStream> = (0..15)
        .map(|_| {
            let mut stream = connect(&session.url);
            stream
                .write_all(head("POST", "/", Some(&bearer), 1 << 20).as_bytes())
                .unwrap();
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let mut refused = connect(&session.url);
    refused
        .write_all(head("POST", "/", Some(&bearer), 1 << 20).as_bytes())
        .unwrap();
    let answer = answer_head(&mut refused);
    assert_eq!(answer.status, 503, "{}", answer.head);
    drop(refused);
    drop(pending);
    let read = common::wait::wait_for(Duration::from_secs(10), "the door served again", || {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": id}});
        let answer = http(
            &session.url,
            "POST",
            "/",
            Some(&operator),
            body.to_string().as_bytes(),
        )
        .ok()?;
        (answer.status == 200).then(|| serde_json::from_slice::<Value>(&answer.body).unwrap())
    });
    assert_eq!(read["result"]["status"]["state"], "completed", "{read}");
}
