//! The `mixes` section: the session's peak resident memory (`VmHWM`) under each hostile mix of
//! issue 19, each against a fresh session of the measured binary, next to the default memory
//! budget (128 MiB) and the goal every mix must keep under (256 MiB). The 1,000-client mix is
//! the `clients` section's.

use super::tests_common::{gate::Gate, sse::Sse};
use super::{Answer, Conn, Home, ProcStatus, Session, fail};
use serde_json::json;
use std::time::{Duration, Instant};

const GOAL_MIB: f64 = 256.0;

/// Runs every mix and prints a row each.
pub(super) fn report_mixes(home: &Home) {
    println!(
        "hostile mixes, each against a fresh session: peak RSS against the default budget \
         (128 MiB) and the goal ({GOAL_MIB} MiB)"
    );
    let rows = [
        ("127 concurrent 1 MiB data parts", data_parts(home)),
        ("100 x 1 MiB messages parked for input", parked(home)),
        (
            "127 never-reading resubscribers, 4 MiB answer",
            resubscribers(home),
        ),
    ];
    for (what, (kib, detail)) in rows {
        let mib = kib as f64 / 1024.0;
        let verdict = if mib < GOAL_MIB { "within" } else { "OVER" };
        println!("  {what:<48} peak {mib:>6.1} MiB ({verdict} the goal)  {detail}");
    }
    println!();
}

/// A one-shot JSON-RPC POST of `body`.
fn request(url: &str, body: &str) -> Vec<u8> {
    format!(
        "POST / HTTP/1.1\r\nHost: {url}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A capsule `name` whose handler is the shell `script`, taking 4 tasks at once and queueing 256.
fn capsule(home: &Home, name: &str, script: &str) -> std::path::PathBuf {
    let lifecycle = serde_json::json!({"concurrency": 4, "queue_depth": 256});
    home.capsule_with(name, &["./handler.sh"], Some(script), Some(lifecycle))
}

fn data_parts(home: &Home) -> (u64, String) {
    let session = Session::start(home, &[]);
    let zeros = vec!["0"; 500_000].join(",");
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"message/send","params":{{"message":{{"kind":"message","messageId":"m","role":"user","parts":[{{"kind":"data","data":[{zeros}]}}]}}}}}}"#
    );
    let bytes = request(&session.url, &body);
    let started = Instant::now();
    let threads: Vec<_> = (0..127)
        .map(|_| {
            let (url, bytes) = (session.url.clone(), bytes.clone());
            std::thread::spawn(move || matches!(Conn::open(&url).exchange(&bytes), Answer::Ok(_)))
        })
        .collect();
    let answered = threads
        .into_iter()
        .filter_map(|t| t.join().ok())
        .filter(|&ok| ok)
        .count();
    let detail = format!(
        "{answered} answered, {} refused (503) in {:.1} s",
        127 - answered,
        started.elapsed().as_secs_f64()
    );
    (ProcStatus::of(session.pid).hwm_kib, detail)
}

fn parked(home: &Home) -> (u64, String) {
    let script = "#!/bin/sh\ncat >/dev/null\nif [ \"$MUR_TURN\" = 1 ]; then echo 'name?'; exit 10; fi\necho done\n";
    let dir = capsule(home, "asker", script);
    let session = Session::start(home, &[dir.as_os_str()]);
    let text = "x".repeat(1_000_000);
    let mut conn = Conn::open(&session.url);
    let (mut parked, mut refused) = (0, 0);
    for n in 0..100 {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": n, "method": "message/send",
            "params": {"message": {"kind": "message", "messageId": format!("m{n}"), "role": "user",
            "parts": [{"kind": "text", "text": text}]}}});
        match conn.exchange(&request(&session.url, &body.to_string())) {
            Answer::Ok(answer) if super::contains(answer, b"input-required") => parked += 1,
            Answer::Ok(_) | Answer::Busy => refused += 1,
            Answer::Refused => {
                refused += 1;
                conn = Conn::open(&session.url);
            }
        }
    }
    let detail = format!("{parked} parked, {refused} refused");
    (ProcStatus::of(session.pid).hwm_kib, detail)
}

fn resubscribers(home: &Home) -> (u64, String) {
    let gate = Gate::at(home.root().join("mixes-gate"));
    let script = format!(
        "#!/bin/sh\ncat >/dev/null\n{}mkdir -p \"$MUR_TASK_DIR/out\"\nhead -c 3000000 /dev/zero > \"$MUR_TASK_DIR/out/big.bin\"\necho done\n",
        gate.wait()
    );
    let dir = capsule(home, "big", &script);
    let session = Session::start(home, &[dir.as_os_str()]);
    let send = r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"configuration":{"blocking":false},"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"go"}]}}}"#;
    let mut conn = Conn::open(&session.url);
    let answer: serde_json::Value = serde_json::from_slice(conn.call(&request(&session.url, send)))
        .unwrap_or_else(|_| fail("message/send: not JSON"));
    let id = answer["result"]["id"]
        .as_str()
        .unwrap_or_else(|| fail("message/send: no task id"))
        .to_string();
    let readers: Vec<std::net::TcpStream> = (0..127)
        .map(|_| Sse::send(&session.url, None, "tasks/resubscribe", json!({"id": id})))
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    gate.open();
    let get = serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get",
        "params": {"id": id}})
    .to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !super::contains(conn.call(&request(&session.url, &get)), br#""completed""#) {
        if Instant::now() > deadline {
            fail("the resubscribed task did not complete within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(3));
    let hwm = ProcStatus::of(session.pid).hwm_kib;
    drop(readers);
    (hwm, "the task completed".to_string())
}
