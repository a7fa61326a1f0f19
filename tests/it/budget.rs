//! The session's one memory budget (DESIGN §5, issue 19), from the outside: hostile mixes of
//! requests against the real binary on real sockets, each checked by the session's peak resident
//! memory (`VmHWM`) against the default budget's goal, 256 MiB, and by every request being
//! answered — a result, or a clear 503 refusal with `Retry-After` and a JSON-RPC error body.

use crate::common;

use std::time::{Duration, Instant};

use common::gate::Gate;
use common::home::Home;
use common::http::{HttpAnswer, one_shot};
use common::sse::Sse;
use serde_json::{Value, json};

/// The goal every hostile mix must keep under with the default budget.
const GOAL_KIB: u64 = 256 * 1024;

fn peak_kib(pid: u32) -> u64 {
    common::process::status_field(pid, "VmHWM").expect("VmHWM")
}

fn capsule(home: &Home, name: &str, script: &str) -> String {
    let manifest = json!({"name": name, "version": "1.0.0",
        "lifecycle": {"concurrency": 4, "queue_depth": 256}});
    let path = home.write_capsule(name, manifest, Some(script));
    path.to_str().unwrap().to_string()
}

fn post(url: &str, body: &[u8]) -> HttpAnswer {
    one_shot(url, "POST", "/", None, body).unwrap_or_else(|e| panic!("POST /: {e}"))
}

/// A refusal for memory: 503, `Retry-After`, and a JSON-RPC error saying so.
fn assert_budget_refusal(answer: &HttpAnswer) {
    assert_eq!(answer.status, 503, "{}", answer.head);
    assert!(
        answer.head.to_ascii_lowercase().contains("retry-after: 1"),
        "{}",
        answer.head
    );
    let body: Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(body["error"]["code"], -32032, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("memory"), "{message}");
}

/// 100 messages of 1 MiB to a handler that asks a question (exit 10): the parked tasks stay
/// within their share of the budget, the overflow is refused cleanly (503), and a parked task
/// still reads and continues.
#[test]
fn a_hundred_parked_one_mib_tasks_stay_within_the_budget() {
    let home = Home::new();
    let script = "#!/bin/sh\ncat >/dev/null\nif [ \"$MUR_TURN\" = 1 ]; then echo 'name?'; exit 10; fi\necho done\n";
    let session = home.start(&[&capsule(&home, "asker", script)]);
    let url = session.url.clone();
    let text = "x".repeat(1_000_000);
    let (mut parked, mut refused) = (Vec::new(), 0);
    for n in 0..100 {
        let body = json!({"jsonrpc": "2.0", "id": n, "method": "message/send", "params": {"message":
            {"kind": "message", "messageId": format!("m{n}"), "role": "user",
             "parts": [{"kind": "text", "text": text}]}}});
        let answer = post(&url, body.to_string().as_bytes());
        if answer.status == 503 {
            assert_budget_refusal(&answer);
            refused += 1;
            continue;
        }
        let task: Value = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(
            task["result"]["status"]["state"], "input-required",
            "{task}"
        );
        parked.push(task["result"]["id"].as_str().unwrap().to_string());
    }
    let peak = peak_kib(session.pid);
    eprintln!(
        "100 x 1 MiB parked: {} parked, {refused} refused, peak RSS {} MiB",
        parked.len(),
        peak / 1024
    );
    assert!(refused > 0, "the overflow is refused");
    assert!(parked.len() >= 10, "{} parked", parked.len());
    assert!(peak < GOAL_KIB, "peak RSS {peak} KiB");
    // Nothing else is affected: a parked task reads, and takes its next turn.
    let first = &parked[0];
    let read = session.rpc(None, "tasks/get", json!({"id": first, "historyLength": 1}));
    assert_eq!(
        read["result"]["status"]["state"], "input-required",
        "{read}"
    );
    let next = json!({"message": {"kind": "message", "messageId": "again", "role": "user",
        "taskId": first, "parts": [{"kind": "text", "text": "Ada"}]}});
    let done = session.rpc(None, "message/send", next);
    assert_eq!(done["result"]["status"]["state"], "completed", "{done}");
}

