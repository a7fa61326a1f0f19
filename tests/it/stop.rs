//! `mur stop` against processes this test started, and only those (DESIGN.md §2, §4, §6).

use crate::common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    door::{Door, DoorSpec},
    home::Home,
    http::dead_url,
    process::{Proc, comm, mkfifo, start_token},
    records::{formation_id, record, record_for, session_id, with_suffix},
    skip::skipped,
    wait::wait_until,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);

/// A record for `process` at `url`, written; its session id.
fn session(home: &Home, process: &Proc, url: &str) -> String {
    let id = session_id();
    home.write_record(&record_for(&id, process, url));
    id
}

/// A session with a chosen id.
fn session_as(home: &Home, id: &str, process: &Proc) {
    home.write_record(&record_for(id, process, &dead_url()));
}

/// The `stopped:` lines of stdout.
fn stopped_lines(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| l.starts_with("stopped: "))
        .collect()
}

#[track_caller]
fn assert_died_of(process: &mut Proc, signal: i32) {
    let status = process.wait_exit(WAIT);
    assert_eq!(
        status.signal(),
        Some(signal),
        "pid {} ended with {status:?}, not signal {signal}",
        process.pid()
    );
}

#[test]
fn a_session_that_answers_session_stop_is_stopped_at_its_door() {
    for token in [None, Some("mdt1.operatorstop.mac")] {
        let home = Home::patient();
        // The "capsule": a cat that exits 0 once the door lets go of its stdin.
        let mut cat = Proc::cat_on_pipe();
        let stdin = Arc::new(Mutex::new(Some(cat.take_stdin())));
        let id = session_id();
        let door = Door::start(DoorSpec {
            session_id: id.clone(),
            token: token.map(String::from),
            on_stop: Some(Box::new(move || drop(stdin.lock().unwrap().take()))),
            ..DoorSpec::default()
        });
        let mut r = record_for(&id, &cat, &door.url());
        if let Some(token) = token {
            r["door_token"] = json!(token);
        }
        let path = home.write_record(&r);
        let control = home.write_control(&id, "ctl1.x.y");

        let run = home.mur(&["stop", &id]);
        run.expect_code(0);
        assert_eq!(
            run.stdout,
            format!("stopped: {id}  echo@0.1.0  session/stop\n"),
            "stderr: {}",
            run.stderr
        );
        let status = cat.wait_exit(WAIT);
        assert!(
            status.success(),
            "the capsule ended by itself, not by a signal: {status:?}"
        );
        assert!(
            !path.exists() && !control.exists(),
            "record and control pruned"
        );
        let asked = door.seen_of("session/stop");
        assert_eq!(asked.len(), 1, "{:?}", door.seen());
        assert_eq!(
            asked[0].authorization,
            token.map(|t| format!("Bearer {t}")),
            "the operator token, and only for an authenticated door"
        );
        if let Some(token) = token {
            assert!(!run.stdout.contains(token) && !run.stderr.contains(token));
        }
    }
}

/// A door of the original runtime (1.0 only, with the header): `session/stop` is unknown there,
/// so stop asks `murmur.StopSession` with `A2A-Version: 1.0` — which cancels the session's tasks
/// and leaves its process running, as the original's does — and then sends SIGTERM at once.
#[test]
fn an_original_runtime_door_is_asked_murmur_stop_session_then_signalled() {
    let home = Home::patient();
    let mut sleeper = Proc::sleeper();
    let id = session_id();
    let token = "mdt1.originalop.mac";
    let door = Door::start(DoorSpec {
        session_id: id.clone(),
        token: Some(token.into()),
        v1_only: true,
        ..DoorSpec::default()
    });
    let mut r = record_for(&id, &sleeper, &door.url());
    r["door_token"] = json!(token);
    let path = home.write_record(&r);

    let started = std::time::Instant::now();
    let run = home.mur(&["stop", &id]);
    run.expect_code(0);
    assert_eq!(
        run.stdout,
        format!("stopped: {id}  echo@0.1.0  SIGTERM\n"),
        "stderr: {}",
        run.stderr
    );
    assert_died_of(&mut sleeper, libc::SIGTERM);
    assert!(
        started.elapsed() < std::time::Duration::from_millis(1500),
        "no grace waited for a door that never ends itself: {:?}",
        started.elapsed()
    );
    assert!(!path.exists(), "record pruned");
    let asked: Vec<_> = door
        .seen()
        .into_iter()
        .filter(|s| s.what.ends_with("top") || s.what.ends_with("Session"))
        .collect();
    let said: Vec<(&str, Option<&str>)> = asked
        .iter()
        .map(|s| (s.what.as_str(), s.version.as_deref()))
        .collect();
    assert_eq!(
        said,
        [
            ("session/stop", Some("0.3")),
            ("murmur.StopSession", Some("1.0"))
        ],
        "mur's own name first, then the original's with its generation's header"
    );
}

