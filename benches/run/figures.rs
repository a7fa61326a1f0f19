//! The `figures` section: the figures of issue 30 ("The core, event-driven"), each measured side
//! by side in one run and printed with its ratio and the goal the issue sets — never a pass or
//! a fail (the lead keeps the runs in docs/benchmarks.md):
//!
//! - door: the measured binary (the installed one), nginx (nginx-light: one worker, a fixed
//!   `200`) and the thread-per-connection door of commit bd1cd4f, one after the other in each of
//!   [`ROUNDS`] rounds: A2A 1.0 `SendMessage`s and agent-card GETs per second over
//!   [`CONNECTIONS`] keep-alive connections (medians of the rounds; nginx answers both with its
//!   fixed `200`), and the ratios;
//! - syscalls: `strace -f -c` attached to a session over [`STRACED`] `SendMessage`s on
//!   [`CONNECTIONS`] connections opened before: system calls per answered request, in all and
//!   for each call;
//! - clients: 1,000 keep-alive clients sending `SendMessage`s, beside nginx under the same 1,000;
//!   the session's peak RSS;
//! - blocked: 1,000 clients, each with a blocking `SendMessage` whose task is queued behind a
//!   slow handler (`sleep`, one task at a time): the session's door threads, all its threads,
//!   and its RSS once they are all waiting;
//! - slowloris: [`SLOWLORIS`] connections each holding half a request head: the door threads
//!   and RSS, and how long a new client's `SendMessage` takes to be answered meanwhile.
//!
//! Without nginx (`apt install nginx-light`) or strace, what needs them is skipped, loudly. The
//! bd1cd4f binary is `MUR_CORE_BENCH_BEFORE=/path/to/mur`, else built once by that commit's own
//! install.sh from `git archive bd1cd4f` into `<target dir>/bd1cd4f/` (minutes, the first time);
//! if that fails, its column is skipped, loudly.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::common::{self, fail, mkdir, mur, signal, write};
use super::{
    Answer, CLIENTS, Conn, Home, ProcStatus, Session, echoed_v1, median, median_f64,
    send_message_v1, throughput,
};

/// Rounds of the door figures, each measuring every contestant once.
const ROUNDS: usize = 3;
/// Connections of the door and syscall figures (`wrk -c8` in the issue).
const CONNECTIONS: usize = 8;
/// `SendMessage`s answered under strace.
const STRACED: usize = 20_000;
/// Connections holding half a head.
const SLOWLORIS: usize = 10_000;
/// How long the slowloris connections may take to open, in all (a door that stops accepting
/// makes each connect wait).
const SLOWLORIS_OPENING: Duration = Duration::from_secs(60);
/// New clients timed while the slowloris connections are held.
const OPERATOR_TRIES: usize = 20;
/// How long the slow handler's first task runs: longer than the section.
const SLOW_HANDLER: &str = "#!/bin/sh\nsleep 120\n";
/// How long the waiting clients are given to arrive before the session is looked at.
const SETTLE: Duration = Duration::from_secs(3);

/// Runs the section.
pub(super) fn report(home: &Home) {
    // 10,000 sockets here, and as many in the session, which inherits the limit.
    let want = (SLOWLORIS + CLIENTS + 256) as u64;
    let limit = mur::sys::socket::open_files_limit(want);
    if limit < want {
        fail(&format!(
            "the core section needs {want} descriptors; the hard limit is {limit}"
        ));
    }
    println!("issue 30's figures, side by side (goals in brackets):");
    let nginx = Nginx::start(home);
    let before = before_binary();
    door(home, nginx.as_ref(), before.as_deref());
    syscalls(home);
    clients(home, nginx.as_ref());
    blocked(home);
    slowloris(home);
    println!();
}

/// Loudly, that `what` is not measured, and why.
fn skipped(what: &str, why: &str) {
    println!("  *** SKIPPED {what}: {why} ***");
    eprintln!("run bench: *** SKIPPED {what}: {why} ***");
}

/// `a / b` as a ratio, or `-` without `b`.
fn ratio(a: f64, b: Option<f64>) -> String {
    b.filter(|b| *b > 0.0)
        .map_or_else(|| "-".to_string(), |b| format!("{:.2}x", a / b))
}

