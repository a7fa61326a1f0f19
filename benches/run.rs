//! What one `mur run` session costs: how fast its door answers, what a handler task adds over
//! running the handler directly, how much memory an idle session holds, and how long `mur run
//! --json` takes to say it is ready. A benchmark, not a test: it prints figures and asserts no
//! timing.
//!
//! Run with `cargo bench --bench run`. Cargo builds the `mur` binary for it (the bench profile
//! inherits `[profile.release]`) and passes its path as `CARGO_BIN_EXE_mur`. Every session is a
//! real `mur run`, spawned with `HOME` set to a temporary directory this bench makes (and
//! removes), and reached on loopback from this process; nothing in the real `~/.murmur` is read
//! or touched. Every session is ended with SIGTERM and waited for, and the bench checks at the
//! end that no process it started is left (a panic or a failure SIGKILLs what it started).
//!
//! Figures:
//!
//! - readiness: wall time from spawning `mur run --json` (embedded echo capsule) to its readiness
//!   line on our end of its stdout, median of 50 runs; each run is then sent SIGTERM and waited
//!   for (that time is printed too);
//! - idle RSS: `VmRSS` from `/proc/<pid>/status` of a fresh session, ready and left idle for 1 s;
//! - agent-card GETs per second over keep-alive connections, 1 connection and 2 (one thread each);
//! - `message/send` round trips per second to the embedded echo capsule, keep-alive, 1 and 2
//!   client threads;
//! - handler overhead: a manifest capsule whose handler is `/bin/cat` (and one whose handler is a
//!   two-line `sh` script running `cat`): median wall time of a blocking `message/send` round trip
//!   next to the median time of spawning the same handler from this process with the same stdin
//!   (`std::process::Command`, stdout and stderr captured, waited for), interleaved one for one;
//! - streaming: the time from a handler's first write to that chunk's arrival at an SSE client
//!   (`message/stream`; the handler, a `bash` script, writes `$EPOCHREALTIME` — read just before
//!   its write — and the bench compares it with its own clock on arrival), median of 100 tasks;
//!   and the events and bytes per second a chatty handler (`yes | head`, 4.4 MB, cut at the
//!   answer's 4 MiB) streams to a reader that keeps up, to its final status;
//! - memory bound: peak RSS (`VmHWM`) of an echo session after 200 requests of 1 MiB each (half a
//!   million tiny JSON values in `metadata`), the test's figure on the release build.

// Bench scaffolding signals its own children directly; each block says why it is sound.
// `unsafe` stays denied in the product, outside `src/sys`.
#![allow(unsafe_code)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

mod common;
use common::{
    Home, MUR, Style, fail, leftovers, loadavg, median, mkdir, percentile, signal, table, write,
};

/// Seconds from 1 s up, microseconds below 1 ms; a spread has its 90th percentile and count.
const STYLE: Style = Style {
    seconds: true,
    tenths_from_10s: false,
    micros: true,
    p90_and_count: true,
};
/// Readiness runs measured, after [`READY_WARMUP`] unmeasured ones.
const READY_RUNS: usize = 50;
const READY_WARMUP: usize = 5;
/// How long an idle session sits before its RSS is read.
const IDLE: Duration = Duration::from_secs(1);
/// Each throughput figure: this long unmeasured, then this long measured.
const WARMUP: Duration = Duration::from_millis(500);
const MEASURE: Duration = Duration::from_secs(3);
/// Handler round trips measured (each beside one direct spawn), after a few unmeasured.
const HANDLER_RUNS: usize = 300;
const HANDLER_WARMUP: usize = 20;
/// Streamed tasks timed for the first chunk.
const STREAM_RUNS: usize = 100;
/// The text every task carries.
const TEXT: &str = "ping";

