//! The door's threads under waits and floods (issue 30, points 1 and 2): a handful of workers
//! that wait only in `epoll_wait` or on work — never one per waiting client, per slow client, or
//! per refusal.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use common::gate::Gate;
use common::home::Home;
use common::http::Http;
use common::process::status_field;
use common::session::{Session, send_params};
use common::sse::Sse;
use common::wait::{WAIT, wait_until};
use serde_json::json;

const CARD: &str = "/.well-known/agent-card.json";
/// The most door threads there may be, whatever the load.
const DOOR_THREADS: usize = 8;

/// A capsule whose handler waits at `gate`, one turn at a time, with room to queue `queue`.
fn gated(home: &Home, gate: &Gate, queue: usize) -> String {
    let script = format!("#!/bin/sh\ncat >/dev/null\n{}echo done\n", gate.wait());
    let manifest = json!({"name": "gated", "version": "1.0.0",
        "lifecycle": {"concurrency": 1, "queue_depth": queue}});
    let path = home.write_capsule("gated", manifest, Some(&script));
    path.to_str().unwrap().to_string()
}

/// The names of `pid`'s threads, by thread id.
fn threads(pid: u32) -> Vec<(String, String)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return vec![];
    };
    tasks
        .flatten()
        .map(|t| {
            let tid = t.file_name().to_string_lossy().into_owned();
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            (tid, comm.trim().to_string())
        })
        .collect()
}

fn door_threads(pid: u32) -> Vec<String> {
    threads(pid)
        .into_iter()
        .filter(|(_, name)| name.starts_with("door"))
        .map(|(tid, _)| tid)
        .collect()
}

/// The system calls `epoll_wait` may be made with on this architecture (glibc and musl use
/// either), and `None` where the test does not know them.
fn epoll_calls() -> Option<&'static [&'static str]> {
    match std::env::consts::ARCH {
        "x86_64" => Some(&["232", "281", "441"]),
        "aarch64" => Some(&["22", "441"]),
        _ => None,
    }
}

/// Whether every door thread of `pid` is waiting in `epoll_wait` at one look
/// (`/proc/PID/task/TID/syscall` names the call a blocked thread is in).
fn every_door_thread_in_epoll(pid: u32, calls: &[&str]) -> bool {
    let door = door_threads(pid);
    !door.is_empty()
        && door.iter().all(|tid| {
            let call = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall"))
                .unwrap_or_default();
            let number = call.split_whitespace().next().unwrap_or("");
            calls.contains(&number)
        })
}

/// A blocking `message/send` written to a new connection, its answer not read yet.
fn blocked_send(url: &str, text: &str) -> TcpStream {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send",
                      "params": send_params(&[text], true)})
    .to_string();
    let mut stream = TcpStream::connect(url).unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    stream
}

/// How many tasks the session knows, asked on a connection the door closes as soon as it has
/// answered (so none is left behind to hold a slot).
fn tasks_known(session: &Session) -> u64 {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}).to_string();
    let mut stream = TcpStream::connect(&session.url).unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let listed: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    listed["result"]["totalSize"].as_u64().unwrap_or(0)
}

/// A card GET on a fresh connection, answered (a hang guard, not a timing).
fn card_answered(session: &Session) {
    let mut conn = session.connect();
    conn.set_read_timeout(Duration::from_secs(10));
    let card = conn.get(CARD);
    assert_eq!(card.status, 200, "the card is answered");
}

