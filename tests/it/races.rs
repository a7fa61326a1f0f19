//! Races (DESIGN.md §3, §4, §6): many sessions starting and stopping while `mur ps` and stray
//! `mur stop`s run all the time, and a record naming a pid the kernel has handed to another
//! process. What must hold:
//!
//! - no live session's record is ever pruned, and every `mur ps` that ran wholly inside a
//!   session's life lists it;
//! - no reader ever sees a partial record (`mur ps -v` names only records whose process is gone);
//! - nothing is signalled that the test did not mean to stop: bystander processes named by
//!   records with the wrong start time, live sessions named by such decoys, and the test process
//!   itself all stay alive, and their records are pruned without a signal.
//!
//! `MUR_PROVE_SCALE=N` multiplies the number of sessions (default 50).

use crate::common;

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{
    home::Home,
    http::dead_url,
    process::{Proc, start_token},
    records::{random_u64, record, session_id, write_record_atomically},
    session::Session,
    stress::scale,
};
use serde_json::Value;

/// The two tests here must not run at once: the pid-reuse test needs the kernel's next pid to
/// itself, and the stress test spawns processes as fast as it can.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What `mur ps -v` says on stderr about a record whose process is gone.
fn is_gone_reason(reason: &str) -> bool {
    reason.starts_with("no process holds pid ") || reason.contains("started at another time")
}

/// One session's life as the test saw it.
#[derive(Clone, Debug)]
struct Life {
    id: String,
    pid: u32,
    /// When its readiness line arrived (its record is written before that).
    ready_at: Instant,
    /// When the test began to stop it (`None`: not yet).
    stop_at: Option<Instant>,
}

/// One `mur ps --json -v`, as seen.
struct PsRun {
    started: Instant,
    ended: Instant,
    /// Listed sessions and their status.
    listed: HashMap<String, String>,
    /// Pruned files (their names) and the reason given.
    pruned: Vec<(String, String)>,
}

#[derive(Default)]
struct Shared {
    lives: Mutex<Vec<Life>>,
    /// Sessions stopped and exited: their ids are fair game for stray stops.
    dead: Mutex<Vec<String>>,
    /// Live sessions (id → pid) the decoy writer may name with a wrong start time.
    live: Mutex<HashMap<String, u32>>,
    /// Decoy record ids written so far.
    decoys: Mutex<Vec<String>>,
    ps_runs: Mutex<Vec<PsRun>>,
    violations: Mutex<Vec<String>>,
    done: AtomicBool,
    stray_stops: AtomicUsize,
    decoys_written: AtomicUsize,
}

impl Shared {
    fn violation(&self, what: String) {
        eprintln!("VIOLATION: {what}");
        self.violations.lock().unwrap().push(what);
    }
}

/// A start time that is not `real`'s (an earlier one when it can be).
fn wrong_start(real: &str, shift: u64) -> String {
    match real.parse::<u64>() {
        Ok(n) if n > shift => (n - shift).to_string(),
        Ok(n) => (n + shift).to_string(),
        Err(_) => format!("{real}0"),
    }
}

/// The decoy writer: until `shared.done`, a fresh record every few ms naming a bystander, a
/// live session or this very test process (`me`: its pid and start time), always with the
/// wrong start time; written staged and renamed, as mur writes, so it is never seen
/// half-written.
fn write_decoys(
    shared: &Shared,
    running: &Path,
    bystander_ids: &[(u32, String)],
    me: &(u32, String),
) {
    let mut n = 0u64;
    while !shared.done.load(Ordering::SeqCst) {
        n += 1;
        let (pid, start) = match n % 3 {
            0 => {
                let live = shared.live.lock().unwrap();
                let pick = (n as usize / 3) % live.len().max(1);
                match live.values().nth(pick).copied() {
                    Some(pid) => match start_token(pid) {
                        Some(start) => (pid, start),
                        None => continue,
                    },
                    None => bystander_ids[0].clone(),
                }
            }
            1 => me.clone(),
            _ => bystander_ids[(n as usize / 3) % bystander_ids.len()].clone(),
        };
        let id = session_id();
        let url = dead_url();
        write_record_atomically(
            running,
            &record(&id, pid, &wrong_start(&start, 1 + n % 50), &url),
        );
        shared.decoys.lock().unwrap().push(id);
        shared.decoys_written.fetch_add(1, Ordering::Relaxed);
        thread::sleep(Duration::from_millis(15));
    }
}

