//! Bad input at a `mur run` door (DESIGN.md §5, "Bounds"): each costs at most its own connection,
//! never the door. Every case ends with a valid card request on a new connection, which must be
//! served, and the session process must still be running.

use crate::common;

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::{
    door::session_of,
    home::Home,
    http::{Http, HttpResponse},
    session::{Session, artifact_text, send_params},
};
use serde_json::{Value, json};

const CARD: &str = "/.well-known/agent-card.json";

/// The first response on `conn`, tolerating a connection the door closed right after answering
/// (a reset that loses the answer is a failure: the client deserves to learn why).
fn status_of(conn: &mut Http) -> u16 {
    match conn.read_response() {
        Ok(response) => response.status,
        Err(err) => panic!("no response: {err}"),
    }
}

#[test]
fn a_request_head_over_16_kib_gets_431() {
    let home = Home::new();
    let mut session = home.start(&[]);
    let mut conn = session.connect();
    let head = format!(
        "GET {CARD} HTTP/1.1\r\nHost: x\r\nX-Padding: {}\r\n\r\n",
        "a".repeat(20 * 1024)
    );
    conn.send_raw(head.as_bytes()).unwrap();
    assert_eq!(status_of(&mut conn), 431);
    assert!(
        conn.closed_within(Duration::from_secs(5)),
        "the connection is closed"
    );
    session.assert_still_serving();

    // Many small headers adding up past the bound are the same.
    let mut conn = session.connect();
    let mut head = format!("GET {CARD} HTTP/1.1\r\nHost: x\r\n");
    for i in 0..50 {
        head.push_str(&format!("X-H{i}: {}\r\n", "b".repeat(400)));
    }
    head.push_str("\r\n");
    conn.send_raw(head.as_bytes()).unwrap();
    assert_eq!(status_of(&mut conn), 431);
    session.assert_still_serving();
}

#[test]
fn a_body_over_1_mib_gets_413() {
    let home = Home::new();
    let mut session = home.start(&[]);
    let mut conn = session.connect();
    let body = vec![b'x'; 2 << 20];
    let head = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.send_raw(head.as_bytes()).unwrap();
    // The body goes out from another thread, as a real client would send it; the door may stop
    // reading (and close) long before the end of it.
    let mut writer = conn.stream.try_clone().unwrap();
    let sender = thread::spawn(move || {
        let _ = writer.write_all(&body);
    });
    assert_eq!(status_of(&mut conn), 413);
    drop(conn);
    let _ = sender.join();
    session.assert_still_serving();
}