#[test]
fn a_door_that_answers_but_does_not_stop_is_followed_by_sigterm() {
    let home = Home::patient();
    let mut sleeper = Proc::sleeper();
    let id = session_id();
    let door = Door::public(&id);
    home.write_record(&record_for(&id, &sleeper, &door.url()));

    let run = home.mur(&["stop", &id]);
    run.expect_code(0);
    assert_eq!(run.stdout, format!("stopped: {id}  echo@0.1.0  SIGTERM\n"));
    assert_died_of(&mut sleeper, libc::SIGTERM);
    assert_eq!(door.seen_of("session/stop").len(), 1);
    assert!(!home.record_path(&id).exists());
}

#[test]
fn a_session_without_a_door_gets_sigterm() {
    let home = Home::patient();
    let mut sleeper = Proc::sleeper();
    let id = session(&home, &sleeper, &dead_url());
    let control = home.write_control(&id, "ctl1.x.y");

    let run = home.mur(&["stop", &id]);
    run.expect_code(0);
    assert_eq!(run.stdout, format!("stopped: {id}  echo@0.1.0  SIGTERM\n"));
    assert_died_of(&mut sleeper, libc::SIGTERM);
    assert!(!home.record_path(&id).exists(), "record pruned");
    assert!(!control.exists(), "control file pruned with it");
    assert!(home.running_entries().is_empty());
}

#[test]
fn a_process_ignoring_sigterm_gets_sigkill_after_the_timeout() {
    let home = Home::patient();
    // `trap ""` sets SIG_IGN, which survives the exec: the recorded pid itself ignores SIGTERM.
    let mut stubborn = Proc::spawn("sh", &["-c", "trap '' TERM; exec sleep 1000"]);
    let pid = stubborn.pid();
    wait_until(WAIT, "the shell to ignore SIGTERM and exec sleep", || {
        stubborn.ignores(libc::SIGTERM) && comm(pid).as_deref() == Some("sleep")
    });
    let id = session(&home, &stubborn, &dead_url());

    let run = home.mur(&["stop", "--timeout", "1", &id]);
    run.expect_code(0);
    assert_eq!(run.stdout, format!("stopped: {id}  echo@0.1.0  SIGKILL\n"));
    assert!(
        run.elapsed >= Duration::from_millis(900),
        "SIGKILL came before the 1 s grace: {:?}",
        run.elapsed
    );
    assert_died_of(&mut stubborn, libc::SIGKILL);
    assert!(!home.record_path(&id).exists());
}

#[test]
fn timeout_zero_is_sigkill_at_once() {
    let home = Home::patient();
    let mut sleeper = Proc::sleeper();
    let id = session_id();
    let door = Door::public(&id);
    home.write_record(&record_for(&id, &sleeper, &door.url()));

    let run = home.mur(&["stop", "--timeout", "0", &id]);
    run.expect_code(0);
    assert_eq!(run.stdout, format!("stopped: {id}  echo@0.1.0  SIGKILL\n"));
    assert_died_of(&mut sleeper, libc::SIGKILL);
    assert!(
        door.seen_of("session/stop").is_empty(),
        "no grace means no door call either: {:?}",
        door.seen()
    );
    assert!(run.elapsed < Duration::from_secs(4), "{:?}", run.elapsed);
    assert!(!home.record_path(&id).exists());
}