#[test]
fn watchers_and_blocked_senders_hold_no_thread_and_the_door_waits_only_in_epoll() {
    let home = Home::new();
    let gate = Gate::new(&home);
    let session = home.start(&[&gated(&home, &gate, 64)]);
    let pid = session.pid;
    card_answered(&session);
    let before = status_field(pid, "Threads").unwrap() as usize;
    let watchers: Vec<Sse> = (0..4)
        .map(|_| Sse::open(&session.url, Some("1.0"), "murmur.WatchSession", json!({})))
        .collect();
    let senders: Vec<TcpStream> = (0..50)
        .map(|n| blocked_send(&session.url, &format!("m{n}")))
        .collect();
    wait_until(WAIT, "every message taken", || tasks_known(&session) == 50);
    card_answered(&session);
    let door = door_threads(pid).len();
    let now = status_field(pid, "Threads").unwrap() as usize;
    // One task runs (concurrency 1): its thread is the only one the waits may add.
    let named: Vec<String> = threads(pid).into_iter().map(|(_, n)| n).collect();
    assert!(
        (1..=DOOR_THREADS).contains(&door) && now <= before + 1,
        "{door} door threads, {now} threads ({before} before): {named:?}"
    );
    match epoll_calls() {
        None => common::skip::skipped(
            "door_events::watchers_and_blocked_senders_hold_no_thread_and_the_door_waits_only_in_epoll",
            "its epoll_wait part: this architecture's system call numbers are not known to the test",
        ),
        Some(calls) => {
            let deadline = Instant::now() + WAIT;
            while !every_door_thread_in_epoll(pid, calls) {
                assert!(
                    Instant::now() < deadline,
                    "a door thread waits elsewhere than in epoll_wait: {named:?}"
                );
                thread::sleep(Duration::from_millis(50));
            }
        }
    }
    gate.open();
    for (n, mut sender) in senders.into_iter().enumerate() {
        sender.set_read_timeout(Some(WAIT)).unwrap();
        let mut answer = Vec::new();
        let mut chunk = [0u8; 4096];
        while !String::from_utf8_lossy(&answer).contains("\"completed\"") {
            match sender.read(&mut chunk) {
                Ok(0) | Err(_) => panic!("send {n}: {}", String::from_utf8_lossy(&answer)),
                Ok(got) => answer.extend_from_slice(&chunk[..got]),
            }
        }
    }
    drop(watchers);
}

/// How many connections this process may open besides what it has: the test scales to it (it
/// must not raise the limit of a process other tests share).
fn room_for_connections(want: usize) -> usize {
    let open = std::fs::read_dir("/proc/self/fd").map_or(64, |d| d.count());
    let limit = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
            line.split_whitespace().nth(3)?.parse::<usize>().ok()
        })
        .unwrap_or(1024);
    want.min(limit.saturating_sub(open + 256))
}

#[test]
fn two_thousand_slow_loris_connections_hold_no_thread_and_a_real_request_is_answered() {
    let home = Home::new();
    let session = home.start(&[]);
    let pid = session.pid;
    card_answered(&session);
    let before = status_field(pid, "Threads").unwrap() as usize;
    if room_for_connections(2000) <= 1100 {
        common::skip::skipped(
            "door_events::two_thousand_slow_loris_connections_hold_no_thread_and_a_real_request_is_answered",
            "too few descriptors for more connections than the door's bound (raise ulimit -n)",
        );
        return;
    }
    let loris: Vec<TcpStream> = (0..room_for_connections(2000))
        .filter_map(|_| {
            let mut stream = TcpStream::connect(&session.url).ok()?;
            let _ = stream.write_all(b"G");
            Some(stream)
        })
        .collect();
    assert!(loris.len() > 1100, "past the door's bound: {}", loris.len());
    // Past the door's one second of grace for a slow request, so the newcomer may evict one.
    thread::sleep(Duration::from_millis(1500));
    let mut conn = Http::connect(&session.url);
    conn.set_read_timeout(Duration::from_secs(10));
    assert_eq!(conn.get(CARD).status, 200, "a real request is answered");
    let now = status_field(pid, "Threads").unwrap() as usize;
    let door = door_threads(pid).len();
    assert!(
        (1..=DOOR_THREADS).contains(&door) && now <= before,
        "{door} door threads, {now} threads ({before} before)"
    );
    drop(loris);
}

/// Whether the door has closed `stream` (it reads end of file, or the connection was reset).
fn closed(stream: &TcpStream) -> bool {
    let mut byte = [0u8];
    stream.set_nonblocking(true).unwrap();
    let peeked = stream.peek(&mut byte);
    stream.set_nonblocking(false).unwrap();
    match peeked {
        Ok(n) => n == 0,
        Err(err) => err.kind() != std::io::ErrorKind::WouldBlock,
    }
}