fn main() {
    // `cargo bench` passes `--bench`; this harness takes no options.
    // A failure or panic SIGKILLs the sessions alive, and the home goes 100 ms later.
    common::guarded("run", Duration::from_millis(100));
    let home = Home::new();
    common::banner(&home);
    println!();

    // Readiness first, while this process is single-threaded and quiet.
    let ready = report_readiness(&home);

    // Idle RSS of a fresh echo session and of a fresh manifest (cat) session.
    let cat = home.capsule("cat", &["/bin/cat"], None);
    let script = home.capsule("script", &["./handler.sh"], Some("#!/bin/sh\ncat\n"));
    let workdir = home.root().join("work");
    mkdir(&workdir);
    let idle_rss = report_idle_memory(&home, &cat);

    let door = report_door_throughput(&home);
    let overheads = report_handler_overhead(&home, &cat, &script, &workdir, door.send1.median);
    let streaming = report_streaming(&home);
    let large_hwm = report_large_requests(&home);

    let left = leftovers(home.root());
    if !left.is_empty() {
        fail(&format!("processes left behind: {left:?}"));
    }
    print_summary(&ready, idle_rss, &door, overheads);
    print_streaming_summary(&streaming, large_hwm);
}

/// Measures and prints the readiness figures; the readiness times.
fn report_readiness(home: &Home) -> Vec<Duration> {
    let (ready, stops) = readiness(home);
    println!(
        "readiness: spawn of `mur run --json` (echo) to its readiness line, {READY_RUNS} runs \
         ({READY_WARMUP} unmeasured before)"
    );
    println!("  {}", STYLE.spread(&ready));
    println!("  then SIGTERM to exit (reaped): {}", STYLE.spread(&stops));
    println!();
    ready
}

/// Measures and prints the idle memory of a fresh echo session and of a fresh session of the
/// `cat` capsule; the echo session's RSS in KiB.
fn report_idle_memory(home: &Home, cat: &Path) -> u64 {
    println!(
        "idle memory: fresh session, ready, then idle {} s",
        IDLE.as_secs()
    );
    let mut idle_rss = 0;
    for (label, args) in [
        ("echo (embedded)", vec![]),
        ("cat (manifest)", vec![cat.as_os_str()]),
    ] {
        let session = Session::start(home, &args);
        thread::sleep(IDLE);
        let status = ProcStatus::of(session.pid);
        if idle_rss == 0 {
            idle_rss = status.rss_kib;
        }
        println!("  {label:<16} {}", status.describe());
    }
    println!();
    idle_rss
}

/// The door's throughput figures against one echo session.
struct DoorThroughput {
    card1: Throughput,
    card2: Throughput,
    send1: Throughput,
    send2: Throughput,
}