#[test]
fn a_slow_loris_is_cut_off_while_other_clients_are_served() {
    let home = Home::new();
    let mut session = home.start(&[]);
    let request = format!(
        "GET {CARD} HTTP/1.1\r\nHost: x\r\nX-Slow: {}\r\n\r\n",
        "y".repeat(40)
    );
    let mut loris = session.connect();
    let started = Instant::now();
    let outcome: Arc<std::sync::Mutex<Option<(String, Duration)>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let dribbler = {
        let outcome = outcome.clone();
        let done = done.clone();
        thread::spawn(move || {
            let bytes = request.into_bytes();
            let mut sent = 0;
            let verdict = loop {
                if sent < bytes.len() && loris.send_raw(&bytes[sent..=sent]).is_err() {
                    break "closed".to_string();
                }
                sent += 1;
                if started.elapsed() > Duration::from_secs(20) {
                    break "still open after 20 s".to_string();
                }
                // Listen for a second before the next byte.
                loris.set_read_timeout(Duration::from_secs(1));
                let mut byte = [0u8; 1];
                match loris.stream.peek(&mut byte) {
                    Ok(0) => break "closed".to_string(),
                    Ok(_) => {
                        break match loris.read_response() {
                            Ok(r) => format!("status {}", r.status),
                            Err(_) => "closed".to_string(),
                        };
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => break "closed".to_string(),
                }
            };
            *outcome.lock().unwrap() = Some((verdict, started.elapsed()));
            done.store(true, Ordering::Release);
        })
    };
    // Meanwhile, other clients are served, promptly.
    let mut served = 0;
    while !done.load(Ordering::Acquire) && started.elapsed() < Duration::from_secs(25) {
        let asked = Instant::now();
        let card = session.card();
        assert!(asked.elapsed() < Duration::from_secs(2), "served promptly");
        assert_eq!(session_of(&card), Some(session.id.clone()));
        served += 1;
        thread::sleep(Duration::from_millis(250));
    }
    dribbler.join().unwrap();
    let (verdict, after) = outcome.lock().unwrap().clone().expect("a verdict");
    assert!(
        verdict == "status 408" || verdict == "closed",
        "the slow client: {verdict}"
    );
    assert!(
        after <= Duration::from_millis(11_500),
        "cut off within ~11 s, not {after:?}"
    );
    assert!(
        after >= Duration::from_secs(9),
        "not before the 10 s deadline: {after:?}"
    );
    assert!(
        served >= 10,
        "other clients were served meanwhile ({served})"
    );
    session.assert_still_serving();
}

#[test]
fn idle_connections_past_the_bound_give_way_to_a_new_request_oldest_first() {
    let home = Home::new();
    let mut session = home.start(&[]);
    // More than the door's 1,024, every one connected and then silent.
    let mut held = Vec::new();
    for n in 0..1_100 {
        match Http::try_connect(&session.url) {
            Ok(conn) => held.push(conn),
            Err(err) => panic!("connection {n} refused: {err}"),
        }
    }
    // A newcomer — the operator, a probe — is served: the door takes back an idle slot.
    let mut fresh = session.connect();
    let response = fresh
        .try_request("GET", CARD, &[], b"")
        .expect("served, not refused");
    assert_eq!(response.status, 200, "{}", response.text());
    assert!(session.alive(), "the door did not take the process down");
    // The 77 past the bound took the 77 oldest idle slots (the first 50 are checked); the
    // newest are served.
    let mut gave_way = 0;
    for conn in held.iter_mut().take(50) {
        gave_way += usize::from(conn.closed_within(Duration::from_secs(2)));
    }
    assert_eq!(gave_way, 50, "the oldest idle connections gave way");
    for conn in held.iter_mut().rev().take(50) {
        let response = conn.try_request("GET", CARD, &[], b"").expect("served");
        assert_eq!(response.status, 200, "{}", response.text());
    }
    drop(held);
    session.assert_still_serving();
}

/// 1,000 keep-alive clients at once, each asking three times on its one connection: every
/// answer a 200 (a door bounded at 128 told 872 of them 503).
#[test]
fn a_thousand_keep_alive_clients_are_all_served() {
    let home = Home::new();
    let mut session = home.start(&[]);
    let url = Arc::new(session.url.clone());
    let start = Arc::new(std::sync::Barrier::new(1_000));
    let clients: Vec<_> = (0..1_000)
        .map(|_| {
            let (url, start) = (url.clone(), start.clone());
            thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    let mut conn = Http::connect(&url);
                    start.wait();
                    (0..3)
                        .map(|_| conn.try_request("GET", CARD, &[], b"").map(|r| r.status))
                        .collect::<Vec<_>>()
                })
                .unwrap()
        })
        .collect();
    let mut statuses = std::collections::BTreeMap::new();
    for client in clients {
        for status in client.join().unwrap() {
            let key = status.map_or_else(|e| e.to_string(), |s| s.to_string());
            *statuses.entry(key).or_insert(0) += 1;
        }
    }
    assert_eq!(
        statuses,
        [("200".to_string(), 3_000)].into(),
        "{statuses:?}"
    );
    session.assert_still_serving();
}

/// Past the bound, with every slot held by a silent client, `mur ps` still sees the session
/// running (its probe is served) and `mur stop` ends it by asking its door.
#[test]
fn past_the_bound_mur_ps_sees_the_session_running_and_mur_stop_asks_its_door() {
    let home = Home::new();
    let mut session = home.start(&[]);
    let held: Vec<Http> = (0..1_100).map(|_| Http::connect(&session.url)).collect();
    let ps = home.mur(&["ps", "--json"]);
    ps.expect_code(0);
    let listing: Value = serde_json::from_str(&ps.stdout).unwrap();
    assert_eq!(listing["capsules"][0]["status"], "running", "{listing}");
    let stop = home.mur(&["stop", "@1"]);
    stop.expect_code(0);
    assert!(stop.stdout.contains("session/stop"), "{}", stop.stdout);
    session.wait_exit(Duration::from_secs(20));
    drop(held);
}