#[test]
fn a_mismatched_start_time_is_never_signalled() {
    let home = Home::patient();
    let mut sleeper = Proc::sleeper();
    let real: u64 = sleeper.start().parse().unwrap();
    let id = session_id();
    home.write_record(&record(
        &id,
        sleeper.pid(),
        &(real + 1).to_string(),
        &dead_url(),
    ));

    let run = home.mur(&["stop", "--timeout", "0", &id]);
    run.expect_code(1);
    assert!(
        run.stderr.contains(&format!("no running session {id}")),
        "stderr: {}",
        run.stderr
    );
    assert!(stopped_lines(&run.stdout).is_empty(), "{}", run.stdout);
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        sleeper.alive(),
        "a process with another start time was signalled"
    );

    // Nor by --all, nor by @1, on a fresh record of the same kind.
    home.write_record(&record(
        &session_id(),
        sleeper.pid(),
        &(real + 1).to_string(),
        &dead_url(),
    ));
    home.mur(&["stop", "--timeout", "0", "@1"]).expect_code(1);
    let run = home.mur(&["stop", "--timeout", "0", "--all"]);
    assert!(stopped_lines(&run.stdout).is_empty(), "{}", run.stdout);
    std::thread::sleep(Duration::from_millis(50));
    assert!(sleeper.alive());
}

#[test]
fn sessions_are_addressed_by_at_n_full_id_and_suffix() {
    let home = Home::patient();
    // Oldest first: a, b, c, d (d is @1).
    let ids: Vec<String> = ["000a1111", "000b2222", "000c3333", "000d4444"]
        .iter()
        .map(|suffix| with_suffix(&session_id(), suffix))
        .collect();
    let mut procs: Vec<Proc> = ids.iter().map(|_| Proc::sleeper()).collect();
    for (id, p) in ids.iter().zip(&procs) {
        session_as(&home, id, p);
    }

    // @2 is the second most recent: c.
    let run = home.mur(&["stop", "@2"]);
    run.expect_code(0);
    assert_eq!(
        stopped_lines(&run.stdout),
        [format!("stopped: {}  echo@0.1.0  SIGTERM", ids[2])]
    );
    assert_died_of(&mut procs[2], libc::SIGTERM);
    assert!(procs[0].alive() && procs[1].alive() && procs[3].alive());

    // @1 is the newest: d.
    let run = home.mur(&["stop", "@1"]);
    run.expect_code(0);
    assert!(run.stdout.contains(&ids[3]), "{}", run.stdout);
    assert_died_of(&mut procs[3], libc::SIGTERM);
    assert!(procs[0].alive() && procs[1].alive());

    // A suffix, in capitals: b.
    let run = home.mur(&["stop", "0B2222"]);
    run.expect_code(0);
    assert!(run.stdout.contains(&ids[1]), "{}", run.stdout);
    assert_died_of(&mut procs[1], libc::SIGTERM);
    assert!(procs[0].alive());

    // The full id: a.
    let run = home.mur(&["stop", &ids[0]]);
    run.expect_code(0);
    assert!(run.stdout.contains(&ids[0]), "{}", run.stdout);
    assert_died_of(&mut procs[0], libc::SIGTERM);
    assert!(home.running_entries().is_empty());
}

#[test]
fn addresses_that_match_nothing_or_too_much_are_exit_1_and_stop_nothing() {
    let home = Home::patient();
    let x = with_suffix(&session_id(), "1beef");
    let y = with_suffix(&session_id(), "2beef");
    let mut px = Proc::sleeper();
    let mut py = Proc::sleeper();
    session_as(&home, &x, &px);
    session_as(&home, &y, &py);
    let unknown_full = with_suffix(&session_id(), "3beef");

    // `@0` is a usage error (exit 2): see
    // bare_stop_says_to_name_what_to_stop_and_an_impossible_at_n_is_a_usage_error.
    let cases: [(&str, &str); 8] = [
        ("beef", "matches 2"),
        ("BEEF", "matches 2"),
        ("eef", "too short"),
        ("dead", "no running session or formation"),
        (&unknown_full, "no running session"),
        ("ses_nothex", "not a session id"),
        (
            "frm_0199c4e2f1b7712a9d3e4f5000000000",
            "no running formation",
        ),
        ("@3", "only 2"),
    ];
    for (address, says) in cases {
        let run = home.mur(&["stop", "--timeout", "0", address]);
        run.expect_code(1);
        assert!(
            run.stderr.starts_with("mur stop: ") && run.stderr.contains(says),
            "{address}: stderr: {}",
            run.stderr
        );
        assert_eq!(run.stdout, "", "{address}");
        assert!(px.alive() && py.alive(), "{address} stopped something");
    }
    assert!(home.record_path(&x).exists() && home.record_path(&y).exists());

    // One good address and one bad: the good one is stopped, and the exit is still 1.
    let run = home.mur(&["stop", &x, "dead"]);
    run.expect_code(1);
    assert_eq!(stopped_lines(&run.stdout).len(), 1, "{}", run.stdout);
    assert_died_of(&mut px, libc::SIGTERM);
    assert!(py.alive());
}