/// The door figures: rates of each contestant over [`ROUNDS`] rounds, then their medians and
/// ratios.
fn door(home: &Home, nginx: Option<&Nginx>, before: Option<&Path>) {
    let mut binaries = vec![("installed", mur().to_path_buf())];
    if let Some(before) = before {
        binaries.push(("bd1cd4f", before.to_path_buf()));
    }
    let mut send = vec![Vec::new(); binaries.len() + 1];
    let mut card = vec![Vec::new(); binaries.len() + 1];
    for round in 1..=ROUNDS {
        for (i, (label, binary)) in binaries.iter().enumerate() {
            let session = Session::spawn(home, binary, &[], home.root()).0;
            let request = send_message_v1(&session.url);
            let get = card_get(&session.url);
            let id = session.session_id.clone();
            let card_ok = move |body: &[u8]| super::contains(body, id.as_bytes());
            send[i].push(throughput(&session.url, &request, CONNECTIONS, &echoed_v1).rate);
            card[i].push(throughput(&session.url, &get, CONNECTIONS, &card_ok).rate);
            println!(
                "  round {round} {label:<9} SendMessage {:>8.0}/s  card {:>8.0}/s",
                send[i][round - 1],
                card[i][round - 1]
            );
        }
        if let Some(nginx) = nginx {
            let n = binaries.len();
            send[n].push(
                throughput(
                    &nginx.url,
                    &send_message_v1(&nginx.url),
                    CONNECTIONS,
                    &fixed,
                )
                .rate,
            );
            card[n].push(throughput(&nginx.url, &card_get(&nginx.url), CONNECTIONS, &fixed).rate);
            println!(
                "  round {round} nginx     POST        {:>8.0}/s  GET  {:>8.0}/s",
                send[n][round - 1],
                card[n][round - 1]
            );
        }
    }
    let medians = |rates: &[Vec<f64>]| -> Vec<Option<f64>> {
        rates
            .iter()
            .map(|r| (!r.is_empty()).then(|| median_f64(r)))
            .collect()
    };
    let (send, card) = (medians(&send), medians(&card));
    let (ours, n) = (send[0].unwrap_or(0.0), binaries.len());
    let before_send = before.and(send[1]);
    println!(
        "  SendMessage, {CONNECTIONS} connections: {ours:.0}/s; {} nginx [>= 0.8x]; {} bd1cd4f [>= 1.2x]",
        ratio(ours, send[n]),
        ratio(ours, before_send)
    );
    let ours = card[0].unwrap_or(0.0);
    println!(
        "  agent card GET, {CONNECTIONS} connections: {ours:.0}/s; {} nginx [>= 0.8x]",
        ratio(ours, card[n])
    );
}

/// Whether `body` is nginx's fixed answer.
fn fixed(body: &[u8]) -> bool {
    body == b"ok\n"
}

/// The whole request of one agent-card GET.
fn card_get(url: &str) -> Vec<u8> {
    format!("GET /.well-known/agent-card.json HTTP/1.1\r\nHost: {url}\r\n\r\n").into_bytes()
}

/// System calls per answered `SendMessage`, counted by `strace -f -c` attached to a session.
fn syscalls(home: &Home) {
    if Command::new("strace").arg("-V").output().is_err() {
        return skipped(
            "syscalls per request",
            "no strace here (apt install strace)",
        );
    }
    let session = Session::start(home, &[]);
    let request = send_message_v1(&session.url);
    let mut conns: Vec<Conn> = (0..CONNECTIONS).map(|_| Conn::open(&session.url)).collect();
    for conn in &mut conns {
        check(conn.call(&request));
    }
    let out = home.root().join("strace.txt");
    let mut strace = Command::new("strace")
        .args(["-f", "-c", "-U", "calls,name", "-o"])
        .arg(&out)
        .args(["-p", &session.pid.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| fail(&format!("strace: {err}")));
    common::register(strace.id());
    // strace says so on stderr for each thread it attaches to; the first line is enough, as
    // it attaches to them all before it goes on.
    let mut stderr = BufReader::new(strace.stderr.take().expect("piped"));
    let mut line = String::new();
    let _ = stderr.read_line(&mut line);
    thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    thread::sleep(Duration::from_millis(500));
    thread::scope(|scope| {
        for conn in &mut conns {
            let request = &request;
            scope.spawn(move || {
                for _ in 0..STRACED / CONNECTIONS {
                    check(conn.call(request));
                }
            });
        }
    });
    signal(strace.id(), libc::SIGINT);
    let _ = strace.wait();
    common::unregister(strace.id());
    let text = std::fs::read_to_string(&out)
        .unwrap_or_else(|err| fail(&format!("{}: {err}", out.display())));
    print_syscalls(&text, (STRACED / CONNECTIONS * CONNECTIONS) as f64);
}

/// The body of a `SendMessage` answer, checked.
fn check(body: &[u8]) {
    if !echoed_v1(body) {
        fail(&format!(
            "unexpected answer: {}",
            String::from_utf8_lossy(body)
        ));
    }
}

/// strace's `calls name` summary, per request.
fn print_syscalls(summary: &str, requests: f64) {
    let rows: Vec<(f64, &str)> = summary
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let calls = words.next()?.parse::<f64>().ok()?;
            Some((calls / requests, words.next()?))
        })
        .collect();
    let total = rows
        .iter()
        .find(|(_, name)| *name == "total")
        .map_or(0.0, |r| r.0);
    let each: Vec<String> = rows
        .iter()
        .filter(|(per, name)| *name != "total" && *per >= 0.01)
        .map(|(per, name)| format!("{name} {per:.2}"))
        .collect();
    println!(
        "  syscalls per answered SendMessage ({requests:.0} on {CONNECTIONS} connections): {total:.2} [<= 3.2]: {}",
        each.join(", ")
    );
}