/// Measures and prints the door's throughput against one echo session: agent-card GETs and
/// `message/send`s, 1 and 2 at a time.
fn report_door_throughput(home: &Home) -> DoorThroughput {
    let echo = Session::start(home, &[]);
    let card_get = format!(
        "GET /.well-known/agent-card.json HTTP/1.1\r\nHost: {}\r\n\r\n",
        echo.url
    )
    .into_bytes();
    let send = message_send(&echo.url);
    let names_session = echo.session_id.clone();
    let card_ok = move |body: &[u8]| contains(body, names_session.as_bytes());
    let send_ok = |body: &[u8]| {
        contains(body, br#""state":"completed""#)
            && contains(body, format!("\"{TEXT}\"").as_bytes())
    };
    println!(
        "door throughput, echo session {} at {} (keep-alive; {} ms warm-up, then {} s)",
        echo.session_id,
        echo.url,
        WARMUP.as_millis(),
        MEASURE.as_secs()
    );
    let card1 = throughput(&echo.url, &card_get, 1, &card_ok);
    println!("  agent card   1 connection   {}", card1.describe());
    let card2 = throughput(&echo.url, &card_get, 2, &card_ok);
    println!("  agent card   2 connections  {}", card2.describe());
    let send1 = throughput(&echo.url, &send, 1, &send_ok);
    println!("  message/send 1 thread       {}", send1.describe());
    let send2 = throughput(&echo.url, &send, 2, &send_ok);
    println!("  message/send 2 threads      {}", send2.describe());
    println!(
        "  the session after that load: {}",
        ProcStatus::of(echo.pid).describe()
    );
    drop(echo);
    println!();
    DoorThroughput {
        card1,
        card2,
        send1,
        send2,
    }
}

/// Measures and prints the handler overhead of the `cat` and `script` capsules: a task through
/// the door next to the same handler spawned directly, and for scale `echo_send`, the median
/// echo round trip. The extra median time of each.
fn report_handler_overhead(
    home: &Home,
    cat: &Path,
    script: &Path,
    workdir: &Path,
    echo_send: Duration,
) -> Vec<(&'static str, Duration)> {
    println!(
        "handler overhead: blocking message/send round trip vs. spawning the same handler here \
         ({HANDLER_RUNS} each, interleaved, {HANDLER_WARMUP} unmeasured)"
    );
    let mut overheads = vec![];
    for (label, dir, argv) in [
        ("/bin/cat", cat, vec![PathBuf::from("/bin/cat")]),
        ("sh script", script, vec![script.join("handler.sh")]),
    ] {
        let session = Session::start_in(home, &[dir.as_os_str()], workdir);
        let (through, direct) = handler_overhead(&session, &argv, workdir);
        let (t, d) = (median(&through), median(&direct));
        let extra = t.saturating_sub(d);
        println!("  {label}");
        println!("    via mur  {}", STYLE.spread(&through));
        println!("    direct   {}", STYLE.spread(&direct));
        println!(
            "    extra    {} (median via mur - median direct); min - min: {}; p90 - p90: {}",
            STYLE.ms(extra),
            STYLE.ms(percentile(&through, 0).saturating_sub(percentile(&direct, 0))),
            STYLE.ms(percentile(&through, 90).saturating_sub(percentile(&direct, 90)))
        );
        overheads.push((label, extra));
    }
    println!(
        "  for scale: an echo message/send round trip (no handler) has median {}",
        STYLE.ms(echo_send)
    );
    println!();
    overheads
}

/// Prints the summary table of every figure beside what is expected of it.
fn print_summary(
    ready: &[Duration],
    idle_rss: u64,
    door: &DoorThroughput,
    overheads: Vec<(&str, Duration)>,
) {
    println!("summary");
    let mut rows = vec![
        ["figure".to_string(), "measured".into(), "expected".into()],
        [
            "readiness (median of 50)".into(),
            STYLE.ms(median(ready)),
            "<= 10 ms".into(),
        ],
        [
            "idle RSS (echo)".into(),
            format!("{} KiB = {:.2} MiB", idle_rss, idle_rss as f64 / 1024.0),
            "<= 4 MiB".into(),
        ],
        [
            "agent card GET, 1 conn".into(),
            format!("{:.0}/s", door.card1.rate),
            "-".into(),
        ],
        [
            "agent card GET, 2 conns".into(),
            format!("{:.0}/s", door.card2.rate),
            "-".into(),
        ],
        [
            "message/send echo, 1 thread".into(),
            format!("{:.0}/s", door.send1.rate),
            "-".into(),
        ],
        [
            "message/send echo, 2 threads".into(),
            format!("{:.0}/s", door.send2.rate),
            ">= 5,000/s on 2 cores".into(),
        ],
    ];
    for (label, extra) in overheads {
        rows.push([
            format!("handler overhead, {label}"),
            STYLE.ms(extra),
            "<= 2 ms".into(),
        ]);
    }
    table(&rows);
    println!("  load average at the end: {}", loadavg());
    println!("  (no process left behind)");
}

/// Streaming figures.
struct Streaming {
    /// Handler's first write to its chunk's arrival, one per task; empty without bash.
    first_chunk: Vec<Duration>,
    events_per_s: f64,
    bytes_per_s: f64,
}

/// Measures and prints how fast a chunk reaches an SSE reader, and how much a chatty handler
/// streams per second.
fn report_streaming(home: &Home) -> Streaming {
    println!("streaming (message/stream, one connection a task)");
    let mut first_chunk = vec![];
    if Path::new("/bin/bash").exists() {
        let stamp = "#!/bin/bash\ncat >/dev/null\nprintf '%s\\n' \"$EPOCHREALTIME\"\nsleep 0.01\n";
        let dir = home.capsule("stamp", &["./handler.sh"], Some(stamp));
        let session = Session::start(home, &[dir.as_os_str()]);
        for run in 0..STREAM_RUNS + HANDLER_WARMUP {
            let mut took = None;
            stream_events(&session.url, |event| {
                if took.is_none()
                    && let Some(at) = first_text(event).and_then(|t| t.trim().parse::<f64>().ok())
                {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap_or_default()
                        .as_secs_f64();
                    took = Some(Duration::from_secs_f64((now - at).max(0.0)));
                }
            });
            match took {
                Some(took) if run >= HANDLER_WARMUP => first_chunk.push(took),
                Some(_) => {}
                None => fail("no chunk came"),
            }
        }
        println!(
            "  first write to first chunk  {}",
            STYLE.spread(&first_chunk)
        );
    } else {
        println!("  first write to first chunk  not measured: no /bin/bash for $EPOCHREALTIME");
    }
    let chatty = "#!/bin/sh\ncat >/dev/null\nyes 'a line of chatter, 22 b' | head -n 200000\n";
    let dir = home.capsule("chatty", &["./handler.sh"], Some(chatty));
    let session = Session::start(home, &[dir.as_os_str()]);
    let (mut events, mut bytes, mut settled) = (0u64, 0u64, false);
    let started = Instant::now();
    stream_events(&session.url, |event| {
        events += 1;
        bytes += first_text(event).map_or(0, |t| t.len() as u64);
        settled |= event["result"]["final"] == true;
    });
    let took = started.elapsed().as_secs_f64();
    let ended = if settled {
        "to the final status"
    } else {
        "cut before its final status: the reader fell 1 MiB behind"
    };
    let (events_per_s, bytes_per_s) = (events as f64 / took, bytes as f64 / took);
    println!(
        "  chatty handler (4 MiB of lines, the answer's bound): {events} events, {:.1} MB of \
         answer in {:.0} ms, {ended}: {events_per_s:.0} events/s, {:.1} MB/s",
        bytes as f64 / 1e6,
        took * 1000.0,
        bytes_per_s / 1e6
    );
    println!();
    Streaming {
        first_chunk,
        events_per_s,
        bytes_per_s,
    }
}

/// Peak RSS of an echo session after 200 requests of 1 MiB each; printed, and returned in KiB.
fn report_large_requests(home: &Home) -> u64 {
    let session = Session::start(home, &[]);
    let zeros = vec!["0"; 500_000].join(",");
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"message/send","params":{{"message":{{"kind":"message","messageId":"m","role":"user","parts":[{{"kind":"text","text":"x"}}],"metadata":{{"zeros":[{zeros}]}}}}}}}}"#
    );
    let request = format!(
        "POST / HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        session.url,
        body.len()
    );
    let mut conn = Conn::open(&session.url);
    let started = Instant::now();
    for _ in 0..200 {
        if !contains(conn.call(request.as_bytes()), br#""state":"completed""#) {
            fail("a large request did not complete");
        }
    }
    let status = ProcStatus::of(session.pid);
    println!(
        "memory bound: 200 requests of {} bytes (half a million JSON values each) in {:.1} s",
        body.len(),
        started.elapsed().as_secs_f64()
    );
    println!("  the session after them: {}", status.describe());
    println!();
    status.hwm_kib
}