#[test]
fn usage_errors_are_exit_2_and_stop_nothing() {
    let home = Home::patient();
    let mut sleeper = Proc::sleeper();
    let id = session(&home, &sleeper, &dead_url());
    let cases: [&[&str]; 6] = [
        &["stop"],
        &["stop", "--all", &id],
        &["stop", "--timeout", "soon", &id],
        &["stop", "--timeout", "-1", &id],
        &["stop", &id, "--timeout"],
        &["stop", "--bogus", &id],
    ];
    for args in cases {
        let run = home.mur(args);
        run.expect_code(2);
        assert!(
            run.stderr.contains("Try 'mur stop --help'"),
            "{args:?}: {}",
            run.stderr
        );
        assert_eq!(run.stdout, "");
        assert!(sleeper.alive(), "{args:?} stopped something");
    }
    assert!(home.record_path(&id).exists());
}

#[test]
fn stop_all_stops_every_session() {
    let home = Home::patient();
    let mut cat = Proc::cat_on_pipe();
    let stdin = Arc::new(Mutex::new(Some(cat.take_stdin())));
    let by_door = session_id();
    let door = Door::start(DoorSpec {
        session_id: by_door.clone(),
        on_stop: Some(Box::new(move || drop(stdin.lock().unwrap().take()))),
        ..DoorSpec::default()
    });
    home.write_record(&record_for(&by_door, &cat, &door.url()));
    let mut sleeper = Proc::sleeper();
    let by_signal = session(&home, &sleeper, &dead_url());

    let run = home.mur(&["stop", "--all"]);
    run.expect_code(0);
    let mut lines = stopped_lines(&run.stdout);
    lines.sort();
    let mut expected = [
        format!("stopped: {by_door}  echo@0.1.0  session/stop"),
        format!("stopped: {by_signal}  echo@0.1.0  SIGTERM"),
    ];
    expected.sort();
    assert_eq!(lines, expected, "stderr: {}", run.stderr);
    assert!(cat.wait_exit(WAIT).success());
    assert_died_of(&mut sleeper, libc::SIGTERM);
    assert!(home.running_entries().is_empty());
}

#[test]
fn a_formation_is_stopped_through_its_launcher() {
    let home = Home::patient();
    let fifo = home.path().join("lifeline");
    mkfifo(&fifo);
    let fifo_arg = fifo.to_str().unwrap();

    // Members hold the read end of a lifeline; the launcher holds its write end, so when the
    // launcher dies the members read EOF and end by themselves, as `mur run` does.
    let mut members: Vec<Proc> = (0..2).map(|_| Proc::spawn("cat", &[fifo_arg])).collect();
    let mut launcher = Proc::spawn("sh", &["-c", "exec 3>\"$0\"; exec sleep 1000", fifo_arg]);
    let launcher_pid = launcher.pid();
    wait_until(WAIT, "the launcher to hold the lifeline", || {
        comm(launcher_pid).as_deref() == Some("sleep")
    });
    for m in &members {
        let fd3 = format!("/proc/{}/fd/3", m.pid());
        wait_until(WAIT, "a member to open its lifeline", || {
            fs::read_link(&fd3).is_ok_and(|target| target == fifo)
        });
    }
    // And one member without a lifeline, stopped as a session afterwards.
    let mut loner = Proc::sleeper();

    let frm = formation_id();
    let launcher_identity = json!({"pid": launcher.pid(), "process_start": launcher.start()});
    let mut ids = vec![];
    for (m, lifeline) in members.iter().map(|m| (m, true)).chain([(&loner, false)]) {
        let id = session_id();
        let mut r = record_for(&id, m, &dead_url());
        r["formation_id"] = json!(frm);
        if lifeline {
            r["formation_lifeline"] = json!(true);
        }
        r["formation_launcher"] = launcher_identity.clone();
        home.write_record(&r);
        ids.push(id);
    }

    let run = home.mur(&["stop", &frm]);
    run.expect_code(0);
    let lines = stopped_lines(&run.stdout);
    assert!(
        lines.contains(&format!("stopped: {frm}  launcher pid {launcher_pid}  SIGTERM").as_str()),
        "{}\nstderr: {}",
        run.stdout,
        run.stderr
    );
    for id in &ids[..2] {
        assert!(
            lines.contains(&format!("stopped: {id}  echo@0.1.0  with its formation").as_str()),
            "{id} not named:\n{}",
            run.stdout
        );
    }
    assert!(
        lines.contains(&format!("stopped: {}  echo@0.1.0  SIGTERM", ids[2]).as_str()),
        "{}",
        run.stdout
    );
    assert_eq!(lines.len(), 4, "{}", run.stdout);

    assert_died_of(&mut launcher, libc::SIGTERM);
    for m in &mut members {
        let status = m.wait_exit(WAIT);
        assert!(
            status.success(),
            "a member ended through its lifeline, not a signal: {status:?}"
        );
    }
    assert_died_of(&mut loner, libc::SIGTERM);
    assert!(
        home.running_entries().is_empty(),
        "{:?}",
        home.running_entries()
    );
    assert!(
        run.elapsed < Duration::from_secs(8),
        "lifelines end members at once: {:?}",
        run.elapsed
    );
}

