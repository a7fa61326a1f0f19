//! The `store` section (issue 34): what a named session's task store costs — `message/send`
//! per second at 8 connections against a session with the store (`--name`) and one without,
//! interleaved round by round so both see the same machine at the same moments, and each
//! session's CPU time per request (which the machine's load moves far less); first on the
//! embedded echo capsule (the store's worst case), then on a `/bin/cat` capsule (a handler
//! process per task, as every capsule a user writes) — and how soon a session started again
//! under its name, with 1,000 tasks stored, answers (its readiness line, beside an unnamed
//! session's).

use std::ffi::OsStr;
use std::time::Duration;

use super::{Home, STYLE, Session, echoed, median, median_f64, message_send, mur, throughput};

/// Rounds of the two sessions, each measured once a round.
const ROUNDS: usize = 3;
/// Connections, each sending back to back.
const CONNECTIONS: usize = 8;
/// Restarts timed, each way.
const RESTARTS: usize = 7;

/// Measures and prints the store's cost: on the embedded echo capsule, which answers in the
/// door worker itself (the store's worst case: its few microseconds against a task that costs
/// almost nothing), then on a `/bin/cat` capsule, whose task is a handler process like every
/// capsule a user writes.
pub(super) fn report_store(home: &Home) {
    let name = [OsStr::new("--name"), OsStr::new("bench-store")];
    share(home, "echo session", &[], &name);
    let cat = home.capsule("store-cat", &["/bin/cat"], None);
    let cat_name = [
        cat.as_os_str(),
        OsStr::new("--name"),
        OsStr::new("bench-store-cat"),
    ];
    share(home, "/bin/cat session", &[cat.as_os_str()], &cat_name);

    // The store now holds its bound, the newest 1,000 tasks (thousands were sent).
    let ready = |args: &[&OsStr]| -> Duration {
        let times: Vec<Duration> = (0..RESTARTS)
            .map(|_| Session::spawn(home, mur(), args, home.root()).1)
            .collect();
        median(&times)
    };
    let (unnamed, named) = (ready(&[]), ready(&name));
    println!(
        "  ready again with 1,000 stored tasks: {} (median of {RESTARTS}; unnamed, no store: {})",
        STYLE.ms(named),
        STYLE.ms(unnamed)
    );
    println!();
}

/// `message/send` at [`CONNECTIONS`] connections against a `kind` started with `named` (its
/// tasks journaled) and one started with `unnamed`, interleaved round by round, and each
/// session's CPU time a request.
fn share(home: &Home, kind: &str, unnamed: &[&OsStr], named: &[&OsStr]) {
    let on = Session::start(home, named);
    let off = Session::start(home, unnamed);
    println!(
        "the task store: message/send at {CONNECTIONS} connections, {kind} {} with the store \
         (--name) and {} without, interleaved, {ROUNDS} rounds",
        on.session_id, off.session_id
    );
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let (mut cpu_with, mut cpu_without) = (Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        let (a, a_cpu) = measured(&off);
        let (b, b_cpu) = measured(&on);
        println!(
            "  round {round}: without {}, {a_cpu:.1} µs CPU a request",
            a.describe()
        );
        println!(
            "           with    {}, {b_cpu:.1} µs CPU a request",
            b.describe()
        );
        without.push(a.rate);
        with.push(b.rate);
        cpu_without.push(a_cpu);
        cpu_with.push(b_cpu);
    }
    let ratio = median_f64(&with) / median_f64(&without);
    println!(
        "  median: {:.0} req/s with the store, {:.0} without: {:.1}% of the throughput",
        median_f64(&with),
        median_f64(&without),
        100.0 * ratio
    );
    let (cpu_with, cpu_without) = (median_f64(&cpu_with), median_f64(&cpu_without));
    println!(
        "  median CPU a request: {cpu_with:.1} µs with the store, {cpu_without:.1} without: \
         the store costs {:+.1}%",
        100.0 * (cpu_with / cpu_without - 1.0)
    );
    drop((on, off));
}

/// One throughput round against `session`, and the session's CPU time (user and system, from
/// `/proc/PID/stat`) per request answered in it, in microseconds.
fn measured(session: &Session) -> (super::Throughput, f64) {
    let before = cpu_time(session.pid);
    let round = throughput(
        &session.url,
        &message_send(&session.url),
        CONNECTIONS,
        &echoed,
    );
    let spent = cpu_time(session.pid) - before;
    let per_request = spent * 1e6 / round.requests.max(1) as f64;
    (round, per_request)
}

/// The CPU time process `pid` has used, in seconds: fields 14 and 15 of `/proc/PID/stat`
/// (after the command's closing parenthesis, which may hold spaces), in clock ticks.
fn cpu_time(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_else(|err| super::fail(&format!("/proc/{pid}/stat: {err}")));
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<f64> = after
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0.0))
        .collect();
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    // utime and stime are the 14th and 15th fields: the 12th and 13th after the command.
    (fields.get(11).copied().unwrap_or(0.0) + fields.get(12).copied().unwrap_or(0.0)) / ticks
}