/// A request's body is counted when its head arrives, before a byte of it is read: with a
/// 16 MiB budget held by fifteen requests whose 1 MiB bodies are still on their way, the next
/// one is refused 503 before it sends its body — so no body is ever held that the budget has
/// no room for — and once they are gone, a request is served again.
#[test]
fn a_body_is_counted_before_it_is_read_and_refused_unread_when_the_budget_is_full() {
    use std::io::{Read, Write};
    let home = Home::new();
    let manifest = json!({"name": "small", "version": "1.0.0",
        "lifecycle": {"memory_budget_mib": 16}});
    let path = home.write_capsule("small", manifest, Some("#!/bin/sh\ncat\n"));
    let session = home.start(&[path.to_str().unwrap()]);
    let head = |len: usize| {
        format!(
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n"
        )
    };
    let connect = || {
        let stream = std::net::TcpStream::connect(&session.url).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream
    };
    // Fifteen heads announcing 1 MiB each; their bodies never come. Each is admitted (no answer
    // yet), so each holds its share.
    let pending: Vec<std::net::TcpStream> = (0..15)
        .map(|_| {
            let mut stream = connect();
            stream.write_all(head(1 << 20).as_bytes()).unwrap();
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let mut refused = connect();
    refused.write_all(head(1 << 20).as_bytes()).unwrap();
    let mut answer = Vec::new();
    refused.read_to_end(&mut answer).unwrap();
    let answer = common::http::parse_answer(&answer).expect("an HTTP answer");
    assert_budget_refusal(&answer);
    for stream in &pending {
        stream.shutdown(std::net::Shutdown::Both).unwrap();
    }
    drop(pending);
    let send = json!({"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {"message":
        {"kind": "message", "messageId": "m", "role": "user",
         "parts": [{"kind": "text", "text": "x".repeat(900_000)}]}}});
    let body = send.to_string();
    let served = common::wait::wait_for(Duration::from_secs(10), "a request served again", || {
        let answer = post(&session.url, body.as_bytes());
        (answer.status == 200).then_some(answer)
    });
    let task: Value = serde_json::from_slice(&served.body).unwrap();
    assert_eq!(task["result"]["status"]["state"], "completed", "{task}");
}

/// 127 concurrent requests of 1 MiB of `data` (half a million zeros: the costliest tree) to the
/// public echo door at `url`, each answered within its deadline, a result or a 503 refusal:
/// `(answered, refused)`.
pub(crate) fn a_hundred_and_twenty_seven_data_parts(url: &str) -> (usize, usize) {
    let zeros = vec!["0"; 500_000].join(",");
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"message/send","params":{{"message":{{"kind":"message","messageId":"m","role":"user","parts":[{{"kind":"data","data":[{zeros}]}}]}}}}}}"#
    );
    assert!(body.len() > 1_000_000 && body.len() <= 1 << 20);
    let started = Instant::now();
    let threads: Vec<_> = (0..127)
        .map(|_| {
            let (url, body) = (url.to_string(), body.clone());
            std::thread::spawn(move || post(&url, body.as_bytes()))
        })
        .collect();
    let (mut answered, mut refused) = (0, 0);
    for thread in threads {
        let answer = thread.join().unwrap();
        if answer.status == 503 {
            assert_budget_refusal(&answer);
            refused += 1;
        } else {
            assert_eq!(answer.status, 200, "{}", answer.head);
            let task: Value = serde_json::from_slice(&answer.body).unwrap();
            let data = &task["result"]["artifacts"][0]["parts"][0]["data"];
            assert_eq!(data.as_array().map(Vec::len), Some(500_000));
            answered += 1;
        }
    }
    assert!(started.elapsed() < Duration::from_secs(60));
    eprintln!(
        "127 x 1 MiB data parts: {answered} answered, {refused} refused in {:?}",
        started.elapsed()
    );
    (answered, refused)
}

/// The 127 concurrent 1 MiB data parts: each answered, and the session's peak within the goal.
#[test]
fn a_hundred_and_twenty_seven_concurrent_one_mib_data_parts_are_each_answered() {
    let home = Home::new();
    let session = home.start(&[]);
    let (answered, _) = a_hundred_and_twenty_seven_data_parts(&session.url);
    let peak = peak_kib(session.pid);
    eprintln!("peak RSS {} MiB", peak / 1024);
    assert!(answered > 0);
    assert!(peak < GOAL_KIB, "peak RSS {peak} KiB");
}

/// A memory cgroup (v1's controller, or v2's where it is enabled) limited to `bytes`, removed
/// when dropped; `None` where this process may not make one (not root, no controller).
struct MemoryGroup {
    dir: std::path::PathBuf,
}