/// A client library that sends a 32 MiB body before reading reads the 413 (the door drains
/// what it sends instead of resetting the connection under it).
#[test]
fn a_32_mib_post_from_an_http_library_reads_its_413() {
    let home = Home::new();
    let session = home.start(&[]);
    let (host, port) = session.url.rsplit_once(':').unwrap();
    let script = format!(
        "import http.client\n\
         c = http.client.HTTPConnection('{host}', {port}, timeout=20)\n\
         c.request('POST', '/', body=b'x' * (32 << 20), headers={{'Content-Type': 'application/json'}})\n\
         print(c.getresponse().status)\n"
    );
    let out = match std::process::Command::new("python3")
        .args(["-c", &script])
        .output()
    {
        Ok(out) => out,
        Err(err) => {
            return common::skip::skipped(
                "a_32_mib_post_from_an_http_library_reads_its_413",
                &format!("no python3: {err}"),
            );
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.trim(),
        "413",
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// POST `body` with `Content-Type: application/json` on a new connection: the HTTP response.
fn post(session: &Session, token: Option<&str>, body: &[u8]) -> HttpResponse {
    session.connect().post("/", token, body)
}

/// POST `body`; it must be a JSON-RPC error with HTTP 200: its code.
fn rpc_error(session: &Session, body: &[u8]) -> (i64, Value) {
    let response = post(session, None, body);
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
    assert!(answer.get("result").is_none(), "{answer}");
    let code = answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no error code: {answer}"));
    (code, answer)
}

#[test]
fn invalid_utf8_in_the_body_is_a_parse_error() {
    let home = Home::new();
    let mut session = home.start(&[]);
    let mut body = br#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"m","parts":[{"kind":"text","text":""#.to_vec();
    body.extend_from_slice(b"\xff\xfe\xc3(");
    body.extend_from_slice(br#""}]}}}"#);
    let (code, answer) = rpc_error(&session, &body);
    assert_eq!(code, -32700, "{answer}");
    assert_eq!(answer["id"], Value::Null);
    session.assert_still_serving();

    let (code, _) = rpc_error(&session, b"\xff\xfe\xfd");
    assert_eq!(code, -32700);
    let (code, answer) = rpc_error(&session, b"{\"jsonrpc\": \"2.0\", ");
    assert_eq!(code, -32700, "truncated JSON");
    let said = answer["error"]["message"].as_str().unwrap();
    assert!(said.contains("line 1 column"), "says where: {said}");
    session.assert_still_serving();
}

#[test]
fn a_malformed_envelope_is_refused_saying_which_rule_it_breaks() {
    let home = Home::new();
    let session = home.start(&[]);
    for (body, says) in [
        (
            json!([{"jsonrpc": "2.0", "id": 1, "method": "tasks/get"}]),
            "a batch",
        ),
        (
            json!({"jsonrpc": "1.0", "id": 1, "method": "tasks/get"}),
            "\"jsonrpc\" must be \"2.0\"",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": 7}),
            "\"method\" must be a string",
        ),
        (
            json!({"jsonrpc": "2.0", "id": {}, "method": "tasks/get"}),
            "\"id\" must be",
        ),
    ] {
        let (code, answer) = rpc_error(&session, body.to_string().as_bytes());
        assert_eq!(code, -32600, "{answer}");
        let said = answer["error"]["message"].as_str().unwrap();
        assert!(said.contains(says), "{body}: {said}");
    }
}

#[test]
fn json_nested_ten_thousand_deep_is_an_error_not_a_crash() {
    let home = Home::new();
    let mut session = home.start(&[]);
    let depth = 10_000;
    let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let (code, answer) = rpc_error(&session, arrays.as_bytes());
    assert_eq!(code, -32700, "{answer}");
    session.assert_still_serving();

    // Deep inside an otherwise valid request, too.
    let objects = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}{}}}"#,
        r#"{"a":"#.repeat(depth),
        "}".repeat(depth)
    );
    let (code, answer) = rpc_error(&session, objects.as_bytes());
    assert_eq!(code, -32700, "{answer}");
    session.assert_still_serving();
}