/// Send one `message/stream` to the door at `url`, giving each event's `data` to
/// `on_event` until the stream ends.
fn stream_events(url: &str, mut on_event: impl FnMut(&serde_json::Value)) {
    let body = rpc_request(url, "message/stream");
    let mut stream =
        TcpStream::connect(url).unwrap_or_else(|err| fail(&format!("connect {url}: {err}")));
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    stream
        .write_all(&body)
        .unwrap_or_else(|err| fail(&format!("write: {err}")));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    let mut past_head = false;
    loop {
        if !past_head && let Some(at) = find(&buf, b"\r\n\r\n") {
            buf.drain(..at + 4);
            past_head = true;
        }
        while past_head && let Some(at) = find(&buf, b"\n\n") {
            let event: Vec<u8> = buf.drain(..at + 2).collect();
            if let Some(data) = event.strip_prefix(b"data: ") {
                let value = serde_json::from_slice(&data[..data.len() - 2])
                    .unwrap_or_else(|_| fail("an event is not JSON"));
                on_event(&value);
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(err) => fail(&format!("read: {err}")),
        }
    }
}

/// The text of an artifact update's first part.
fn first_text(event: &serde_json::Value) -> Option<&str> {
    let result = &event["result"];
    (result["kind"] == "artifact-update")
        .then(|| result["artifact"]["parts"][0]["text"].as_str())
        .flatten()
}

/// Prints the streaming and memory figures beside what is expected of them.
fn print_streaming_summary(streaming: &Streaming, large_hwm: u64) {
    let first = if streaming.first_chunk.is_empty() {
        "not measured".to_string()
    } else {
        STYLE.ms(median(&streaming.first_chunk))
    };
    table(&[
        ["figure".to_string(), "measured".into(), "expected".into()],
        [
            "first write to first SSE chunk (median)".into(),
            first,
            "<= 2 ms".into(),
        ],
        [
            "SSE events/s, chatty handler".into(),
            format!(
                "{:.0}/s ({:.1} MB/s)",
                streaming.events_per_s,
                streaming.bytes_per_s / 1e6
            ),
            "-".into(),
        ],
        [
            "peak RSS after 200 x 1 MiB requests".into(),
            format!("{:.1} MiB", large_hwm as f64 / 1024.0),
            "< 200 MiB".into(),
        ],
    ]);
}

/// Spawn `mur run --json` [`READY_RUNS`] times; the times to the readiness line, and from
/// SIGTERM to the reaped exit.
fn readiness(home: &Home) -> (Vec<Duration>, Vec<Duration>) {
    let mut ready = vec![];
    let mut stops = vec![];
    for run in 0..READY_WARMUP + READY_RUNS {
        let (session, took) = Session::spawn(home, &[], home.root());
        let stop = session.stop();
        if run >= READY_WARMUP {
            ready.push(took);
            stops.push(stop);
        }
    }
    (ready, stops)
}

/// Blocking `message/send` round trips on one keep-alive connection, each beside one direct
/// spawn of `argv` with the same stdin: (via mur, direct).
fn handler_overhead(
    session: &Session,
    argv: &[PathBuf],
    workdir: &Path,
) -> (Vec<Duration>, Vec<Duration>) {
    let mut conn = Conn::open(&session.url);
    let send = message_send(&session.url);
    let answer = format!("\"{TEXT}\"");
    let mut through = vec![];
    let mut direct = vec![];
    for run in 0..HANDLER_WARMUP + HANDLER_RUNS {
        let start = Instant::now();
        let body = conn.call(&send);
        let t = start.elapsed();
        if !contains(body, br#""state":"completed""#) || !contains(body, answer.as_bytes()) {
            fail(&format!(
                "the handler task did not complete with its text: {}",
                String::from_utf8_lossy(body)
            ));
        }
        let start = Instant::now();
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(workdir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| fail(&format!("{}: {err}", argv[0].display())));
        let mut stdin = child.stdin.take().unwrap_or_else(|| fail("no stdin"));
        stdin
            .write_all(TEXT.as_bytes())
            .unwrap_or_else(|err| fail(&format!("handler stdin: {err}")));
        drop(stdin);
        let out = child
            .wait_with_output()
            .unwrap_or_else(|err| fail(&format!("handler: {err}")));
        let d = start.elapsed();
        if out.stdout != TEXT.as_bytes() || !out.status.success() {
            fail(&format!("the direct handler answered {:?}", out));
        }
        if run >= HANDLER_WARMUP {
            through.push(t);
            direct.push(d);
        }
    }
    (through, direct)
}

struct Throughput {
    rate: f64,
    requests: usize,
    median: Duration,
    p99: Duration,
}

impl Throughput {
    fn describe(&self) -> String {
        format!(
            "{:>7.0} req/s  ({} requests; latency median {}, p99 {})",
            self.rate,
            self.requests,
            STYLE.ms(self.median),
            STYLE.ms(self.p99)
        )
    }
}

/// `threads` clients, each on its own keep-alive connection, sending `request` back to back:
/// [`WARMUP`] unmeasured, then [`MEASURE`] counted. Every answer must pass `ok`.
fn throughput(
    url: &str,
    request: &[u8],
    threads: usize,
    ok: &(dyn Fn(&[u8]) -> bool + Sync),
) -> Throughput {
    let barrier = Barrier::new(threads);
    let results: Vec<(usize, Duration, Vec<Duration>)> = thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut conn = Conn::open(url);
                    let check = |conn: &mut Conn| {
                        let body = conn.call(request);
                        if !ok(body) {
                            fail(&format!(
                                "unexpected answer: {}",
                                String::from_utf8_lossy(body)
                            ));
                        }
                    };
                    let warm = Instant::now();
                    while warm.elapsed() < WARMUP {
                        check(&mut conn);
                    }
                    barrier.wait();
                    let mut latencies = Vec::with_capacity(200_000);
                    let start = Instant::now();
                    loop {
                        let began = Instant::now();
                        check(&mut conn);
                        let now = Instant::now();
                        latencies.push(now - began);
                        if now - start >= MEASURE {
                            break (latencies.len(), now - start, latencies);
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| fail("a client thread failed")))
            .collect()
    });
    let requests: usize = results.iter().map(|r| r.0).sum();
    let elapsed = results.iter().map(|r| r.1).max().unwrap_or(MEASURE);
    let latencies: Vec<Duration> = results.into_iter().flat_map(|r| r.2).collect();
    Throughput {
        rate: requests as f64 / elapsed.as_secs_f64(),
        requests,
        median: median(&latencies),
        p99: percentile(&latencies, 99),
    }
}