/// A reader: `mur ps --json -v` in a loop until `shared.done`, every run recorded as seen.
fn read_ps_in_a_loop(shared: &Shared, home: &Home) {
    while !shared.done.load(Ordering::SeqCst) {
        let out = home.mur(&["ps", "--json", "-v"]);
        if out.code != Some(0) {
            shared.violation(format!("mur ps exited {:?}: {}", out.code, out.stderr));
            continue;
        }
        let doc: Value = match serde_json::from_str(out.stdout.trim_end()) {
            Ok(doc) => doc,
            Err(e) => {
                shared.violation(format!("mur ps --json is not JSON ({e}): {:?}", out.stdout));
                continue;
            }
        };
        let listed: HashMap<String, String> = doc["capsules"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|c| {
                        (
                            c["session_id"].as_str().unwrap_or("").to_string(),
                            c["status"].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let pruned = pruned_files(shared, &out.stderr);
        shared.ps_runs.lock().unwrap().push(PsRun {
            started: out.started,
            ended: out.ended,
            listed,
            pruned,
        });
    }
}

/// The files a `mur ps -v` says on `stderr` it pruned (their names) and the reasons given; any
/// other line, or a reason other than a gone process, is a violation.
fn pruned_files(shared: &Shared, stderr: &str) -> Vec<(String, String)> {
    let mut pruned = vec![];
    for line in stderr.lines() {
        let Some(rest) = line.strip_prefix("mur ps: pruned ") else {
            shared.violation(format!("unexpected mur ps stderr line: {line:?}"));
            continue;
        };
        let Some((path, reason)) = rest.split_once(": ") else {
            shared.violation(format!("unparseable prune line: {line:?}"));
            continue;
        };
        if !is_gone_reason(reason) {
            shared.violation(format!(
                "mur ps pruned a file for a reason other than a gone process \
                 (a partial or unreadable record?): {line:?}"
            ));
        }
        let name = path.rsplit('/').next().unwrap_or(path).to_string();
        pruned.push((name, reason.to_string()));
    }
    pruned
}

/// Stray stops (thread `t` of `stop_threads`): until `shared.done`, `mur stop` naming things
/// that are not live test sessions, which must each be refused.
fn stop_strays(shared: &Shared, home: &Home, t: usize, stop_threads: usize) {
    let mut n = t;
    while !shared.done.load(Ordering::SeqCst) {
        n += stop_threads;
        let pick = |list: &Mutex<Vec<String>>| {
            let list = list.lock().unwrap();
            (!list.is_empty()).then(|| list[(n * 7919) % list.len()].clone())
        };
        let target = match n % 5 {
            0 => pick(&shared.dead),
            1 => pick(&shared.dead).map(|id| id[id.len() - 8..].to_string()),
            2 => pick(&shared.decoys),
            3 => pick(&shared.decoys).map(|id| id[id.len() - 6..].to_uppercase()),
            _ => None,
        }
        .unwrap_or_else(session_id);
        let out = home.mur(&["stop", &target]);
        shared.stray_stops.fetch_add(1, Ordering::Relaxed);
        if out.code != Some(1) || out.stdout.contains("stopped") {
            shared.violation(format!(
                "mur stop {target} (not a live session) exited {:?}: stdout {:?} stderr {:?}",
                out.code, out.stdout, out.stderr
            ));
        } else if !out.stderr.contains("no running session") {
            shared.violation(format!(
                "mur stop {target}: unexpected refusal {:?}",
                out.stderr
            ));
        }
    }
}

/// Session worker `w`: starts `count` sessions, keeping up to two alive, stopping the older one
/// by `mur stop <id>` or SIGTERM, alternately.
fn run_sessions(shared: &Shared, home: &Home, w: usize, count: usize) {
    let mut live: Vec<(usize, Session)> = vec![];
    let mut stopped = 0usize;
    for k in 0..count {
        let session = home.start(&[]);
        let index = {
            let mut lives = shared.lives.lock().unwrap();
            lives.push(Life {
                id: session.id.clone(),
                pid: session.pid,
                ready_at: session.ready_at,
                stop_at: None,
            });
            lives.len() - 1
        };
        shared
            .live
            .lock()
            .unwrap()
            .insert(session.id.clone(), session.pid);
        live.push((index, session));
        thread::sleep(Duration::from_millis((random_u64() % 250) + 50));
        if live.len() == 2 || k + 1 == count {
            while live.len() > usize::from(k + 1 != count) {
                let (index, session) = live.remove(0);
                stop_one(
                    shared,
                    home,
                    index,
                    session,
                    (w + stopped).is_multiple_of(2),
                );
                stopped += 1;
            }
        }
    }
}

/// Afterwards: one more ps lists nothing and prunes every decoy (for a gone process only), and
/// nothing is left in the running dir.
fn assert_a_last_ps_prunes_the_rest(home: &Home) {
    let last = home.mur(&["ps", "--json", "-v"]);
    last.expect_code(0);
    assert_eq!(
        last.json()["capsules"].as_array().map(Vec::len),
        Some(0),
        "nothing is running any more: {}",
        last.stdout
    );
    for line in last.stderr.lines() {
        assert!(
            line.starts_with("mur ps: pruned ")
                && is_gone_reason(
                    line.split_once(": ")
                        .unwrap()
                        .1
                        .split_once(": ")
                        .map_or("", |x| x.1)
                ),
            "final ps: {line:?}"
        );
    }
    let left: Vec<String> = home
        .running_entries()
        .into_iter()
        .filter(|n| n.ends_with(".json") || n.ends_with(".tmp") || n.ends_with(".control"))
        .collect();
    assert!(left.is_empty(), "left in the running dir: {left:?}");
}

/// What judging the ps runs against the sessions' lives counted.
#[derive(Default)]
struct Judged {
    /// (ps, live session) pairs: a ps that ran wholly inside a session's life.
    pairs: usize,
    /// Of those, the ones where the ps listed the session other than running.
    unreachable: usize,
    decoy_prunes: usize,
    gone_prunes: usize,
}

/// Judge every ps against every session's life: no ps prunes a session's record before the
/// test stopped it, and every ps wholly inside a life lists that session running. Breaches go
/// to `shared`'s violations.
fn judge(shared: &Shared, lives: &[Life], runs: &[PsRun]) -> Judged {
    let by_id: HashMap<&str, &Life> = lives.iter().map(|l| (l.id.as_str(), l)).collect();
    let mut judged = Judged::default();
    for run in runs {
        for (name, reason) in &run.pruned {
            let id = name.trim_end_matches(".json");
            match by_id.get(id) {
                Some(life) => {
                    judged.gone_prunes += 1;
                    let stop_at = life.stop_at.expect("every session was stopped");
                    if run.ended < stop_at {
                        shared.violation(format!(
                            "a ps that ended {:?} before the test stopped {id} pruned its record ({reason})",
                            stop_at - run.ended
                        ));
                    }
                }
                None => judged.decoy_prunes += 1,
            }
        }
        for life in lives {
            let stop_at = life.stop_at.unwrap();
            if life.ready_at < run.started && run.ended < stop_at {
                judged.pairs += 1;
                match run.listed.get(&life.id).map(String::as_str) {
                    Some("running") => {}
                    Some(other) => {
                        judged.unreachable += 1;
                        shared.violation(format!(
                            "a ps inside the life of {} (pid {}) listed it {other}",
                            life.id, life.pid
                        ));
                    }
                    None => shared.violation(format!(
                        "a ps inside the life of {} (pid {}) did not list it",
                        life.id, life.pid
                    )),
                }
            }
        }
    }
    judged
}

#[test]
fn sessions_come_and_go_under_concurrent_ps_and_stray_stops_and_nothing_else_is_touched() {
    let _serial = serial();
    let t0 = Instant::now();
    let sessions = 50 * scale();
    let workers = 5;
    let ps_threads = 10;
    let stop_threads = 5;
    let home = Arc::new(Home::new());
    let running = home.running_dir();
    let shared = Arc::new(Shared::default());

    // Bystanders: processes nothing may signal, named by records with the wrong start time.
    let mut bystanders: Vec<Proc> = (0..5).map(|_| Proc::sleeper()).collect();
    let bystander_ids: Vec<(u32, String)> =
        bystanders.iter().map(|p| (p.pid(), p.start())).collect();
    let me = std::process::id();
    let me = (me, start_token(me).unwrap());

    let mut threads = vec![];
    {
        let (shared, running) = (shared.clone(), running.clone());
        let bystander_ids = bystander_ids.clone();
        threads.push(thread::spawn(move || {
            write_decoys(&shared, &running, &bystander_ids, &me);
        }));
    }
    for _ in 0..ps_threads {
        let (shared, home) = (shared.clone(), home.clone());
        threads.push(thread::spawn(move || read_ps_in_a_loop(&shared, &home)));
    }
    for t in 0..stop_threads {
        let (shared, home) = (shared.clone(), home.clone());
        threads.push(thread::spawn(move || {
            stop_strays(&shared, &home, t, stop_threads);
        }));
    }
    let per_worker = sessions.div_ceil(workers);
    let mut session_workers = vec![];
    for w in 0..workers {
        let (shared, home) = (shared.clone(), home.clone());
        let count = per_worker.min(sessions.saturating_sub(w * per_worker));
        session_workers.push(thread::spawn(move || {
            run_sessions(&shared, &home, w, count);
        }));
    }
    for worker in session_workers {
        worker.join().expect("a session worker panicked");
    }
    shared.done.store(true, Ordering::SeqCst);
    for t in threads {
        t.join().expect("a helper thread panicked");
    }
    let busy = t0.elapsed();

    assert_a_last_ps_prunes_the_rest(&home);
    for (i, bystander) in bystanders.iter_mut().enumerate() {
        assert!(
            bystander.alive(),
            "bystander {i} (pid {}) was ended: {:?}",
            bystander.pid(),
            bystander.exit_status()
        );
    }

    let lives = shared.lives.lock().unwrap().clone();
    let runs = shared.ps_runs.lock().unwrap();
    let Judged {
        pairs,
        unreachable,
        decoy_prunes,
        gone_prunes,
    } = judge(&shared, &lives, &runs);
    let violations = shared.violations.lock().unwrap().clone();
    println!(
        "races: {} sessions in {busy:.1?} ({workers} workers; stopped half by `mur stop`, half by SIGTERM); \
         {} mur ps runs by {ps_threads} threads, {pairs} (ps, live session) pairs checked, {unreachable} unreachable; \
         {} stray mur stops by {stop_threads} threads; {} decoy records written, {decoy_prunes} decoy and \
         {gone_prunes} gone-session prunes seen; {} bystanders alive; {} violations; total {:.1?}",
        lives.len(),
        runs.len(),
        shared.stray_stops.load(Ordering::Relaxed),
        shared.decoys_written.load(Ordering::Relaxed),
        bystanders.len(),
        violations.len(),
        t0.elapsed(),
    );
    assert_eq!(lives.len(), sessions);
    assert!(runs.len() >= ps_threads, "the readers ran");
    assert!(pairs > 0, "some ps ran while sessions were live");
    assert!(
        violations.is_empty(),
        "{} violations:\n{}",
        violations.len(),
        violations.join("\n")
    );
}

/// Stop one live session the test started: its record must be there right before, and it must
/// still be the process that started (nothing else ended it); then `mur stop <id>` or SIGTERM.
fn stop_one(shared: &Shared, home: &Home, index: usize, mut session: Session, by_mur_stop: bool) {
    let id = session.id.clone();
    if !session.alive() {
        let status = session.wait_exit(Duration::from_secs(1));
        shared.violation(format!(
            "{id} (pid {}) ended before the test stopped it: {status:?}; stderr {:?}",
            session.pid,
            session.stderr()
        ));
    }
    match fs::read(home.record_path(&id)) {
        Ok(bytes) => {
            let parsed: Result<Value, _> = serde_json::from_slice(&bytes);
            if !parsed
                .as_ref()
                .is_ok_and(|r| r["session_id"] == id.as_str())
            {
                shared.violation(format!(
                    "{id}: its record does not parse as its own: {parsed:?}"
                ));
            }
        }
        Err(e) => shared.violation(format!("{id}: its record is gone while it is live: {e}")),
    }
    shared.live.lock().unwrap().remove(&id);
    shared.lives.lock().unwrap()[index].stop_at = Some(Instant::now());
    if by_mur_stop {
        let out = home.mur(&["stop", &id]);
        if out.code != Some(0) || !out.stdout.contains(&format!("stopped: {id}")) {
            shared.violation(format!(
                "mur stop {id} exited {:?}: {:?} {:?}",
                out.code, out.stdout, out.stderr
            ));
        }
    } else {
        session.signal(libc::SIGTERM);
    }
    let status = session.wait_exit(Duration::from_secs(20));
    if status.code() != Some(143) {
        shared.violation(format!("{id} exited {status:?}, not 143"));
    }
    if home.record_path(&id).exists() {
        shared.violation(format!("{id}: its record outlived it"));
    }
    shared.dead.lock().unwrap().push(id);
}

// ---------------------------------------------------------------------------------------------
// A reused pid
// ---------------------------------------------------------------------------------------------

const NS_LAST_PID: &str = "/proc/sys/kernel/ns_last_pid";

/// Make the kernel hand a just-freed pid to a new `sleep`: spawn and reap a child, write its pid
/// less one to `ns_last_pid`, spawn again. `Ok((the new sleep, the old process's start time,
/// tries))`; the `Err` says why it could not be done.
fn reuse_a_pid() -> Result<(Proc, String, usize), String> {
    if !std::path::Path::new(NS_LAST_PID).exists() {
        return Err(format!("{NS_LAST_PID} does not exist"));
    }
    // SAFETY: geteuid takes nothing and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not running as root".into());
    }
    for attempt in 1..=30 {
        let mut first = Proc::sleeper();
        let pid = first.pid();
        let old_start = first.start();
        first.kill();
        // A later clock tick, so the new holder's start time differs from the old one's.
        thread::sleep(Duration::from_millis(30));
        fs::write(NS_LAST_PID, (pid - 1).to_string())
            .map_err(|e| format!("cannot write {NS_LAST_PID}: {e}"))?;
        let second = Proc::sleeper();
        if second.pid() == pid {
            let new_start = second.start();
            if new_start != old_start {
                return Ok((second, old_start, attempt));
            }
        }
    }
    Err("the kernel did not hand the pid back within 30 tries".into())
}

#[test]
fn a_record_naming_a_reused_pid_is_never_signalled_and_is_pruned() {
    let _serial = serial();
    let home = Home::new();
    let running = home.running_dir();
    let (mut victim, old_start, path) = match reuse_a_pid() {
        Ok((victim, old_start, tries)) => {
            let path = format!(
                "real pid reuse: pid {} freed and handed to a new `sleep` (try {tries}); recorded start {old_start}, now {}",
                victim.pid(),
                victim.start()
            );
            (victim, old_start, path)
        }
        Err(why) => {
            let victim = Proc::sleeper();
            let old_start = wrong_start(&victim.start(), 3);
            let path = format!(
                "SIMULATED pid reuse ({why}): a live `sleep` (pid {}) recorded with start {old_start} instead of {}",
                victim.pid(),
                victim.start()
            );
            (victim, old_start, path)
        }
    };
    // Straight to stderr, past the harness's capture: which path ran must always show.
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("pid-reuse path: {path}\n").as_bytes());
    let pid = victim.pid();

    // mur stop, by full id, by suffix and by @1: nothing is sent, nothing matches.
    for form in ["full", "suffix", "@1"] {
        let id = session_id();
        write_record_atomically(&running, &record(&id, pid, &old_start, &dead_url()));
        let address = match form {
            "full" => id.clone(),
            "suffix" => id[id.len() - 10..].to_string(),
            _ => "@1".to_string(),
        };
        let out = home.mur(&["stop", &address, "--timeout", "1"]);
        assert_eq!(out.code, Some(1), "mur stop {address}: {out:?}");
        assert!(
            !out.stdout.contains("stopped"),
            "mur stop {address}: {out:?}"
        );
        assert!(
            out.stderr.contains("no running session") || out.stderr.contains("only 0 session"),
            "mur stop {address}: {out:?}"
        );
        thread::sleep(Duration::from_millis(50));
        assert!(
            victim.alive(),
            "mur stop {address} signalled pid {pid}: {:?}",
            victim.exit_status()
        );
    }

    // mur ps prunes the record, naming the reason, and sends nothing.
    let id = session_id();
    let record_path = write_record_atomically(&running, &record(&id, pid, &old_start, &dead_url()));
    let out = home.mur(&["ps", "-v"]);
    out.expect_code(0);
    assert!(
        out.stderr
            .contains(&format!("pruned {}", record_path.display()))
            && out.stderr.contains("started at another time"),
        "{out:?}"
    );
    assert!(out.stdout.contains("no running capsules"), "{out:?}");
    assert!(!record_path.exists(), "the record was pruned");
    thread::sleep(Duration::from_millis(50));
    assert!(victim.alive(), "mur ps signalled pid {pid}");
}
