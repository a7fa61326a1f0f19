//! Faults (DESIGN.md §3, §5, §6): a murmur home on a full or read-only filesystem, directories
//! with the wrong modes, a 2 GiB sparse record, 100,000 junk files, a home whose path holds
//! spaces, a newline and non-UTF-8 bytes, 20 descriptors for `mur ps` over 100 records and for
//! `mur run`, a `mur ps` that inherits 20 of its 24 descriptors, and a door under slow-loris clients, connection floods and thousands of malformed
//! requests.
//!
//! The filesystem tests mount a 64 KiB tmpfs over the test's `HOME` (root only); where that
//! cannot be done they record the skip (`common::skip`: a loud `*** SKIPPED … ***` line and a line
//! in `target/tmp/skipped.tsv`) and pass. The mount is undone by a guard, whatever happens.

use crate::common;

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{
    door::session_of,
    home::{Home, mode_of},
    http::{dead_url, http, parse_answer, read_one_response},
    process::{Proc, status_field},
    records::{random_u64, record, session_id, write_record_atomically},
    session::{Session, completed_text, send_body},
    skip::skipped,
    stress::Mount,
};

/// A tmpfs of 64 KiB mounted over `home`, or `None` when test `test` (its `what` check) is
/// skipped: the loud skip line, and the skip recorded.
fn small_tmpfs(home: &Home, test: &str, what: &str) -> Option<Mount> {
    match Mount::tmpfs(home.path(), "size=64k,mode=0700") {
        Ok(mount) => Some(mount),
        Err(why) => {
            skipped(
                test,
                &format!("{what}: cannot mount a tmpfs over HOME ({why})"),
            );
            None
        }
    }
}

/// The session serves: its card names it and a `message/send` completes with the echo.
#[track_caller]
fn assert_serves(session: &Session, text: &str) {
    let card = session.card();
    assert_eq!(
        session_of(&card).as_deref(),
        Some(session.id.as_str()),
        "{card}"
    );
    let answer = session.try_send(None, text).expect("message/send");
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(
        completed_text(&answer.json()).as_deref(),
        Some(text),
        "{}",
        answer.text()
    );
}