/// The whole HTTP request of one blocking `message/send` carrying [`TEXT`].
fn message_send(url: &str) -> Vec<u8> {
    rpc_request(url, "message/send")
}

/// A `method` request (`message/send` or `message/stream`) carrying [`TEXT`].
fn rpc_request(url: &str, method: &str) -> Vec<u8> {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": method,
        "params": {"message": {"kind": "message", "role": "user", "messageId": "bench",
            "parts": [{"kind": "text", "text": TEXT}]}},
    })
    .to_string();
    format!(
        "POST / HTTP/1.1\r\nHost: {url}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One keep-alive HTTP/1.1 connection: write a request, read exactly one response.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Bytes at the front of `buf` that belong to the last response.
    used: usize,
}

impl Conn {
    fn open(url: &str) -> Self {
        let stream =
            TcpStream::connect(url).unwrap_or_else(|err| fail(&format!("connect {url}: {err}")));
        let _ = stream.set_nodelay(true);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        Self {
            stream,
            buf: Vec::with_capacity(16 * 1024),
            used: 0,
        }
    }

    /// Send `request`; the body of its `200` response.
    fn call(&mut self, request: &[u8]) -> &[u8] {
        self.buf.drain(..self.used);
        self.used = 0;
        self.stream
            .write_all(request)
            .unwrap_or_else(|err| fail(&format!("write: {err}")));
        let head = loop {
            if let Some(at) = find(&self.buf, b"\r\n\r\n") {
                break at + 4;
            }
            self.fill();
        };
        let text = String::from_utf8_lossy(&self.buf[..head]).into_owned();
        if !text.starts_with("HTTP/1.1 200 ") {
            fail(&format!("the door answered {text:?}"));
        }
        let length = text
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().ok())?
            })
            .unwrap_or_else(|| fail(&format!("no Content-Length in {text:?}")));
        while self.buf.len() < head + length {
            self.fill();
        }
        self.used = head + length;
        &self.buf[head..head + length]
    }

    fn fill(&mut self) {
        let mut chunk = [0u8; 16 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => fail("the door closed the connection"),
            Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            Err(err) => fail(&format!("read: {err}")),
        }
    }
}

