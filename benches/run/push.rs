//! The `push` section (issue 33): what webhooks that never answer cost the door — A2A 1.0
//! `SendMessage`s per second at 8 connections to a `/bin/cat` capsule with `network.push`,
//! each task carrying a webhook config aimed at one of 100 receivers that accept (the kernel
//! completes their connections) and never answer, against the same capsule's session whose tasks
//! carry none; interleaved round by round, so both see the same machine at the same moments.
//! The goal: with ≥ 0.9x without. The receivers are on 127.0.0.1, which the manifest's
//! `network.push.allow` opens.

use std::net::TcpListener;
use std::sync::Barrier;
use std::thread;
use std::time::Instant;

use super::{Conn, Home, MEASURE, Session, TEXT, WARMUP, contains, fail, median_f64, mkdir, write};

/// Rounds of the two sessions, each measured once a round.
const ROUNDS: usize = 5;
/// Connections, each sending back to back.
const CONNECTIONS: usize = 8;
/// Receivers that never answer; the tasks' webhooks go round them.
const STUCK: usize = 100;

/// Measures and prints what stuck receivers cost.
pub(super) fn report_push(home: &Home) {
    let dir = home.root().join("pushed");
    mkdir(&dir);
    let manifest = serde_json::json!({"name": "pushed", "version": "1.0.0", "run": ["/bin/cat"],
        "network": {"push": {"allow": ["127.0.0.1"]}}});
    write(&dir.join("murmur.json"), manifest.to_string().as_bytes());
    // Bound and never accepted: the kernel takes each connection and the request, and no answer
    // ever comes (each exchange waits out its 10 s deadline).
    let stuck: Vec<TcpListener> = (0..STUCK)
        .map(|_| {
            TcpListener::bind("127.0.0.1:0").unwrap_or_else(|err| fail(&format!("bind: {err}")))
        })
        .collect();
    let with = Session::start(home, &[dir.as_os_str()]);
    let without = Session::start(home, &[dir.as_os_str()]);
    let hooked: Vec<Vec<u8>> = stuck
        .iter()
        .map(|l| {
            let port = l.local_addr().map(|a| a.port()).unwrap_or(9);
            send(&with.url, Some(&format!("http://127.0.0.1:{port}/hook")))
        })
        .collect();
    let plain = vec![send(&without.url, None)];
    println!(
        "push: SendMessage at {CONNECTIONS} connections to a /bin/cat capsule with network.push, \
         session {} with each task's webhook at one of {STUCK} receivers that never answer, \
         session {} without webhooks; interleaved, {ROUNDS} rounds",
        with.session_id, without.session_id
    );
    let (mut stuck_rates, mut free_rates) = (Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        let free = rate(&without.url, &plain);
        let hung = rate(&with.url, &hooked);
        println!("  round {round}: without {free:>7.0}/s   with {STUCK} stuck {hung:>7.0}/s");
        free_rates.push(free);
        stuck_rates.push(hung);
    }
    let ratio = median_f64(&stuck_rates) / median_f64(&free_rates);
    println!(
        "  median: {:.0}/s with {STUCK} stuck receivers, {:.0}/s without: {ratio:.2}x (goal >= 0.9x)",
        median_f64(&stuck_rates),
        median_f64(&free_rates),
    );
    drop((with, without, stuck));
    println!();
}

/// The whole HTTP request of one blocking A2A 1.0 `SendMessage` carrying [`super::TEXT`], with
/// a webhook config for `hook` when given.
fn send(url: &str, hook: Option<&str>) -> Vec<u8> {
    let mut body = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": {"messageId": "bench", "role": "ROLE_USER",
            "parts": [{"text": TEXT}]}},
    });
    if let Some(hook) = hook {
        body["params"]["configuration"] = serde_json::json!({"taskPushNotificationConfig": {
            "url": hook, "token": "bench-token"}});
    }
    let body = body.to_string();
    format!(
        "POST / HTTP/1.1\r\nHost: {url}\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Completed `SendMessage`s per second over [`CONNECTIONS`] keep-alive connections to `url`,
/// each going round `requests` from its own place, [`WARMUP`] unmeasured then [`MEASURE`].
fn rate(url: &str, requests: &[Vec<u8>]) -> f64 {
    let go = Barrier::new(CONNECTIONS);
    let counted: usize = thread::scope(|scope| {
        let workers: Vec<_> = (0..CONNECTIONS)
            .map(|first| {
                let go = &go;
                scope.spawn(move || {
                    let mut conn = Conn::open(url);
                    go.wait();
                    let began = Instant::now();
                    let (warm_end, end) = (began + WARMUP, began + WARMUP + MEASURE);
                    let mut counted = 0;
                    let mut next = first;
                    loop {
                        let body = conn.call(&requests[next % requests.len()]);
                        if !contains(body, br#""state":"TASK_STATE_COMPLETED""#) {
                            fail(&format!(
                                "unexpected answer: {}",
                                String::from_utf8_lossy(body)
                            ));
                        }
                        let now = Instant::now();
                        if now >= end {
                            return counted;
                        }
                        counted += usize::from(now >= warm_end);
                        next += CONNECTIONS;
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| fail("a client thread failed")))
            .sum()
    });
    counted as f64 / MEASURE.as_secs_f64()
}