/// [`CLIENTS`] keep-alive clients sending `SendMessage`s, beside nginx; the peak RSS.
fn clients(home: &Home, nginx: Option<&Nginx>) {
    let session = Session::start(home, &[]);
    let ours = throughput(
        &session.url,
        &send_message_v1(&session.url),
        CLIENTS,
        &echoed_v1,
    );
    let status = ProcStatus::of(session.pid);
    drop(session);
    let theirs = nginx.map(|n| throughput(&n.url, &send_message_v1(&n.url), CLIENTS, &fixed).rate);
    println!(
        "  {CLIENTS} keep-alive clients: {:.0}/s, {} nginx [>= 0.8x] ({}/s); peak RSS {:.1} MiB [<= 16 MiB]",
        ours.rate,
        ratio(ours.rate, theirs),
        theirs.map_or_else(|| "-".to_string(), |t| format!("{t:.0}")),
        status.hwm_kib as f64 / 1024.0
    );
}

/// The session's threads by name: those of the door (named `door…`), and all.
fn threads(pid: u32) -> (usize, usize) {
    let names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .collect()
        })
        .unwrap_or_default();
    let door = names.iter().filter(|n| n.starts_with("door")).count();
    (door, names.len())
}

/// [`CLIENTS`] blocking `SendMessage`s, each queued behind a slow handler's one running task.
fn blocked(home: &Home) {
    let lifecycle = serde_json::json!({"concurrency": 1, "queue_depth": CLIENTS * 2});
    let slow = home.capsule_with(
        "slow",
        &["./handler.sh"],
        Some(SLOW_HANDLER),
        Some(lifecycle),
    );
    let session = Session::start(home, &[slow.as_os_str()]);
    let request = send_message_v1(&session.url);
    let waiting: Vec<TcpStream> = (0..CLIENTS)
        .filter_map(|_| {
            let mut stream = TcpStream::connect(&session.url).ok()?;
            stream.write_all(&request).ok()?;
            Some(stream)
        })
        .collect();
    thread::sleep(SETTLE);
    let (door, all) = threads(session.pid);
    let status = ProcStatus::of(session.pid);
    println!(
        "  {} clients blocked on queued tasks: {door} door threads [<= 8] of {all}; RSS {:.1} MiB [<= 64 MiB]",
        waiting.len(),
        status.rss_kib as f64 / 1024.0
    );
    drop(waiting);
}