#[test]
fn malformed_content_length_gets_400() {
    let home = Home::new();
    let mut session = home.start(&[]);
    for value in ["-1", "-5", "1x", "", "99999999999999999999999999"] {
        let mut conn = session.connect();
        let head = format!("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {value}\r\n\r\n{{}}");
        conn.send_raw(head.as_bytes()).unwrap();
        assert_eq!(status_of(&mut conn), 400, "Content-Length: {value:?}");
        session.assert_still_serving();
    }
    // Two that disagree.
    let mut conn = session.connect();
    conn.send_raw(
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}}",
    )
    .unwrap();
    assert_eq!(status_of(&mut conn), 400);
    session.assert_still_serving();
    // Garbage instead of a request line.
    let mut conn = session.connect();
    conn.send_raw(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n")
        .unwrap();
    assert_eq!(status_of(&mut conn), 400);
    session.assert_still_serving();
}

#[test]
fn two_authorization_headers_get_401() {
    let home = Home::new();
    let manifest = home.write_capsule(
        "guarded",
        json!({"name": "guarded", "version": "1",
               "network": {"authentication": {"credentials": [{"name": "reader", "scopes": ["tasks/get"]}]}}}),
        Some("#!/bin/sh\ncat\n"),
    );
    let mut session = home.start(&[manifest.to_str().unwrap()]);
    let token = home.token(&[]);
    let auth = format!("Bearer {token}");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": send_params(&["hi"], true)})
        .to_string();
    // One valid header: served.
    let ok = session
        .connect()
        .request("POST", "/", &[("Authorization", &auth)], body.as_bytes());
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(artifact_text(&ok.json()["result"]), "hi");
    // The same valid token twice: refused.
    let refused = session.connect().request(
        "POST",
        "/",
        &[("Authorization", &auth), ("Authorization", &auth)],
        body.as_bytes(),
    );
    assert_eq!(refused.status, 401, "{}", refused.text());
    assert_eq!(
        refused.header("www-authenticate"),
        Some("Bearer realm=\"guarded\"")
    );
    // A valid and an invalid one, in either order: refused.
    for pair in [
        [auth.as_str(), "Bearer nope"],
        ["Bearer nope", auth.as_str()],
    ] {
        let refused = session.connect().request(
            "POST",
            "/",
            &[("Authorization", pair[0]), ("Authorization", pair[1])],
            body.as_bytes(),
        );
        assert_eq!(refused.status, 401);
    }
    session.assert_still_serving_public_card();
}

/// The authenticated door's public card has no session in it; check it is served and the
/// process lives.
trait PublicCard {
    fn assert_still_serving_public_card(&mut self);
}

impl PublicCard for Session {
    fn assert_still_serving_public_card(&mut self) {
        let response = self.connect().get(CARD);
        assert_eq!(response.status, 200);
        assert_eq!(response.json()["name"], "guarded");
        assert!(self.alive());
    }
}