#[test]
fn a_signal_the_kernel_refuses_keeps_the_record() {
    let uid = fs::metadata("/proc/self").unwrap().uid();
    if uid == 0 {
        skipped(
            "a_signal_the_kernel_refuses_keeps_the_record",
            "running as root, which may signal any process, so EPERM cannot be provoked",
        );
        return;
    }
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let cap_kill = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|caps| u64::from_str_radix(caps.trim(), 16).ok())
        .is_none_or(|caps| caps & (1 << 5) != 0);
    // Pid 1, if it belongs to someone else and this process cannot override that: the kernel
    // refuses the signal, so nothing is ever delivered to it.
    let init_uid = fs::metadata("/proc/1").map(|m| m.uid());
    if cap_kill || init_uid.as_ref().is_ok_and(|&u| u == uid) || init_uid.is_err() {
        skipped(
            "a_signal_the_kernel_refuses_keeps_the_record",
            &format!(
                "no process here is safely out of this user's reach (pid 1 uid {init_uid:?}, CAP_KILL {cap_kill})"
            ),
        );
        return;
    }
    let home = Home::patient();
    let id = session_id();
    let start = start_token(1).expect("pid 1's start time");
    let path = home.write_record(&record(&id, 1, &start, &dead_url()));
    let run = home.mur(&["stop", "--timeout", "1", &id]);
    run.expect_code(1);
    assert!(run.stderr.contains("refused"), "stderr: {}", run.stderr);
    assert!(stopped_lines(&run.stdout).is_empty());
    assert!(
        path.exists(),
        "a session that could not be ended keeps its record"
    );
}