/// [`SLOWLORIS`] half heads held open; then new clients' `SendMessage`s timed.
fn slowloris(home: &Home) {
    let session = Session::start(home, &[]);
    let addr: SocketAddr = session
        .url
        .parse()
        .unwrap_or_else(|_| fail("the door's address"));
    let started = Instant::now();
    let mut held = Vec::with_capacity(SLOWLORIS);
    while held.len() < SLOWLORIS && started.elapsed() < SLOWLORIS_OPENING {
        let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
            continue;
        };
        if stream.write_all(b"POST / HTTP/1.1\r\nHost: x\r\n").is_ok() {
            held.push(stream);
        }
    }
    let opened = started.elapsed();
    thread::sleep(SETTLE);
    let (door, all) = threads(session.pid);
    let status = ProcStatus::of(session.pid);
    let request = send_message_v1(&session.url);
    let (mut times, mut refused) = (Vec::new(), 0);
    for _ in 0..OPERATOR_TRIES {
        let began = Instant::now();
        let mut conn = Conn::open(&session.url);
        match conn.exchange(&request) {
            Answer::Ok(body) => {
                check(body);
                times.push(began.elapsed());
            }
            Answer::Refused | Answer::Busy => refused += 1,
        }
    }
    let slowest = times.iter().max().copied().unwrap_or_default();
    println!(
        "  {} slowloris connections (opened in {:.1} s): {door} door threads [<= 8] of {all}, RSS {:.1} MiB; a new client answered in {:.2} ms median, {:.2} ms at worst [<= 10 ms], {refused} of {OPERATOR_TRIES} refused",
        held.len(),
        opened.as_secs_f64(),
        status.rss_kib as f64 / 1024.0,
        median(&times).as_secs_f64() * 1e3,
        slowest.as_secs_f64() * 1e3
    );
}

/// nginx serving a fixed `200` with one worker, on a port of its own; stopped when dropped.
struct Nginx {
    child: Child,
    url: String,
}

impl Nginx {
    /// Start it, or say loudly why not.
    fn start(home: &Home) -> Option<Self> {
        let Some(bin) = ["/usr/sbin/nginx", "/usr/bin/nginx"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.exists())
        else {
            skipped(
                "the nginx figures",
                "no nginx here (apt install nginx-light)",
            );
            return None;
        };
        let dir = home.root().join("nginx");
        mkdir(&dir);
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap_or_else(|err| fail(&format!("a free port: {err}")))
            .port();
        write(&dir.join("nginx.conf"), nginx_conf(&dir, port).as_bytes());
        let child = Command::new(bin)
            .arg("-p")
            .arg(&dir)
            .args(["-c", "nginx.conf", "-e", "error.log"])
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|err| fail(&format!("{}: {err}", bin.display())));
        common::register(child.id());
        let nginx = Self {
            child,
            url: format!("127.0.0.1:{port}"),
        };
        let started = Instant::now();
        while TcpStream::connect(&nginx.url).is_err() {
            if started.elapsed() > Duration::from_secs(10) {
                fail("nginx did not listen within 10 s (see its error.log)");
            }
            thread::sleep(Duration::from_millis(20));
        }
        println!("  nginx: {} (one worker, a fixed 200)", bin.display());
        Some(nginx)
    }
}

/// One worker answering every request with `200 ok`, keep-alive without limit; everything it
/// writes under `dir`. Started as root, its worker stays root rather than nginx's default
/// `nobody`: a process of that user would count against the test suite's `RLIMIT_NPROC` checks
/// (tests/it/hardening.rs), were the two run at once.
fn nginx_conf(dir: &Path, port: u16) -> String {
    let dir = dir.display();
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    let user = if unsafe { libc::geteuid() } == 0 {
        "user root root;\n"
    } else {
        ""
    };
    format!(
        "{user}worker_processes 1;\ndaemon off;\npid {dir}/nginx.pid;\nerror_log {dir}/error.log;\n\
         worker_rlimit_nofile 65536;\nevents {{ worker_connections 16384; }}\n\
         http {{\n  access_log off;\n  keepalive_requests 100000000;\n  keepalive_timeout 300s;\n\
         \x20 client_body_temp_path {dir}/body;\n  proxy_temp_path {dir}/proxy;\n\
         \x20 fastcgi_temp_path {dir}/fastcgi;\n  uwsgi_temp_path {dir}/uwsgi;\n\
         \x20 scgi_temp_path {dir}/scgi;\n\
         \x20 server {{ listen 127.0.0.1:{port}; location / {{ return 200 \"ok\\n\"; }} }}\n}}\n"
    )
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: nginx's fast shutdown.
        signal(self.child.id(), libc::SIGTERM);
        let _ = self.child.wait();
        common::unregister(self.child.id());
    }
}

/// The thread-per-connection door of bd1cd4f: `MUR_CORE_BENCH_BEFORE`, else built once by that
/// commit's install.sh ([`common::built_at`]); `None`, said loudly, if it cannot be had.
fn before_binary() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("MUR_CORE_BENCH_BEFORE") {
        return Some(PathBuf::from(bin));
    }
    common::built_at("bd1cd4f")
        .map_err(|why| skipped("the bd1cd4f figures", &why))
        .ok()
}