/// One running `mur run --json`; SIGTERMed and reaped when dropped.
struct Session {
    child: Option<Child>,
    /// Kept open so the session never writes to a closed pipe.
    _stdout: BufReader<ChildStdout>,
    pid: u32,
    url: String,
    session_id: String,
}

impl Session {
    /// `mur run ARGS --json` with `HOME` and the working directory the bench's home.
    fn start(home: &Home, args: &[&OsStr]) -> Self {
        Self::spawn(home, args, home.root()).0
    }

    /// The same, with `--workdir workdir`.
    fn start_in(home: &Home, args: &[&OsStr], workdir: &Path) -> Self {
        let mut all = args.to_vec();
        all.push(OsStr::new("--workdir"));
        all.push(workdir.as_os_str());
        Self::spawn(home, &all, home.root()).0
    }

    /// Spawn it and read its readiness line: the session, and the time from just before the
    /// spawn to the line.
    fn spawn(home: &Home, args: &[&OsStr], cwd: &Path) -> (Self, Duration) {
        let start = Instant::now();
        let (mut child, mut stdout) = common::spawn_mur(
            Command::new(MUR).arg("run").args(args).arg("--json"),
            home.root(),
            cwd,
        );
        let pid = child.id();
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        let took = start.elapsed();
        let ready: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|_| {
            let mut err = String::new();
            if let Some(mut stderr) = child.stderr.take() {
                let _ = stderr.read_to_string(&mut err);
            }
            fail(&format!("mur run printed {line:?}, stderr: {err}"))
        });
        let field = |key: &str| {
            ready[key]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| fail(&format!("readiness line without {key}: {line}")))
        };
        if ready["pid"].as_u64() != Some(u64::from(pid)) {
            fail(&format!("readiness line names another pid: {line}"));
        }
        let session = Self {
            url: field("url"),
            session_id: field("session_id"),
            child: Some(child),
            _stdout: stdout,
            pid,
        };
        (session, took)
    }

    /// SIGTERM, then wait for the exit (SIGKILL after 10 s); the time that took.
    fn stop(mut self) -> Duration {
        self.end()
    }

    fn end(&mut self) -> Duration {
        let Some(mut child) = self.child.take() else {
            return Duration::ZERO;
        };
        let start = Instant::now();
        signal(self.pid, libc::SIGTERM);
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    let took = start.elapsed();
                    if status.code() != Some(143) {
                        eprintln!("run bench: session {} ended {status}", self.pid);
                    }
                    common::unregister(self.pid);
                    return took;
                }
                Ok(None) if start.elapsed() > Duration::from_secs(10) => {
                    signal(self.pid, libc::SIGKILL);
                    let _ = child.wait();
                    fail(&format!("session {} ignored SIGTERM for 10 s", self.pid));
                }
                Ok(None) => thread::sleep(Duration::from_micros(200)),
                Err(err) => fail(&format!("wait: {err}")),
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.end();
    }
}