#[test]
fn a_closed_stdout_does_not_cut_a_stop_short() {
    let home = Home::patient();
    let mut procs: Vec<Proc> = (0..3).map(|_| Proc::sleeper()).collect();
    for p in &procs {
        session(&home, p, &dead_url());
    }
    let mut child = home
        .command(&["stop", "--all"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}, stderr: {stderr}");
    assert_eq!(stderr, "");
    for p in &mut procs {
        assert_died_of(p, libc::SIGTERM);
    }
    assert!(home.running_entries().is_empty());
}

/// Issue 21: a capsule NAME or NAME@VERSION addresses the one running session of it, in
/// `stop`, `token` and `logs` alike; several are an error listing them, and nothing is stopped.
#[test]
fn capsule_names_address_sessions_and_ambiguity_lists_the_candidates() {
    let home = Home::patient();
    let mut procs = vec![];
    let mut ids = vec![];
    for (name, version) in [("shout", "1"), ("shout", "2"), ("whisper", "0.3")] {
        let process = Proc::sleeper();
        let id = session_id();
        let mut r = record_for(&id, &process, &dead_url());
        r["capsule_name"] = json!(name);
        r["capsule_version"] = json!(version);
        r["door_token"] = json!(format!("mdt1.e30.{name}{version}MAC"));
        home.write_record(&r);
        procs.push(process);
        ids.push(id);
    }

    let ambiguous = home.mur(&["stop", "--timeout", "1", "shout"]);
    ambiguous.expect_code(1);
    assert!(
        ambiguous
            .stderr
            .contains("'shout' names 2 running sessions")
            && ambiguous.stderr.contains(&ids[0])
            && ambiguous.stderr.contains(&ids[1]),
        "{}",
        ambiguous.stderr
    );
    assert!(procs.iter_mut().all(Proc::alive), "nothing stopped");
    let token = home.mur(&["token", "shout"]);
    token.expect_code(1);
    assert!(token.stderr.contains("names 2"), "{}", token.stderr);

    assert_eq!(home.token(&["whisper"]), "mdt1.e30.whisper0.3MAC");
    assert_eq!(home.token(&["whisper@0.3"]), "mdt1.e30.whisper0.3MAC");
    // logs reaches the session by its name too (these records' sessions keep no log).
    let logs = home.mur(&["logs", "whisper"]);
    logs.expect_code(1);
    assert!(logs.stderr.contains(&ids[2]), "{}", logs.stderr);

    let run = home.mur(&["stop", "--timeout", "5", "shout@1"]);
    run.expect_code(0);
    assert!(run.stdout.contains(&ids[0]), "{}", run.stdout);
    assert_died_of(&mut procs[0], libc::SIGTERM);
    assert!(procs[1].alive());
    // Now one shout is left: the name alone names it.
    let run = home.mur(&["stop", "--timeout", "5", "shout"]);
    run.expect_code(0);
    assert!(run.stdout.contains(&ids[1]), "{}", run.stdout);
    assert_died_of(&mut procs[1], libc::SIGTERM);
    let gone = home.mur(&["stop", "shout"]);
    gone.expect_code(1);
    assert!(
        gone.stderr.contains("no running session is named so"),
        "{}",
        gone.stderr
    );
}

/// Issue 21: a session mur may not signal — pid 1, as when it is its container's init — is
/// still asked at its door (`session/stop`, operator token): asking is not signalling. Here the
/// door takes the request but pid 1 (this machine's init) does not go, so the record is kept and
/// `mur stop` exits 1 saying both; `mur ps` shows it running, as it is.
#[test]
fn a_pid_1_session_is_asked_at_its_door_whatever_its_pid() {
    let home = Home::patient();
    let Some(init_start) = start_token(1) else {
        return skipped(
            "a_pid_1_session_is_asked_at_its_door_whatever_its_pid",
            "pid 1's start time is not readable here",
        );
    };
    let id = session_id();
    let token = "mdt1.e30.PID1MAC";
    let door = Door::start(DoorSpec {
        session_id: id.clone(),
        token: Some(token.into()),
        ..DoorSpec::default()
    });
    let mut r = record(&id, 1, &init_start, &door.url());
    r["door_token"] = json!(token);
    let path = home.write_record(&r);

    // Alive, its start time matching and its door answering as it: `running`, though mur never
    // signals it.
    let ps = home.mur(&["ps"]);
    ps.expect_code(0);
    assert!(
        ps.stdout
            .lines()
            .any(|l| l.starts_with(&id[..16]) && l.contains("running")),
        "{}",
        ps.stdout
    );

    let run = home.mur(&["stop", "--timeout", "2", &id]);
    run.expect_code(1);
    let asked = door.seen_of("session/stop");
    assert_eq!(asked.len(), 1, "{:?}", door.seen());
    assert_eq!(
        asked[0].authorization.as_deref(),
        Some(format!("Bearer {token}").as_str())
    );
    assert!(
        run.stderr.contains("asked at its door (session/stop)") && run.stderr.contains("pid 1"),
        "{}",
        run.stderr
    );
    assert!(path.exists(), "record kept");
}

/// How this test may make a new pid namespace: `unshare`'s flags (a user namespace too when not
/// root) and `nsenter`'s to join it; `None` when this machine allows neither.
fn pid_namespace_tools() -> Option<(&'static [&'static str], &'static [&'static str])> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let (unshare, nsenter): (&[&str], &[&str]) = if root {
        (&["-fp", "--mount-proc"], &["-p", "-m"])
    } else {
        (
            &["-Urfp", "--mount-proc"],
            &["-U", "-p", "-m", "--preserve-credentials"],
        )
    };
    let probe = std::process::Command::new("unshare")
        .args(unshare)
        .args(["nsenter", "--version"])
        .output()
        .ok()?;
    probe.status.success().then_some((unshare, nsenter))
}

