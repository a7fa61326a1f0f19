//! Sessions after their end, and naming them (DESIGN.md §8, issue 32): an ended session's
//! record and log kept, bounded, listed by `mur ps -a`, read by `mur logs`, removed by `mur rm`
//! and `mur prune`; `mur run --name` unique among running sessions; names, member names and id
//! prefixes as addresses; short ids in `mur ps`.

use crate::common;

use std::fs;
use std::time::Duration;

use common::{
    formation::{FormationFixture, manifest},
    home::{Home, mode_of},
    run::{MUR_DEADLINE, Output, run},
    session::state,
    wait::wait_until,
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

/// A capsule whose handler says `err: TEXT` on stderr and answers `ok TEXT`; its door takes the
/// operator token (so the running record holds one).
fn noisy(home: &Home) -> String {
    let script = "#!/bin/sh\nread -r text\necho \"err: $text\" >&2\necho \"ok $text\"\n";
    let manifest = home.write_capsule(
        "noisy",
        json!({"name": "noisy", "version": "1",
               "network": {"authentication": {"credentials": []}}}),
        Some(script),
    );
    manifest.to_str().unwrap().to_string()
}

/// `mur ARGS…` with `vars` set.
fn mur_with(home: &Home, vars: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = home.command(args);
    command.envs(vars.iter().copied());
    run(command, MUR_DEADLINE)
}

/// The `ps -a --json` capsule of `id`.
fn listed(home: &Home, id: &str) -> Option<Value> {
    let doc = home.mur(&["ps", "-a", "--json"]).json();
    doc["capsules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["session_id"] == id)
        .cloned()
}

#[test]
fn a_stopped_session_is_kept_with_its_exit_status_and_log_and_no_token() {
    let home = Home::new();
    let manifest = noisy(&home);
    let session = home.start(&[&manifest, "--name", "h2"]);
    let token = home.token(&["h2"]);
    let task = session.send(Some(&token), "hello", true);
    assert_eq!(state(&task), "completed", "{task}");

    home.mur(&["stop", "h2"]).expect_code(0);
    // Ended sessions are not listed without -a.
    let ps = home.mur(&["ps", "--json"]).json();
    assert_eq!(ps["capsules"], json!([]), "{ps}");

    // A state only an ended session is in implies -a.
    let exited = home.mur(&["ps", "-q", "--status", "exited"]);
    exited.expect_code(0);
    assert_eq!(exited.stdout.trim(), session.id);
    let row = listed(&home, &session.id).expect("ps -a lists the ended session");
    assert_eq!(row["status"], "exited", "{row}");
    assert_eq!(row["exit_code"], 143, "{row}");
    assert_eq!(row["name"], "h2", "{row}");
    assert_eq!(row["pid"], Value::Null, "{row}");
    assert!(
        row["ended_at"].is_string() && row["duration_secs"].is_u64(),
        "{row}"
    );

    let table = home.mur(&["ps", "-a"]);
    table.expect_code(0);
    let line = table
        .stdout
        .lines()
        .find(|l| l.contains(" h2 "))
        .unwrap_or_else(|| panic!("no h2 row:\n{}", table.stdout));
    assert!(line.contains("exited (143) "), "{line}");
    assert!(line.contains(" ago"), "{line}");

    // The ended record: private, and never a token.
    let ended = home.murmur().join("ended");
    let file = ended.join(format!("{}.json", session.id));
    assert_eq!(mode_of(&ended), 0o700);
    assert_eq!(mode_of(&file), 0o600);
    let text = fs::read_to_string(&file).unwrap();
    assert!(!text.contains(&token) && !text.contains("mdt1"), "{text}");

    // Its log, by name and by an id prefix.
    let id = task["id"].as_str().unwrap();
    for address in ["h2", &session.id[4..16]] {
        let logs = home.mur(&["logs", address]);
        logs.expect_code(0);
        assert!(
            logs.stdout.contains(&format!("{id} stderr: err: hello\n")),
            "{address}: {}",
            logs.stdout
        );
    }
    // -f on an ended session prints its log and returns.
    home.mur(&["logs", "-f", "h2"]).expect_code(0);
}

#[test]
fn a_sigkilled_sessions_log_is_kept_and_marked_and_ps_lists_it_gone() {
    let home = Home::new();
    let manifest = noisy(&home);
    let mut session = home.start(&[&manifest]);
    let token = home.token(&[&session.id]);
    session.send(Some(&token), "before", true);
    session.signal(libc::SIGKILL);
    session.wait_exit(WAIT);

    // The next ps prunes the running record and keeps the session as gone.
    home.mur(&["ps"]).expect_code(0);
    assert!(!home.record_path(&session.id).exists());
    let row = listed(&home, &session.id).expect("kept as ended");
    assert_eq!(row["status"], "gone", "{row}");
    assert_eq!(row["exit_code"], Value::Null, "{row}");

    let logs = home.mur(&["logs", &session.id]);
    logs.expect_code(0);
    assert!(
        logs.stdout.contains("stderr: err: before"),
        "{}",
        logs.stdout
    );
    let last = logs.stdout.lines().last().unwrap();
    assert!(
        last.starts_with("- mur: the session was found gone"),
        "{last}"
    );
}

#[test]
fn rm_refuses_a_running_session_and_rm_and_prune_remove_ended_ones() {
    let home = Home::new();
    let manifest = noisy(&home);
    for text in ["one", "two", "three"] {
        home.mur(&["run", &manifest, "--task", text]).expect_code(0);
    }
    let running = home.start(&[&manifest, "--name", "live"]);

    let refused = home.mur(&["rm", "live"]);
    refused.expect_code(1);
    assert!(
        refused.stderr.contains(&running.id) && refused.stderr.contains("mur stop live"),
        "{}",
        refused.stderr
    );
    home.mur(&["rm"]).expect_code(2);

    let doc = home.mur(&["ps", "-a", "--json"]).json();
    let ended: Vec<String> = doc["capsules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "exited")
        .map(|c| c["session_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ended.len(), 3, "{doc}");
    let rm = home.mur(&["rm", &ended[0]]);
    rm.expect_code(0);
    assert!(
        rm.stdout.starts_with(&format!("removed: {}", ended[0])),
        "{}",
        rm.stdout
    );
    assert!(
        !home
            .murmur()
            .join("logs")
            .join(format!("{}.log", ended[0]))
            .exists()
    );
    home.mur(&["logs", &ended[0]]).expect_code(1);

    let prune = home.mur(&["prune"]);
    prune.expect_code(0);
    assert!(
        prune.stdout.starts_with("removed 2 ended sessions and ")
            && prune.stdout.ends_with(" bytes of log\n"),
        "{}",
        prune.stdout
    );
    assert!(listed(&home, &ended[1]).is_none());
    assert!(listed(&home, &running.id).is_some(), "a running one stays");
}

#[test]
fn ended_sessions_are_bounded_and_zero_keeps_none() {
    let home = Home::new();
    let manifest = noisy(&home);
    let keep_two = [("MURMUR_KEEP_ENDED", "2")];
    for text in ["a", "b", "c"] {
        mur_with(&home, &keep_two, &["run", &manifest, "--task", text]).expect_code(0);
    }
    let doc = home.mur(&["ps", "-a", "--json"]).json();
    assert_eq!(doc["capsules"].as_array().unwrap().len(), 2, "{doc}");
    let logs: Vec<_> = fs::read_dir(home.murmur().join("logs")).unwrap().collect();
    assert_eq!(logs.len(), 2, "the oldest log went with its record");

    // A log bound of 0 MiB keeps none, and so does a count of 0.
    mur_with(
        &home,
        &[("MURMUR_KEEP_ENDED_MIB", "0")],
        &["run", &manifest, "--task", "d"],
    )
    .expect_code(0);
    let doc = home.mur(&["ps", "-a", "--json"]).json();
    assert_eq!(doc["capsules"], json!([]), "{doc}");
    mur_with(
        &home,
        &[("MURMUR_KEEP_ENDED", "0")],
        &["run", &manifest, "--task", "e"],
    )
    .expect_code(0);
    assert_eq!(fs::read_dir(home.murmur().join("logs")).unwrap().count(), 0);
    let bad = mur_with(&home, &[("MURMUR_KEEP_ENDED", "many")], &["ps", "-a"]);
    bad.expect_code(0);
    assert!(bad.stderr.contains("MURMUR_KEEP_ENDED"), "{}", bad.stderr);
}

#[test]
fn a_name_is_held_by_one_running_session_at_a_time_even_when_claimed_at_once() {
    let home = Home::new();
    home.mur(&["run", "--name", "Bad_Name"]).expect_code(2);

    // Four sessions claim one name at once: exactly one serves.
    let mut claims: Vec<std::process::Child> = (0..4)
        .map(|_| {
            let mut command = home.command(&["run", "-d", "--name", "h2"]);
            command
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            command.spawn().unwrap()
        })
        .collect();
    let outputs: Vec<std::process::Output> = claims
        .drain(..)
        .map(|child| child.wait_with_output().unwrap())
        .collect();
    let won: Vec<&std::process::Output> = outputs.iter().filter(|o| o.status.success()).collect();
    assert_eq!(won.len(), 1, "{outputs:?}");
    let holder = String::from_utf8_lossy(&won[0].stdout).trim().to_string();
    for lost in outputs.iter().filter(|o| !o.status.success()) {
        let stderr = String::from_utf8_lossy(&lost.stderr);
        assert!(
            stderr.contains(&format!(
                "the name 'h2' is taken by running session {holder}"
            )),
            "{stderr}"
        );
    }

    // The name addresses the session everywhere; ps shows it in NAME.
    let ps = home.mur(&["ps"]);
    let header: Vec<&str> = ps
        .stdout
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(header[..3], ["SESSION", "NAME", "CAPSULE"], "{}", ps.stdout);
    assert!(
        ps.stdout.contains(&format!("{}  h2 ", &holder[..16])),
        "{}",
        ps.stdout
    );
    home.mur(&["logs", "h2"]).expect_code(0);
    let stopped = home.mur(&["stop", "h2"]);
    stopped.expect_code(0);
    assert!(stopped.stdout.contains(&holder), "{}", stopped.stdout);

    // Released with its session: the name is free again, and no claim file is left.
    let again = home.mur(&["run", "-d", "--name", "h2"]);
    again.expect_code(0);
    home.mur(&["stop", "h2"]).expect_code(0);
    wait_until(WAIT, "the claim file goes with the session", || {
        !home.running().join("h2.name").exists()
    });
}

#[test]
fn id_prefixes_address_sessions_and_ps_shows_ids_short_and_unique() {
    let home = Home::new();
    let a = home.start(&[]);
    let b = home.start(&[]);
    let ps = home.mur(&["ps"]);
    ps.expect_code(0);
    for session in [&a, &b] {
        let row = ps
            .stdout
            .lines()
            .find(|l| {
                l.split_whitespace()
                    .next()
                    .is_some_and(|c| session.id.starts_with(c))
            })
            .unwrap_or_else(|| panic!("no row for {}:\n{}", session.id, ps.stdout));
        let shown = row.split_whitespace().next().unwrap();
        assert!(shown.len() >= 16 && shown.len() < session.id.len(), "{row}");
        // What ps shows is an address.
        let logs = home.mur(&["logs", shown]);
        logs.expect_code(0);
    }
    // A prefix both share is ambiguous.
    let shared = &a.id[4..8];
    assert!(b.id[4..].starts_with(shared));
    let ambiguous = home.mur(&["logs", shared]);
    ambiguous.expect_code(1);
    assert!(
        ambiguous.stderr.contains("matches 2"),
        "{}",
        ambiguous.stderr
    );
    // Docker-style: hex digits alone, any unique prefix (here: past the shared time prefix).
    let differ =
        a.id.bytes()
            .zip(b.id.bytes())
            .take_while(|(x, y)| x == y)
            .count();
    let prefix = &b.id[4..(differ + 1).max(8)];
    let stop = home.mur(&["stop", prefix]);
    stop.expect_code(0);
    assert!(stop.stdout.contains(&b.id), "{}", stop.stdout);
    // Once b has ended, the shared prefix names the one running session: running ones first.
    let logs = home.mur(&["ps", "-q", "--status", "running"]);
    assert_eq!(logs.stdout.trim(), a.id);
    home.mur(&["logs", shared]).expect_code(0);
    let both = home.mur(&["ps", "-a", "--no-trunc"]);
    assert!(
        both.stdout.contains(&a.id) && both.stdout.contains(&b.id),
        "{}",
        both.stdout
    );
}

#[test]
fn formation_member_names_are_addresses() {
    let env = FormationFixture::new();
    let echo = "#!/bin/sh\ncat\n";
    env.write_member_capsule("alpha", &manifest("alpha", false, true), Some(echo));
    env.write_member_capsule("beta", &manifest("beta", true, true), Some(echo));
    let roster = env.roster(&json!({
        "members": [
            {"name": "alpha", "capsule": "alpha", "entry": true},
            {"name": "beta", "capsule": "beta"},
        ],
        "reachability": [{"from": "alpha", "to": ["beta"]}],
    }));
    let mut launcher = env.launch(&[roster.to_str().unwrap(), "--json"]);
    let ready = launcher.readiness();
    let frm = ready.formation_id();
    let beta = ready.session_id("beta");
    let expected = env.record(&beta)["door_token"]
        .as_str()
        .unwrap()
        .to_string();
    for address in [
        "beta".to_string(),
        format!("{frm}/beta"),
        format!("{}/beta", &frm[frm.len() - 6..]),
    ] {
        let out = env.mur(&["token", &address]);
        assert_eq!(out.code, Some(0), "{address}: {}", out.stderr);
        assert_eq!(out.stdout.trim(), expected, "{address}");
    }
    env.mur(&["token", &format!("{frm}/gamma")]).expect_code(1);
    let doc = env.mur(&["ps", "--json"]).json();
    let members: Vec<&str> = doc["capsules"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["member"].as_str())
        .collect();
    assert_eq!(members.len(), 2, "{doc}");
    launcher.signal(libc::SIGTERM);
    launcher.finish(WAIT);
}

/// A name's restarts read as one history: its runs listed together under its running session,
/// newest first, each with how many runs of the name came before it (RESTARTS, `restarts`),
/// counted for plain `ps` too; a session without a name has no count, and a home whose names
/// never restarted shows no RESTARTS column.
#[test]
fn a_names_restarts_are_one_history_in_ps() {
    let home = Home::new();
    home.mur(&["run", "-d", "--name", "api"]).expect_code(0);
    let ps = home.mur(&["ps"]);
    assert!(!ps.stdout.contains("RESTARTS"), "{}", ps.stdout);
    let mut runs = Vec::new();
    for _ in 0..3 {
        let started = home.mur(&["run", "-d", "--name", "web"]);
        started.expect_code(0);
        runs.push(started.stdout.trim().to_string());
        if runs.len() < 3 {
            home.mur(&["stop", "web"]).expect_code(0);
        }
    }
    home.mur(&["run", "--task", "x"]).expect_code(0);

    let all = home.mur(&["ps", "-a"]);
    let lines: Vec<&str> = all.stdout.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    let column = header
        .iter()
        .position(|h| *h == "RESTARTS")
        .expect("RESTARTS");
    let cells = |line: &str| -> (String, String) {
        let words: Vec<&str> = line.split_whitespace().collect();
        // STATUS of an ended row spans words; RESTARTS counts from the row's end (URL last).
        let from_end = header.len() - column;
        (
            words[1].to_string(),
            words[words.len() - from_end].to_string(),
        )
    };
    let web: Vec<(usize, String)> = lines[1..]
        .iter()
        .enumerate()
        .filter(|(_, l)| cells(l).0 == "web")
        .map(|(i, l)| (i, cells(l).1))
        .collect();
    let at: Vec<usize> = web.iter().map(|(i, _)| *i).collect();
    assert_eq!(at.len(), 3, "{}", all.stdout);
    assert_eq!(at[2] - at[0], 2, "a name's runs together: {}", all.stdout);
    let counts: Vec<&str> = web.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(counts, ["2", "1", "0"], "{}", all.stdout);
    assert!(lines[1 + at[0]].contains("running"), "{}", all.stdout);
    for (i, id) in runs.iter().rev().enumerate() {
        assert!(lines[1 + at[i]].starts_with(&id[..16]), "{}", all.stdout);
    }
    let unnamed = lines[1..].iter().find(|l| cells(l).0 == "-").unwrap();
    assert_eq!(cells(unnamed).1, "-", "{}", all.stdout);

    // Plain ps reads the ended records to count, and leaves what is not one alone: pruning and
    // saying so is ps -a's.
    let junk = home.murmur().join("ended").join("not-a-record.json");
    fs::write(&junk, "{").unwrap();
    let doc = home.mur(&["ps", "--json"]).json();
    assert!(junk.exists(), "plain ps removed a file in ended/");
    let restarts = |name: &str| {
        doc["capsules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .map(|c| c["restarts"].clone())
    };
    assert_eq!(restarts("web"), Some(json!(2)), "plain ps counts: {doc}");
    assert_eq!(restarts("api"), Some(json!(0)), "{doc}");
    let plain = home.mur(&["ps", "--format", "{{.name}} {{.restarts}}"]);
    assert!(plain.stdout.contains("web 2"), "{}", plain.stdout);
    assert!(junk.exists(), "plain ps removed a file in ended/");
    home.mur(&["ps", "-a"]).expect_code(0);
    assert!(!junk.exists(), "ps -a prunes what is not a record");
    home.mur(&["stop", "web", "api"]).expect_code(0);
}