/// What `/proc/<pid>/status` says about memory and threads.
struct ProcStatus {
    rss_kib: u64,
    hwm_kib: u64,
    threads: u64,
}

impl ProcStatus {
    fn of(pid: u32) -> Self {
        let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_else(|err| fail(&format!("/proc/{pid}/status: {err}")));
        let field = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        Self {
            rss_kib: field("VmRSS:"),
            hwm_kib: field("VmHWM:"),
            threads: field("Threads:"),
        }
    }

    fn describe(&self) -> String {
        format!(
            "VmRSS {} KiB ({:.2} MiB), VmHWM {} KiB, {} threads",
            self.rss_kib,
            self.rss_kib as f64 / 1024.0,
            self.hwm_kib,
            self.threads
        )
    }
}

impl Home {
    /// A capsule directory `name` whose handler is `run`; `script` is written as `handler.sh`.
    fn capsule(&self, name: &str, run: &[&str], script: Option<&str>) -> PathBuf {
        let dir = self.root().join(name);
        mkdir(&dir);
        let manifest = serde_json::json!({"name": name, "version": "1.0.0", "run": run});
        write(&dir.join("murmur.json"), manifest.to_string().as_bytes());
        if let Some(script) = script {
            let path = dir.join("handler.sh");
            write(&path, script.as_bytes());
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .unwrap_or_else(|err| fail(&format!("{}: {err}", path.display())));
        }
        dir
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find(haystack, needle).is_some()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