/// The malformed requests, each with the error code it must get and what is wrong with it;
/// `finished_id` names a task that has already completed.
fn malformed_requests(finished_id: &str) -> Vec<(Value, i64, &'static str)> {
    vec![
        (
            json!({"jsonrpc": "1.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}}),
            -32600,
            "wrong version",
        ),
        (
            json!({"id": 1, "method": "tasks/get", "params": {"id": "x"}}),
            -32600,
            "no version",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1, "params": {}}),
            -32600,
            "no method",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": 7}),
            -32600,
            "a method that is not a string",
        ),
        (
            json!({"jsonrpc": "2.0", "id": {"an": "object"}, "method": "tasks/get", "params": {"id": "x"}}),
            -32600,
            "an object id",
        ),
        (
            json!({"jsonrpc": "2.0", "id": [1], "method": "tasks/get"}),
            -32600,
            "an array id",
        ),
        (json!([1, 2, 3]), -32600, "not an object"),
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/explode"}),
            -32601,
            "an unknown method",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}),
            -32602,
            "no message",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": "text"}}),
            -32602,
            "a message that is not an object",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"parts": "x"}}}),
            -32602,
            "parts not an array",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {}}),
            -32602,
            "no task id",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "tsk_0190f0f0f0f07000800000000000abcd"}}),
            -32001,
            "an unknown task",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {"id": "tsk_0190f0f0f0f07000800000000000abcd"}}),
            -32001,
            "canceling an unknown task",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {"id": finished_id}}),
            -32002,
            "canceling a finished task",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard"}),
            -32007,
            "the extended card of a public door",
        ),
    ]
}

#[test]
fn malformed_json_rpc_requests_get_their_error_codes() {
    let home = Home::new();
    let mut session = home.start(&[]);
    let finished = session.send(None, "done already", true);
    let finished_id = finished["id"].as_str().unwrap().to_string();
    for (request, expected, what) in malformed_requests(&finished_id) {
        let (code, answer) = rpc_error(&session, request.to_string().as_bytes());
        assert_eq!(code, expected, "{what}: {answer}");
        // The id is echoed when it is a scalar, null otherwise.
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        let expected_id = if id.is_object() || id.is_array() {
            Value::Null
        } else {
            id
        };
        assert_eq!(answer["id"], expected_id, "{what}: {answer}");
        session.assert_still_serving();
    }
    // The unknown method's name, if echoed, is bounded.
    let long = "m".repeat(10_000);
    let (code, answer) = rpc_error(
        &session,
        json!({"jsonrpc": "2.0", "id": "s", "method": long})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(code, -32601);
    assert!(
        answer.to_string().len() < 1_000,
        "{}",
        answer.to_string().len()
    );
    session.assert_still_serving();
}

#[test]
fn a_keep_alive_connection_survives_json_rpc_errors_and_pipelining() {
    let home = Home::new();
    let mut session = home.start(&[]);
    let mut conn = session.connect();
    for _ in 0..3 {
        let bad = conn.post("/", None, b"not json");
        assert_eq!(bad.status, 200);
        assert_eq!(bad.json()["error"]["code"], -32700);
        let card = conn.get(CARD);
        assert_eq!(card.status, 200);
        assert_eq!(card.header("connection"), Some("keep-alive"));
    }
    // Two requests in one write are answered in order.
    conn.send_raw(
        format!("GET {CARD} HTTP/1.1\r\nHost: x\r\n\r\nGET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n")
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(conn.read_response().unwrap().status, 200);
    assert_eq!(conn.read_response().unwrap().status, 404);
    // Unsupported methods and chunked bodies are refused without harm.
    assert_eq!(conn.request("DELETE", "/", &[], b"").status, 405);
    let mut chunked = session.connect();
    chunked
        .send_raw(
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        )
        .unwrap();
    assert_eq!(status_of(&mut chunked), 501);
    session.assert_still_serving();
}

#[test]
fn a_client_that_vanishes_mid_request_costs_nothing() {
    let home = Home::new();
    let mut session = home.start(&[]);
    for partial in [
        &b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\""[..],
        &b"GET /.well-known/agent-ca"[..],
    ] {
        let mut conn = session.connect();
        conn.send_raw(partial).unwrap();
        drop(conn);
    }
    // A reset instead of a close.
    let conn = session.connect();
    socket_linger_zero(&conn.stream);
    drop(conn);
    session.assert_still_serving();
    // Reading a response and never reading the rest is fine too.
    let mut conn = session.connect();
    conn.send_raw(format!("GET {CARD} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .unwrap();
    let mut one = [0u8; 1];
    conn.stream.read_exact(&mut one).unwrap();
    drop(conn);
    session.assert_still_serving();
}

/// SO_LINGER 0 on the socket so that closing it sends a reset.
fn socket_linger_zero(stream: &std::net::TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt with a pointer to a linger struct and its size.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
}
