//! The `store` section (issue 34): what a named session's task store costs — `message/send`
//! per second at 8 connections against an echo session with the store (`--name`) and one
//! without, interleaved round by round so both see the same machine at the same moments — and
//! how soon a session started again under its name, with 1,000 tasks stored, answers (its
//! readiness line, beside an unnamed session's).

use std::ffi::OsStr;
use std::time::Duration;

use super::{Home, STYLE, Session, echoed, median, median_f64, message_send, mur, throughput};

/// Rounds of the two sessions, each measured once a round.
const ROUNDS: usize = 3;
/// Connections, each sending back to back.
const CONNECTIONS: usize = 8;
/// Restarts timed, each way.
const RESTARTS: usize = 7;

/// Measures and prints the store's cost.
pub(super) fn report_store(home: &Home) {
    let name = [OsStr::new("--name"), OsStr::new("bench-store")];
    let on = Session::start(home, &name);
    let off = Session::start(home, &[]);
    println!(
        "the task store: message/send at {CONNECTIONS} connections, echo session {} with the \
         store (--name) and {} without, interleaved, {ROUNDS} rounds",
        on.session_id, off.session_id
    );
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        let a = throughput(&off.url, &message_send(&off.url), CONNECTIONS, &echoed);
        let b = throughput(&on.url, &message_send(&on.url), CONNECTIONS, &echoed);
        println!("  round {round}: without {}", a.describe());
        println!("           with    {}", b.describe());
        without.push(a.rate);
        with.push(b.rate);
    }
    let ratio = median_f64(&with) / median_f64(&without);
    println!(
        "  median: {:.0} req/s with the store, {:.0} without: {:.1}% of the throughput",
        median_f64(&with),
        median_f64(&without),
        100.0 * ratio
    );
    drop((on, off));

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