/// The status of the answer on `stream`, read within the hang guard.
fn status_on(stream: &mut TcpStream) -> Option<u16> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 1024];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).ok().filter(|&n| n > 0)?;
        answer.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&answer);
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn refusals_while_every_slot_answers_are_delivered_and_accepting_goes_on() {
    let home = Home::new();
    let gate = Gate::new(&home);
    let session = home.start(&[&gated(&home, &gate, 2048)]);
    let slots = 1024;
    if room_for_connections(slots + 100) < slots + 100 {
        common::skip::skipped(
            "door_events::refusals_while_every_slot_answers_are_delivered_and_accepting_goes_on",
            "too few descriptors for every slot and a hundred more (raise ulimit -n)",
        );
        return;
    }
    // Every slot answers: a blocking send each, waiting for a turn behind the gate. Each is
    // taken before the last one is sent, so no newcomer makes one that has not yet been read
    // give way (a connection with nothing read yet is an idle one).
    let mut busy: Vec<TcpStream> = (1..slots)
        .map(|n| blocked_send(&session.url, &format!("m{n}")))
        .collect();
    wait_until(Duration::from_secs(60), "every message taken", || {
        tasks_known(&session) == slots as u64 - 1
    });
    busy.push(blocked_send(&session.url, "last"));
    // Probes that close their connection as soon as they are answered: one let in leaves no
    // slot behind. The last send may still be unread when the first probe comes (a loaded
    // machine): a connection with nothing read is idle, gives way to the probe, and is closed —
    // then it is sent again, until the door has taken it.
    wait_until(Duration::from_secs(60), "every slot answering", || {
        if busy.last().is_some_and(closed) {
            busy.pop();
            busy.push(blocked_send(&session.url, "last"));
        }
        let mut probe = TcpStream::connect(&session.url).unwrap();
        let head = format!("GET {CARD} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        probe.write_all(head.as_bytes()).unwrap();
        status_on(&mut probe) == Some(503)
    });
    // Refused clients that keep their connections open and keep sending: each gets its 503, and
    // none waits for another's lingering close.
    let deadline = Instant::now() + Duration::from_secs(20);
    let refused: Vec<TcpStream> = (0..50)
        .map(|n| {
            let mut stream = TcpStream::connect(&session.url).unwrap();
            let head = format!("GET {CARD} HTTP/1.1\r\nHost: x\r\n\r\n");
            stream.write_all(head.as_bytes()).unwrap();
            assert_eq!(status_on(&mut stream), Some(503), "refusal {n} delivered");
            let _ = stream.write_all(b"more bytes after the refusal");
            assert!(
                Instant::now() < deadline,
                "refusal {n} came only after the others'"
            );
            stream
        })
        .collect();
    drop(refused);
    gate.open();
    // Their clients gone, the waiting answers go with them, and the door serves again.
    drop(busy);
    wait_until(WAIT, "the door serving again", || {
        let mut probe = TcpStream::connect(&session.url).unwrap();
        probe
            .write_all(format!("GET {CARD} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .unwrap();
        status_on(&mut probe) == Some(200)
    });
}

/// A client may send its request, shut its sending side (`nc -N`, Go's `CloseWrite`) and read
/// the answer: a blocking send that half-closed is answered once its task ends, not dropped.
#[test]
fn a_blocking_send_whose_client_half_closed_is_still_answered() {
    let home = Home::new();
    let gate = Gate::new(&home);
    let session = home.start(&[&gated(&home, &gate, 4)]);
    let mut sender = blocked_send(&session.url, "half");
    sender.shutdown(std::net::Shutdown::Write).unwrap();
    wait_until(WAIT, "the message taken", || tasks_known(&session) == 1);
    // The door has seen the half-close by now (it read the request before the task was known).
    thread::sleep(Duration::from_millis(200));
    gate.open();
    sender.set_read_timeout(Some(WAIT)).unwrap();
    let mut answer = Vec::new();
    let _ = sender.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("\"completed\""),
        "the answer reaches a client that shut only its sending side: {answer:?}"
    );
}