/// Issue 21, end to end: `mur run` as pid 1 of its own pid namespace (as in a container,
/// `unshare -fp --mount-proc`), and `mur stop @1` run inside that namespace (as `podman exec`
/// would): pid 1 is never signalled, so the stop goes through the door — and the session ends
/// in order (exit 143, its record removed). The namespace ends with its pid 1, taking every
/// process in it, so the stopper itself is either done or killed (SIGKILL) by then.
#[test]
fn a_pid_1_session_in_its_own_pid_namespace_is_stopped_through_its_door() {
    let Some((unshare, nsenter)) = pid_namespace_tools() else {
        return skipped(
            "a_pid_1_session_in_its_own_pid_namespace_is_stopped_through_its_door",
            "unshare -fp (or -Urfp) --mount-proc or nsenter is unavailable here (util-linux; unprivileged user namespaces)",
        );
    };
    let home = Home::patient();
    // mur_command's environment, for other programs that run mur.
    let command = common::run::mur_command(home.path(), home.path(), &[]);
    let mut args: Vec<&str> = unshare.to_vec();
    args.extend([common::run::mur_bin(), "run", "--json"]);
    let mut session = std::process::Command::new("unshare");
    session
        .args(&args)
        .env_clear()
        .envs(command.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .current_dir(home.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut session = session.spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(session.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line).expect("the readiness line");
    assert_eq!(ready["pid"], 1, "{line}");
    let id = ready["session_id"].as_str().unwrap().to_string();
    let pid1 = common::process::children_of(session.id())
        .into_iter()
        .next()
        .expect("unshare's child: the session, pid 1 inside");

    let target = pid1.to_string();
    // `mur ARGS` run inside the namespace, as `podman exec CTR mur ARGS` would.
    let inside = |args: &[&str]| {
        let mut inside = std::process::Command::new("nsenter");
        inside
            .args(["-t", &target])
            .args(nsenter)
            .arg("--")
            .arg(common::run::mur_bin())
            .args(args)
            .env_clear()
            .envs(command.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .current_dir(home.path());
        common::run::run(inside, Duration::from_secs(30))
    };
    // There it is a live session like any other: pid 1 is never signalled, but it is alive, its
    // start time matches and its door answers as it.
    let ps = inside(&["ps"]);
    ps.expect_code(0);
    assert!(
        ps.stdout.contains(&id[..16]) && ps.stdout.contains("running"),
        "{}{}",
        ps.stdout,
        ps.stderr
    );
    assert!(!ps.stdout.contains("unreachable"), "{}", ps.stdout);
    // Asked at its door, it removes its record and waits for this `mur stop` to see that
    // before its exit ends the namespace (which would kill the stop, exit 137, unreported).
    let stopped = inside(&["stop", "--timeout", "5", "@1"]);
    let status = common::run::wait_child(&mut session, WAIT).expect("the session ended");
    assert_eq!(status.code(), Some(143), "an orderly stop: {status:?}");
    assert_eq!(
        stopped.code(),
        Some(0),
        "stop: {:?}\n{}{}",
        stopped.status,
        stopped.stdout,
        stopped.stderr
    );
    assert!(
        stopped.stdout.contains(&format!("stopped: {id}")),
        "{}",
        stopped.stdout
    );
    assert!(
        !stopped.stderr.contains("never signalled"),
        "{}",
        stopped.stderr
    );
    assert!(!home.record_path(&id).exists(), "record removed");
}

#[test]
fn bare_stop_says_to_name_what_to_stop_and_an_impossible_at_n_is_a_usage_error() {
    let home = Home::new();
    let out = home.mur(&["stop"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("name what to stop") && !out.stderr.contains("not both"),
        "{}",
        out.stderr
    );
    let out = home.mur(&["stop", "--all", "@1"]);
    out.expect_code(2);
    assert!(out.stderr.contains("not both"), "{}", out.stderr);
    for bad in ["@0", "@x", "@"] {
        let out = home.mur(&["stop", bad]);
        out.expect_code(2);
        assert!(
            out.stderr.contains("@N wants a whole number"),
            "{bad}: {}",
            out.stderr
        );
    }
    // In range but nothing running: a failure, not a usage error.
    home.mur(&["stop", "@1"]).expect_code(1);
}