/// Wait until the session's stderr holds `needle`.
#[track_caller]
fn assert_warned(session: &Session, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !session.stderr().contains(needle) {
        assert!(
            Instant::now() < deadline,
            "mur run did not warn {needle:?}; stderr: {:?}",
            session.stderr()
        );
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_full_home_warns_serves_unrecorded_and_ps_exits_as_designed() {
    let home = Home::new();
    let Some(mount) = small_tmpfs(
        &home,
        "a_full_home_warns_serves_unrecorded_and_ps_exits_as_designed",
        "full-filesystem HOME test",
    ) else {
        return;
    };
    let filled = mount.fill();
    assert!(
        fs::write(home.path().join("probe"), [0u8; 4096]).is_err(),
        "the tmpfs is full"
    );
    println!("full HOME: a {filled}-byte filler fills the 64 KiB tmpfs");

    // mur run: the record cannot be written; it says so and serves anyway.
    let mut session = home.start(&[]);
    assert_warned(&session, "running without a record");
    let warning = session.stderr();
    assert!(
        warning.contains("No space left on device"),
        "the warning names the reason: {warning:?}"
    );
    assert!(
        !home.record_path(&session.id).exists(),
        "no record was left: {:?}",
        home.running_entries()
    );
    assert!(
        home.running_entries().iter().all(|n| !n.ends_with(".tmp")),
        "no staging file left behind: {:?}",
        home.running_entries()
    );
    assert_serves(&session, "hello on a full disk");

    // ps lists nothing and exits 0; stop cannot address the unrecorded session.
    let ps = home.mur(&["ps", "--json"]);
    ps.expect_code(0);
    assert_eq!(ps.json()["capsules"].as_array().map(Vec::len), Some(0));
    let stop = home.mur(&["stop", &session.id]);
    stop.expect_code(1);
    assert_serves(&session, "still here");
    session.signal(libc::SIGTERM);
    assert_eq!(session.wait_exit(Duration::from_secs(20)).code(), Some(143));

    // ps with the running directory missing: 0, nothing listed, nothing created.
    fs::remove_dir_all(home.murmur()).ok();
    let ps = home.mur(&["ps"]);
    ps.expect_code(0);
    assert_eq!(ps.stdout, "no running capsules\n");
    assert!(!home.murmur().exists(), "ps created nothing");

    // ps with a running "directory" it cannot read: 1, naming the path.
    fs::create_dir(home.murmur()).unwrap();
    fs::set_permissions(home.murmur(), fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(home.running(), b"").unwrap();
    let ps = home.mur(&["ps"]);
    ps.expect_code(1);
    assert!(
        ps.stderr.starts_with("mur ps: ")
            && ps.stderr.contains(&home.running().display().to_string()),
        "{ps:?}"
    );
    drop(mount);
}

#[test]
fn a_read_only_home_warns_serves_unrecorded_and_ps_exits_as_designed() {
    let home = Home::new();
    let Some(mount) = small_tmpfs(
        &home,
        "a_read_only_home_warns_serves_unrecorded_and_ps_exits_as_designed",
        "read-only HOME test",
    ) else {
        return;
    };

    // No ~/.murmur and none can be made.
    mount.remount("ro");
    let mut session = home.start(&[]);
    assert_warned(&session, "running without a record");
    assert!(
        session.stderr().contains("Read-only file system"),
        "{:?}",
        session.stderr()
    );
    assert!(!home.murmur().exists());
    assert_serves(&session, "hello on a read-only disk");
    let ps = home.mur(&["ps"]);
    ps.expect_code(0);
    assert_eq!(ps.stdout, "no running capsules\n");
    home.mur(&["stop", &session.id]).expect_code(1);
    session.signal(libc::SIGTERM);
    assert_eq!(session.wait_exit(Duration::from_secs(20)).code(), Some(143));

    // A running directory that exists, holds a stale record, and is read-only: ps reads it and
    // exits 0, whether or not the directory's mode is right (it cannot be re-moded there).
    mount.remount("rw");
    let running = home.running_dir();
    let (dead_pid, dead_start) = {
        let mut p = Proc::sleeper();
        let id = (p.pid(), p.start());
        p.kill();
        id
    };
    let stale = session_id();
    let stale_path = write_record_atomically(
        &running,
        &record(&stale, dead_pid, &dead_start, &dead_url()),
    );
    for mode in [0o700, 0o755] {
        mount.remount("rw");
        fs::set_permissions(&running, fs::Permissions::from_mode(mode)).unwrap();
        mount.remount("ro");
        let ps = home.mur(&["ps", "--json", "-v"]);
        println!(
            "read-only running dir at {mode:o}: mur ps exit {:?}, stderr {:?}",
            ps.code, ps.stderr
        );
        ps.expect_code(0);
        assert_eq!(ps.json()["capsules"].as_array().map(Vec::len), Some(0));
        assert!(
            stale_path.exists(),
            "nothing can be removed on a read-only filesystem"
        );
        // It says so, and claims no prune that did not happen.
        assert!(!ps.stderr.contains("pruned"), "{:?}", ps.stderr);
        assert!(
            ps.stderr.contains("cannot be removed") && ps.stderr.contains(&stale),
            "{:?}",
            ps.stderr
        );
    }

    // A running "directory" that cannot be read, on a read-only filesystem: 1, naming the path.
    mount.remount("rw");
    fs::remove_dir_all(&running).unwrap();
    fs::write(&running, b"").unwrap();
    mount.remount("ro");
    let ps = home.mur(&["ps"]);
    ps.expect_code(1);
    assert!(
        ps.stderr.starts_with("mur ps: ") && ps.stderr.contains(&running.display().to_string()),
        "{ps:?}"
    );
    drop(mount);
}

#[test]
fn wide_directories_are_remoded_0700_by_run_and_by_ps_when_it_prunes() {
    let home = Home::new();
    fs::create_dir_all(home.running()).unwrap();
    fs::set_permissions(home.murmur(), fs::Permissions::from_mode(0o777)).unwrap();
    fs::set_permissions(home.running(), fs::Permissions::from_mode(0o755)).unwrap();

    let mut session = home.start(&[]);
    assert_eq!(mode_of(&home.murmur()), 0o700, "mur run re-modes ~/.murmur");
    assert_eq!(
        mode_of(&home.running()),
        0o700,
        "mur run re-modes ~/.murmur/running"
    );
    assert_eq!(mode_of(&home.record_path(&session.id)), 0o600);
    session.signal(libc::SIGTERM);
    assert_eq!(session.wait_exit(Duration::from_secs(20)).code(), Some(143));

    fs::set_permissions(home.murmur(), fs::Permissions::from_mode(0o777)).unwrap();
    fs::set_permissions(home.running(), fs::Permissions::from_mode(0o755)).unwrap();
    let (dead_pid, dead_start) = {
        let mut p = Proc::sleeper();
        let id = (p.pid(), p.start());
        p.kill();
        id
    };
    let stale = write_record_atomically(
        &home.running(),
        &record(&session_id(), dead_pid, &dead_start, &dead_url()),
    );
    let ps = home.mur(&["ps", "-v"]);
    ps.expect_code(0);
    assert!(ps.stderr.contains("pruned"), "{ps:?}");
    assert!(!stale.exists());
    assert_eq!(mode_of(&home.murmur()), 0o700, "mur ps re-modes ~/.murmur");
    assert_eq!(
        mode_of(&home.running()),
        0o700,
        "mur ps re-modes ~/.murmur/running"
    );
}

// ---------------------------------------------------------------------------------------------
// The door under abuse
// ---------------------------------------------------------------------------------------------

const LORIS: usize = 8;
const BURSTS: usize = 20;
const BURST_SIZE: usize = 50;
const FLOOD_THREADS: usize = 4;
const MALFORMED: usize = 10_000;
const PEAK_RSS_BOUND_KB: u64 = 64 * 1024;

fn connect(url: &str) -> std::io::Result<TcpStream> {
    let addr: SocketAddr = url.parse().unwrap();
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(15)))?;
    stream.set_write_timeout(Some(Duration::from_secs(15)))?;
    Ok(stream)
}

/// Send `bytes` on a fresh connection and read the answer to EOF: its status, `None` when the
/// connection was reset or closed before an answer.
fn one_shot(url: &str, bytes: &[u8]) -> Option<u16> {
    let mut stream = connect(url).ok()?;
    let _ = stream.write_all(bytes);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    parse_answer(&answer).map(|a| a.status)
}

/// Counts of what the flood got back.
#[derive(Default)]
struct Tally {
    sent: AtomicUsize,
    by_status: Mutex<std::collections::BTreeMap<String, usize>>,
    wrong: Mutex<Vec<String>>,
}

impl Tally {
    fn note(&self, kind: &str, got: Option<u16>, expected: &[u16], reset_ok: bool) {
        self.sent.fetch_add(1, Ordering::Relaxed);
        let key = got.map_or_else(|| "reset".to_string(), |s| s.to_string());
        *self
            .by_status
            .lock()
            .unwrap()
            .entry(key.clone())
            .or_default() += 1;
        let fine = match got {
            Some(status) => expected.contains(&status),
            None => reset_ok,
        };
        if !fine {
            self.wrong
                .lock()
                .unwrap()
                .push(format!("{kind}: got {key}, expected {expected:?}"));
        }
    }
}

/// One cycle of malformed requests (10 of them): five on connections of their own, five
/// pipelined on one keep-alive connection.
fn malformed_cycle(url: &str, n: usize, tally: &Tally) {
    // A bad head: control bytes where the method goes.
    tally.note(
        "bad head",
        one_shot(url, b"\x01\x02\x03 / HTTP/1.1\r\n\r\n"),
        &[400],
        false,
    );
    // A body far past the bound, announced and never sent.
    tally.note(
        "huge Content-Length",
        one_shot(
            url,
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n",
        ),
        &[413, 400],
        false,
    );
    // Garbage bytes.
    let mut garbage = vec![0u8; 300];
    let mut x = random_u64() | 1;
    for byte in &mut garbage {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *byte = x as u8;
    }
    garbage[0] = 0x7f;
    garbage.extend_from_slice(b"\r\n\r\n");
    tally.note("garbage", one_shot(url, &garbage), &[400], false);
    // A head past 16 KiB (the door may close before reading all of it: a reset is fine).
    if n.is_multiple_of(2) {
        let mut big = b"GET / HTTP/1.1\r\nX-Pad: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', 17 * 1024));
        big.extend_from_slice(b"\r\n\r\n");
        tally.note("oversized head", one_shot(url, &big), &[431], true);
    } else {
        tally.note(
            "Transfer-Encoding",
            one_shot(
                url,
                b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            ),
            &[501],
            true,
        );
    }
    tally.note(
        "conflicting Content-Length",
        one_shot(
            url,
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        ),
        &[400],
        true,
    );
    // Five bodies that are not valid JSON-RPC, pipelined on one connection: each answered 200
    // with its JSON-RPC error, the connection kept.
    let bodies: [&[u8]; 5] = [
        b"{\"jsonrpc\": \"2.0\", \"method\": ",
        b"\xff\xfe\x00 not json at all",
        b"{\"jsonrpc\": \"1.0\", \"id\": 1, \"method\": \"message/send\"}",
        b"{\"jsonrpc\": \"2.0\", \"id\": [1], \"method\": \"tasks/get\"}",
        b"{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": \"no/such/method\"}",
    ];
    let expected_codes = [-32700, -32700, -32600, -32600, -32601];
    let mut pipelined = Vec::new();
    for body in bodies {
        pipelined.extend_from_slice(
            format!(
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        );
        pipelined.extend_from_slice(body);
    }
    let Ok(mut stream) = connect(url) else {
        for _ in 0..5 {
            tally.note("invalid JSON-RPC", None, &[200], false);
        }
        return;
    };
    let _ = stream.write_all(&pipelined);
    let mut buf = Vec::new();
    for code in expected_codes {
        let answer = read_one_response(&mut stream, &mut buf);
        let got_code = answer
            .as_ref()
            .and_then(|a| serde_json::from_slice::<serde_json::Value>(&a.body).ok())
            .and_then(|v| v["error"]["code"].as_i64());
        let status = answer.as_ref().map(|a| a.status);
        if status == Some(200) && got_code != Some(code) {
            tally.wrong.lock().unwrap().push(format!(
                "invalid JSON-RPC: error code {got_code:?}, expected {code}"
            ));
        }
        tally.note("invalid JSON-RPC", status, &[200], false);
    }
}

/// One slow-loris connection: trickles a valid request a byte a second. Returns how long after
/// its first byte the door answered and closed, and the status it answered.
fn slow_loris(url: &str) -> (Duration, Option<u16>) {
    let mut stream = connect(url).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let request = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
    let first = Instant::now();
    let mut answer = Vec::new();
    for &byte in request.iter().cycle().take(30) {
        if stream.write_all(&[byte]).is_err() {
            break;
        }
        let mut chunk = [0u8; 1024];
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&chunk[..n]);
                let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                while let Ok(n) = stream.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    answer.extend_from_slice(&chunk[..n]);
                }
                break;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    (first.elapsed(), parse_answer(&answer).map(|a| a.status))
}

/// Connection attempts in bursts: open BURST_SIZE at once (half send half a head), then close
/// them all; every attempt is counted in `attempts`.
fn connection_bursts(url: &str, attempts: &AtomicUsize) {
    for _ in 0..BURSTS {
        let mut open = vec![];
        for i in 0..BURST_SIZE {
            attempts.fetch_add(1, Ordering::Relaxed);
            if let Ok(mut stream) = connect(url) {
                if i % 2 == 0 {
                    let _ = stream.write_all(b"GET /.well-known/agent-ca");
                }
                open.push(stream);
            }
        }
        thread::sleep(Duration::from_millis(20));
        drop(open);
        thread::sleep(Duration::from_millis(30));
    }
}

/// LORIS slow-loris connections to `url`, each on a thread of its own.
fn start_slow_loris(url: &str) -> Vec<thread::JoinHandle<(Duration, Option<u16>)>> {
    (0..LORIS)
        .map(|_| {
            let url = url.to_string();
            thread::spawn(move || slow_loris(&url))
        })
        .collect()
}

/// MALFORMED malformed requests to `url`, by FLOOD_THREADS threads, answers noted in `tally`.
fn start_flood(url: &str, tally: &Arc<Tally>) -> Vec<thread::JoinHandle<()>> {
    (0..FLOOD_THREADS)
        .map(|t| {
            let (url, tally) = (url.to_string(), tally.clone());
            thread::spawn(move || {
                let cycles = MALFORMED / 10 / FLOOD_THREADS;
                for n in 0..cycles {
                    malformed_cycle(&url, n + t, &tally);
                }
            })
        })
        .collect()
}

/// What the watcher saw while the door was abused: the valid requests it made and their
/// failures, and the peaks of the door's RSS and thread count.
struct Watch {
    done: AtomicBool,
    checks: Mutex<(usize, Vec<String>)>,
    peak_rss: AtomicU64,
    peak_threads: AtomicU64,
}

/// Until `watch.done`: valid requests must keep succeeding; sample the memory and threads of
/// the door's process `pid`.
fn watch_the_door(url: &str, pid: u32, watch: &Watch) {
    let mut n = 0;
    while !watch.done.load(Ordering::SeqCst) {
        n += 1;
        let text = format!("valid during the flood #{n}");
        let body = send_body(&text).to_string();
        let outcome = http(url, "POST", "/", None, body.as_bytes());
        let mut checks = watch.checks.lock().unwrap();
        checks.0 += 1;
        match outcome {
            Ok(a)
                if a.status == 200
                    && completed_text(&a.json()).as_deref() == Some(text.as_str()) => {}
            Ok(a) => checks
                .1
                .push(format!("#{n}: HTTP {} {}", a.status, a.text())),
            Err(e) => checks.1.push(format!("#{n}: {e}")),
        }
        drop(checks);
        if let Some(rss) = status_field(pid, "VmRSS") {
            watch.peak_rss.fetch_max(rss, Ordering::Relaxed);
        }
        if let Some(threads) = status_field(pid, "Threads") {
            watch.peak_threads.fetch_max(threads, Ordering::Relaxed);
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Threads the flood may leave beyond those before it: none should be, the door's workers being
/// a fixed few started with it (mur's `net/server/worker.rs`); the slack is for threads of the
/// session's own that may be starting or ending as it is counted (a task's). A thread per
/// connection (the flood makes over a thousand) would show far more.
const THREAD_SLACK: u64 = 4;

/// The thread count of `pid` once its connection threads are gone (within 15 s) or the last
/// one seen.
fn threads_once_settled(pid: u32, threads_before: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut threads_after = status_field(pid, "Threads").unwrap();
    while threads_after > threads_before + THREAD_SLACK && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
        threads_after = status_field(pid, "Threads").unwrap();
    }
    threads_after
}

/// Every slow-loris connection was answered 408 and dropped about 10 s after its first byte.
fn assert_loris_cut_off(loris_results: &[(Duration, Option<u16>)]) {
    for (elapsed, status) in loris_results {
        assert_eq!(
            *status,
            Some(408),
            "a slow-loris connection is answered 408"
        );
        assert!(
            *elapsed >= Duration::from_secs(9) && *elapsed <= Duration::from_secs(14),
            "dropped about 10 s after its first byte, not {elapsed:?}"
        );
    }
}

#[test]
fn the_door_keeps_serving_under_slow_loris_floods_and_malformed_requests_in_bounded_memory() {
    let t0 = Instant::now();
    let home = Home::new();
    let mut session = home.start(&[]);
    let pid = session.pid;
    let url = session.url.clone();
    assert_serves(&session, "before");
    let rss_before = status_field(pid, "VmRSS").unwrap();
    let hwm_before = status_field(pid, "VmHWM").unwrap();
    let threads_before = status_field(pid, "Threads").unwrap();

    // Slow loris: the door must answer 408 and close about 10 s after the first byte.
    let loris = start_slow_loris(&url);
    let attempts = Arc::new(AtomicUsize::new(0));
    let bursts = {
        let (url, attempts) = (url.clone(), attempts.clone());
        thread::spawn(move || connection_bursts(&url, &attempts))
    };
    // The flood of malformed requests.
    let tally = Arc::new(Tally::default());
    let flood_started = Instant::now();
    let flood = start_flood(&url, &tally);
    // Meanwhile: valid requests must keep succeeding; sample memory and threads.
    let watch = Arc::new(Watch {
        done: AtomicBool::new(false),
        checks: Mutex::default(),
        peak_rss: AtomicU64::new(rss_before),
        peak_threads: AtomicU64::new(threads_before),
    });
    let checker = {
        let (url, watch) = (url.clone(), watch.clone());
        thread::spawn(move || watch_the_door(&url, pid, &watch))
    };

    for f in flood {
        f.join().unwrap();
    }
    let flood_time = flood_started.elapsed();
    bursts.join().unwrap();
    let loris_results: Vec<(Duration, Option<u16>)> =
        loris.into_iter().map(|l| l.join().unwrap()).collect();
    watch.done.store(true, Ordering::SeqCst);
    checker.join().unwrap();

    // After: still serving, connection threads gone, memory bounded.
    assert!(session.alive(), "the session survived");
    assert_serves(&session, "after the flood");
    let threads_after = threads_once_settled(pid, threads_before);
    let rss_after = status_field(pid, "VmRSS").unwrap();
    let hwm_after = status_field(pid, "VmHWM").unwrap();
    let (valid_checks, valid_failures) = watch.checks.lock().unwrap().clone();
    let by_status = tally.by_status.lock().unwrap().clone();
    let wrong = tally.wrong.lock().unwrap().clone();
    println!(
        "door abuse: {} malformed requests in {flood_time:.1?} by {FLOOD_THREADS} threads, answers by status {by_status:?}; \
         {} connection attempts in {BURSTS} bursts of {BURST_SIZE}; {LORIS} slow-loris connections ended after {:?} with {:?}; \
         {valid_checks} valid message/send during the flood, {} failed; \
         VmRSS {rss_before} kB before, {rss_after} kB after, sampled peak {} kB; VmHWM {hwm_before} kB before, \
         {hwm_after} kB after (peak RSS {:.1} MiB, bound {} MiB); threads {threads_before} before, peak {}, {threads_after} after; \
         total {:.1?}",
        tally.sent.load(Ordering::Relaxed),
        attempts.load(Ordering::Relaxed),
        loris_results
            .iter()
            .map(|(d, _)| format!("{:.1}s", d.as_secs_f64()))
            .collect::<Vec<_>>(),
        loris_results.iter().map(|(_, s)| *s).collect::<Vec<_>>(),
        valid_failures.len(),
        watch.peak_rss.load(Ordering::Relaxed),
        hwm_after as f64 / 1024.0,
        PEAK_RSS_BOUND_KB / 1024,
        watch.peak_threads.load(Ordering::Relaxed),
        t0.elapsed(),
    );
    assert_eq!(tally.sent.load(Ordering::Relaxed), MALFORMED);
    assert!(
        wrong.is_empty(),
        "{} unexpected answers, e.g. {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(10)]
    );
    assert!(valid_checks >= 5, "valid requests ran during the flood");
    assert!(
        valid_failures.is_empty(),
        "valid requests failed: {valid_failures:?}"
    );
    assert_loris_cut_off(&loris_results);
    assert!(
        threads_after <= threads_before + THREAD_SLACK,
        "connection threads linger: {threads_before} before, {threads_after} after"
    );
    assert!(
        hwm_after < PEAK_RSS_BOUND_KB,
        "peak RSS {hwm_after} kB is over the {PEAK_RSS_BOUND_KB} kB bound"
    );
    session.signal(libc::SIGTERM);
    assert_eq!(session.wait_exit(Duration::from_secs(20)).code(), Some(143));
}

/// `mur` under this test's deadline with `HOME` set to `home` (any bytes), run from `/`.
fn mur_in(home: &std::path::Path, args: &[&str]) -> common::run::Output {
    let command = common::run::mur_command(home, std::path::Path::new("/"), args);
    common::run::run(command, Duration::from_secs(60))
}

#[test]
fn a_2_gib_sparse_record_is_refused_unread() {
    let home = Home::new();
    let sparse = home.running_dir().join("ses_sparse.json");
    fs::File::create(&sparse).unwrap().set_len(2 << 30).unwrap();
    let ps = mur_in(home.path(), &["ps", "-v"]);
    ps.expect_code(0);
    // Refused from fstat's size, before a byte is read.
    assert!(ps.stderr.contains("larger than"), "{}", ps.stderr);
    assert!(
        !sparse.exists(),
        "the sparse file is pruned as not a record"
    );
}

#[test]
fn a_hundred_thousand_junk_files_are_swept_past() {
    let home = Home::new();
    let running = home.running_dir();
    let live = Proc::sleeper();
    let sid = session_id();
    home.write_record(&record(&sid, live.pid(), &live.start(), &dead_url()));
    for i in 0..50_000 {
        fs::write(running.join(format!("junk-{i}.json")), b"not json").unwrap();
        fs::write(running.join(format!("junk-{i}.txt")), b"").unwrap();
    }
    let ps = mur_in(home.path(), &["ps", "--json"]);
    ps.expect_code(0);
    assert!(
        ps.stderr.contains("pruned 50000 stale records"),
        "{}",
        ps.stderr
    );
    assert_eq!(
        common::records::status_of(&ps.json(), &sid).as_deref(),
        Some("unreachable")
    );
    // What is not `*.json` is not mur's to judge: left alone.
    assert_eq!(home.running_entries().len(), 50_001);
}

#[test]
fn a_home_with_spaces_newlines_and_non_utf8_bytes_works() {
    use std::os::unix::ffi::OsStrExt;
    let base = Home::new();
    let odd = base
        .path()
        .join(std::ffi::OsStr::from_bytes(b"a home\nwith \xff bytes"));
    fs::create_dir(&odd).unwrap();
    let run = mur_in(&odd, &["run", "--task", "hi"]);
    run.expect_code(0);
    assert_eq!(run.stdout, "hi\n");
    let mut command = common::run::mur_command(&odd, std::path::Path::new("/"), &["run", "--json"]);
    command.stderr(std::process::Stdio::piped());
    let session = Session::spawn(command);
    let ps = mur_in(&odd, &["ps", "--json"]);
    ps.expect_code(0);
    assert_eq!(
        common::records::status_of(&ps.json(), &session.id).as_deref(),
        Some("running"),
        "{}",
        ps.stdout
    );
    mur_in(&odd, &["stop", &session.id]).expect_code(0);
    assert!(common::home::list_dir(&odd.join(".murmur/running")).is_empty());
}

/// `command` run with its descriptor limit at `n` (soft and hard).
fn with_open_files(command: &mut std::process::Command, n: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit(2) with a live struct is async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

/// `command`'s child holds descriptors 3 to `last` open (copies of stderr) before it execs: as if
/// its parent had leaked them.
fn with_inherited_descriptors(command: &mut std::process::Command, last: libc::c_int) {
    use std::os::unix::process::CommandExt;
    // SAFETY: dup2(2) on integers is async-signal-safe; the copies are the child's alone.
    unsafe {
        command.pre_exec(move || {
            for fd in 3..=last {
                if libc::dup2(2, fd) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// A `mur ps` that starts with most of its descriptor limit already taken (20 inherited of 24)
/// still probes every door, a few at a time: in-flight probes are bounded by what is free, not by
/// the limit alone, so no layer-1/2 reading or probe fails for want of a descriptor.
#[test]
fn inherited_descriptors_leave_fewer_probes_in_flight_never_failed_ones() {
    let home = Home::new();
    let live = Proc::sleeper();
    let mut doors = vec![];
    let ids: Vec<String> = (0..30).map(|_| session_id()).collect();
    for sid in &ids {
        let door = common::door::Door::public(sid);
        home.write_record(&record(sid, live.pid(), &live.start(), &door.url()));
        doors.push(door);
    }
    ps_with_descriptors(&home, (24, 19), &ids, "running");
}

/// `mur ps --json` in `home` with its descriptor limit at `limit` and descriptors 3 to `last`
/// already open (none when `last` is below 3): every one of `ids` must be listed `status`.
fn ps_with_descriptors(
    home: &Home,
    (limit, last): (u64, libc::c_int),
    ids: &[String],
    status: &str,
) {
    let mut ps = home.command(&["ps", "--json"]);
    with_inherited_descriptors(&mut ps, last);
    with_open_files(&mut ps, limit);
    let ps = common::run::run(ps, Duration::from_secs(60));
    ps.expect_code(0);
    let listed = ps.json();
    for sid in ids {
        assert_eq!(
            common::records::status_of(&listed, sid).as_deref(),
            Some(status),
            "{}",
            ps.stdout
        );
    }
}

#[test]
fn twenty_descriptors_are_enough_or_a_clear_error_never_a_hang() {
    let home = Home::new();
    let live = Proc::sleeper();
    let ids: Vec<String> = (0..100).map(|_| session_id()).collect();
    for sid in &ids {
        home.write_record(&record(sid, live.pid(), &live.start(), &dead_url()));
    }
    // Kept, whatever the probe could do with the descriptors it had.
    ps_with_descriptors(&home, (20, 0), &ids, "unreachable");
    let mut run = home.command(&["run", "--task", "hi"]);
    with_open_files(&mut run, 20);
    let run = common::run::run(run, Duration::from_secs(60));
    run.expect_code(0);
    assert_eq!(run.stdout, "hi\n");
}