impl MemoryGroup {
    fn new(name: &str, bytes: u64) -> Option<Self> {
        let v2 = std::path::Path::new("/sys/fs/cgroup");
        let (root, limit) = match std::fs::read_to_string(v2.join("cgroup.subtree_control")) {
            Ok(controllers) if controllers.split_whitespace().any(|c| c == "memory") => {
                (v2.to_path_buf(), "memory.max")
            }
            _ => (v2.join("memory"), "memory.limit_in_bytes"),
        };
        let dir = root.join(format!("mur-test-{name}-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let group = Self { dir };
        std::fs::write(group.dir.join(limit), bytes.to_string()).ok()?;
        Some(group)
    }

    /// Move process `pid` (all its threads, and what it starts from now on) into the group.
    fn adopt(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).unwrap();
    }
}

impl Drop for MemoryGroup {
    fn drop(&mut self) {
        // Empty once the session has exited; a group still holding a process stays (rmdir
        // refuses), which says more than hiding it would.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Under a memory cgroup limited to the goal, 256 MiB, the session survives the hostile mixes —
/// 127 concurrent 1 MiB data parts with 128 idle keep-alive connections beside them —
/// and keeps answering: the kernel never has to kill it. Needs root and a memory controller;
/// skips loudly without.
#[test]
fn under_a_cgroup_memory_limit_of_the_goal_the_session_survives_the_hostile_mixes() {
    let Some(group) = MemoryGroup::new("budget", GOAL_KIB * 1024) else {
        return common::skip::skipped(
            "under_a_cgroup_memory_limit_of_the_goal_the_session_survives_the_hostile_mixes",
            "no memory cgroup could be made here (needs root and cgroup v1's memory controller or v2's)",
        );
    };
    let home = Home::new();
    let session = home.start(&[]);
    group.adopt(session.pid);
    let idle: Vec<std::net::TcpStream> = (0..128)
        .map(|_| std::net::TcpStream::connect(&session.url).unwrap())
        .collect();
    let (answered, _) = a_hundred_and_twenty_seven_data_parts(&session.url);
    assert!(answered > 0);
    drop(idle);
    assert!(
        common::process::alive(session.pid),
        "the kernel killed the session"
    );
    let task = session.send(None, "still here", true);
    assert_eq!(task["status"]["state"], "completed", "{task}");
}

/// 127 readers resubscribe to a task whose answer carries a 3 MiB file (4 MiB as base64) and
/// never read: the answer is shared, and a reader the budget cannot serve is cut.
#[test]
fn a_hundred_and_twenty_seven_never_reading_resubscribers_stay_within_the_budget() {
    let home = Home::new();
    let gate = Gate::new(&home);
    let script = format!(
        "#!/bin/sh\ncat >/dev/null\n{}mkdir -p \"$MUR_TASK_DIR/out\"\nhead -c 3000000 /dev/zero > \"$MUR_TASK_DIR/out/big.bin\"\necho done\n",
        gate.wait()
    );
    let session = home.start(&[&capsule(&home, "big", &script)]);
    let task = session.send(None, "go", false);
    let id = task["id"].as_str().unwrap().to_string();
    let readers: Vec<std::net::TcpStream> = (0..127)
        .map(|_| Sse::send(&session.url, None, "tasks/resubscribe", json!({"id": id})))
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    gate.open();
    let done = session.wait_task(None, &id, Duration::from_secs(60));
    assert_eq!(done["status"]["state"], "completed", "{done}");
    std::thread::sleep(Duration::from_secs(3));
    let peak = peak_kib(session.pid);
    eprintln!(
        "127 never-reading resubscribers to a 4 MiB answer: peak RSS {} MiB",
        peak / 1024
    );
    drop(readers);
    assert!(peak < GOAL_KIB, "peak RSS {peak} KiB");
}

/// One caller holds at most 256 streams (every unauthenticated client of a public door counting
/// as one): the 257th is refused 503 with a JSON-RPC error saying so, while the task and the
/// door go on — a read is answered, and once a stream closes a new one opens.
#[test]
fn one_caller_holds_at_most_two_hundred_and_fifty_six_streams() {
    use std::io::Read;
    let home = Home::new();
    let gate = Gate::new(&home);
    let script = format!("#!/bin/sh\ncat >/dev/null\n{}echo done\n", gate.wait());
    let session = home.start(&[&capsule(&home, "slow", &script)]);
    let task = session.send(None, "go", false);
    let id = task["id"].as_str().unwrap().to_string();
    let open = || {
        let mut stream = Sse::send(&session.url, None, "tasks/resubscribe", json!({"id": id}));
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut first = [0u8; 12];
        stream.read_exact(&mut first).unwrap();
        (stream, String::from_utf8_lossy(&first).into_owned())
    };
    let mut streams: Vec<std::net::TcpStream> = (0..256)
        .map(|n| {
            let (stream, status) = open();
            assert_eq!(status, "HTTP/1.1 200", "stream {n}");
            stream
        })
        .collect();
    let (mut refused, status) = open();
    assert_eq!(status, "HTTP/1.1 503");
    let mut rest = Vec::new();
    refused.read_to_end(&mut rest).unwrap();
    let rest = String::from_utf8_lossy(&rest);
    assert!(
        rest.contains("-32032") && rest.contains("256 open streams"),
        "{rest}"
    );
    let read = session.get_task(None, &id);
    assert_eq!(read["status"]["state"], "working", "{read}");
    drop(streams.pop());
    common::wait::wait_for(Duration::from_secs(10), "a stream given back", || {
        (open().1 == "HTTP/1.1 200").then_some(())
    });
    gate.open();
    let done = session.wait_task(None, &id, Duration::from_secs(30));
    assert_eq!(done["status"]["state"], "completed", "{done}");
}
