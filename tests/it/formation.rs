//! `mur formation` end to end (DESIGN.md §7, seed 002): the real binary launching real `mur run`
//! members with `/bin/sh` handlers, real lifelines, real doors. Every test has its own `HOME` and
//! project directory; "nothing left" is judged by pid (`kill(pid, 0)`, zombies counting as
//! gone) and by scanning `/proc` for any process carrying the test's `HOME`.

use crate::common;

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{
    formation::{
        FORMATION_DEADLINE, FormationFixture, Launcher, Readiness, manifest, rpc, send_text,
    },
    gate::Gate,
    http::{HttpAnswer, post},
    process::{alive, children_of, cmdline, environ, esrch, start_token},
    run::run,
    tokens::{b64_encode, token_payload, tokens_in_memory},
    wait::wait_until,
};
use serde_json::{Value, json};

/// How long members may take to be gone once their launcher has exited.
const GONE: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------------------------
// Formations the tests launch
// ---------------------------------------------------------------------------------------------

const REVIEWER: &str = "#!/bin/sh\nset -eu\ntext=$(cat)\nprintf 'reviewed[%s]\\n' \"$text\"\n";
const SUMMARIZER: &str = "#!/bin/sh\nset -eu\ntext=$(cat)\nprintf 'summary[%s]\\n' \"$text\"\n";
/// The entry member: asks both peers (one on stdin, one as an argument) and combines them.
const LEAD: &str = r#"#!/bin/sh
set -eu
text=$(cat)
r=$(printf '%s' "$text" | "$MUR" formation call reviewer -)
s=$("$MUR" formation call summarizer "$text")
printf 'lead: %s + %s\n' "$r" "$s"
"#;

/// lead (entry, running `lead_script`) calls reviewer and summarizer; every door authenticated.
fn three_members(env: &FormationFixture, lead_script: &str) -> PathBuf {
    env.write_member_capsule("lead", &manifest("lead", false, true), Some(lead_script));
    env.write_member_capsule(
        "reviewer",
        &manifest("reviewer", true, true),
        Some(REVIEWER),
    );
    env.write_member_capsule(
        "summarizer",
        &manifest("summarizer", true, true),
        Some(SUMMARIZER),
    );
    env.roster(&json!({
        "members": [
            {"name": "lead", "capsule": "lead", "entry": true},
            {"name": "reviewer", "capsule": "reviewer/murmur.json"},
            {"name": "summarizer", "capsule": "summarizer"},
        ],
        "reachability": [{"from": "lead", "to": ["reviewer", "summarizer"]}],
    }))
}

/// The three-member formation served (no `--task`), its readiness line read.
fn serve_three(env: &FormationFixture) -> (Launcher, Readiness) {
    let roster = three_members(env, LEAD);
    let mut launcher = env.launch(&[roster.to_str().unwrap(), "--json"]);
    let ready = launcher.readiness();
    (launcher, ready)
}

/// Fail unless the launcher, its members (by pid), every record and every process carrying
/// this test's `HOME` are gone. Members are the launcher's children, reaped before it exits, so
/// `kill(pid, 0)` must say ESRCH.
#[track_caller]
fn assert_all_gone(env: &FormationFixture, member_pids: &[u32]) {
    for &pid in member_pids {
        assert!(
            esrch(pid),
            "member pid {pid} still exists after its launcher exited"
        );
    }
    let records = env.running_files();
    assert!(records.is_empty(), "left in ~/.murmur/running: {records:?}");
    env.assert_nothing_running(GONE);
}

/// The `stopped:` line names every member as `name (pid N)`.
#[track_caller]
fn assert_stopped_line_names(stderr: &str, ready: &Readiness) {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("mur formation: stopped: "))
        .unwrap_or_else(|| panic!("no 'stopped:' line on stderr: {stderr}"));
    for member in ready.members() {
        let named = format!(
            "{} (pid {})",
            member["name"].as_str().unwrap(),
            member["pid"]
        );
        assert!(line.contains(&named), "{line:?} does not name {named}");
    }
}

// ---------------------------------------------------------------------------------------------
// A formation runs end to end
// ---------------------------------------------------------------------------------------------

#[test]
fn a_task_runs_through_three_members_and_the_formation_exits_with_the_entry_outcome() {
    let env = FormationFixture::new();
    let roster = three_members(&env, LEAD);
    let mut command = env.command(&["formation", roster.to_str().unwrap(), "--task", "hello"]);
    command.stdin(Stdio::null());
    let out = run(command, FORMATION_DEADLINE);
    out.expect_code(0);
    assert_eq!(out.stdout, "lead: reviewed[hello] + summary[hello]\n");
    // A completed --task is quiet on stderr (cron mails any output): no "stopped:" line.
    assert!(!out.stderr.contains("stopped: "), "{}", out.stderr);
    assert!(env.running_files().is_empty());
    env.assert_nothing_running(GONE);

    // The task from stdin, and the roster found as ./roster.json.
    let mut command = env.command(&["formation", "--task", "-"]);
    command.stdin(fs::File::open(env.project.join("lead/handler.sh")).unwrap());
    let out = run(command, FORMATION_DEADLINE);
    out.expect_code(0);
    assert!(
        out.stdout.starts_with("lead: reviewed[#!/bin/sh"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_failing_entry_handler_makes_the_formation_exit_1() {
    let env = FormationFixture::new();
    let failing = r#"#!/bin/sh
set -eu
r=$("$MUR" formation call reviewer "$(cat)")
echo "lead gives up after $r" >&2
exit 3
"#;
    let roster = three_members(&env, failing);
    let out = env.mur(&[
        "formation",
        roster.to_str().unwrap(),
        "--task",
        "x",
        "--json",
    ]);
    out.expect_code(1);
    // The readiness line, and no answer: the task failed.
    let mut lines = out.stdout.lines();
    let ready = Readiness(serde_json::from_str(lines.next().unwrap_or("")).unwrap());
    assert_eq!(lines.next(), None, "{}", out.stdout);
    assert_eq!(ready.members().len(), 3);
    assert!(
        out.stderr.contains("exited with code 3")
            && out.stderr.contains("lead gives up after reviewed[x]"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("stopped: "), "{}", out.stderr);
    // The entry member's own words are the formation's: the user never typed `mur run`.
    assert!(
        out.stderr.contains("mur formation: the task failed")
            && !out.stderr.lines().any(|l| l.starts_with("mur run")),
        "{}",
        out.stderr
    );
    assert_all_gone(&env, &ready.pids());
}

#[test]
fn a_served_formation_marks_every_record_is_listed_by_ps_and_leaves_nothing() {
    let env = FormationFixture::new();
    let (mut launcher, ready) = serve_three(&env);
    let frm = ready.formation_id();
    assert!(
        frm.starts_with("frm_") && frm.len() == 36,
        "formation id {frm}"
    );
    let members = ready.members();
    assert_eq!(members.len(), 3, "{}", ready.0);
    let entries: Vec<&Value> = members.iter().filter(|m| m["entry"] == true).collect();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["name"], "lead");

    // Every member's record names the formation, its lifeline and this launcher.
    let launcher_start = start_token(launcher.pid).expect("the launcher's start time");
    let records = env.records();
    assert_eq!(records.len(), 3, "{records:?}");
    for member in &members {
        let name = member["name"].as_str().unwrap();
        let sid = member["session_id"].as_str().unwrap();
        let record = env.record(sid);
        assert_eq!(record["formation_id"], frm.as_str(), "{name}: {record}");
        assert_eq!(record["formation_lifeline"], true, "{name}: {record}");
        assert_eq!(
            record["formation_launcher"],
            json!({"pid": launcher.pid, "process_start": launcher_start}),
            "{name}"
        );
        assert_eq!(record["pid"], member["pid"], "{name}");
        assert_eq!(record["url"], member["url"], "{name}");
        assert_eq!(record["capsule_name"], name);
        assert!(alive(member["pid"].as_u64().unwrap() as u32));
        // Peers work in ~/.murmur/formations/<frm>/<member>, the entry in the roster's directory.
        let workdir = if name == "lead" {
            env.project.clone()
        } else {
            env.formations().join(&frm).join(name)
        };
        assert_eq!(record["workdir"], json!(workdir), "{name}");
        // The launcher spawned every member itself.
        assert!(
            children_of(launcher.pid).contains(&(member["pid"].as_u64().unwrap() as u32)),
            "{name} is not the launcher's child"
        );
    }
    let marker: Value = serde_json::from_slice(
        &fs::read(env.formations().join(&frm).join("formation.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(marker["launcher_pid"], launcher.pid);
    assert_eq!(marker["launcher_start"], launcher_start.as_str());
    assert_eq!(marker["project_dir"], json!(env.project));

    // mur ps --json lists the three with the formation, and the formation itself.
    let ps = env.mur(&["ps", "--json"]);
    ps.expect_code(0);
    let listing: Value = serde_json::from_str(&ps.stdout).unwrap();
    let capsules = listing["capsules"].as_array().unwrap();
    assert_eq!(capsules.len(), 3, "{listing}");
    for capsule in capsules {
        assert_eq!(capsule["formation_id"], frm.as_str());
        assert_eq!(capsule["status"], "running", "{capsule}");
    }
    let formations = listing["formations"].as_array().unwrap();
    assert_eq!(formations.len(), 1, "{listing}");
    assert_eq!(formations[0]["formation_id"], frm.as_str());
    assert_eq!(formations[0]["running"], 3);
    assert_eq!(
        formations[0]["launcher"],
        json!({"pid": launcher.pid, "alive": true})
    );
    let mut listed: Vec<String> = formations[0]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    let mut expected: Vec<String> = members
        .iter()
        .map(|m| m["session_id"].as_str().unwrap().to_string())
        .collect();
    listed.sort();
    expected.sort();
    assert_eq!(listed, expected);
    assert!(!ps.stdout.contains("mdt1.") && !ps.stdout.contains("mft1."));

    // A task through the served entry member's door reaches both peers.
    let lead = env.record(&ready.session_id("lead"));
    let token = lead["door_token"]
        .as_str()
        .expect("the lead's door authenticates");
    let answer = post(
        &ready.url("lead"),
        Some(&format!("Bearer {token}")),
        &send_text("served"),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    let task = answer.json()["result"].clone();
    assert_eq!(task["status"]["state"], "completed", "{task}");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "lead: reviewed[served] + summary[served]"
    );

    // However it ends, nothing is left.
    launcher.signal(libc::SIGTERM);
    let status = launcher.finish(FORMATION_DEADLINE);
    assert_eq!(status.code(), Some(143), "stderr: {}", launcher.stderr());
    assert_stopped_line_names(&launcher.stderr(), &ready);
    assert_all_gone(&env, &ready.pids());
}

// ---------------------------------------------------------------------------------------------
// Signals, mur stop, SIGKILL
// ---------------------------------------------------------------------------------------------

fn signalled_launcher_exits(signal: i32, code: i32) {
    let env = FormationFixture::new();
    let (mut launcher, ready) = serve_three(&env);
    assert_eq!(env.records().len(), 3);
    launcher.signal(signal);
    let status = launcher.finish(FORMATION_DEADLINE);
    assert_eq!(status.code(), Some(code), "stderr: {}", launcher.stderr());
    assert_stopped_line_names(&launcher.stderr(), &ready);
    assert_all_gone(&env, &ready.pids());
}

#[test]
fn sigterm_to_the_launcher_exits_143_and_leaves_nothing() {
    signalled_launcher_exits(libc::SIGTERM, 143);
}

#[test]
fn sigint_to_the_launcher_exits_130_and_leaves_nothing() {
    signalled_launcher_exits(libc::SIGINT, 130);
}

#[test]
fn sighup_to_the_launcher_exits_129_and_leaves_nothing() {
    signalled_launcher_exits(libc::SIGHUP, 129);
}

#[test]
fn mur_stop_by_formation_suffix_stops_the_launcher_and_names_every_member() {
    let env = FormationFixture::new();
    let (mut launcher, ready) = serve_three(&env);
    let frm = ready.formation_id();
    let suffix = &frm[frm.len() - 8..];
    let out = env.mur(&["stop", suffix]);
    out.expect_code(0);
    let status = launcher.finish(FORMATION_DEADLINE);
    assert_eq!(status.code(), Some(143), "stderr: {}", launcher.stderr());
    let lines: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("stopped: "))
        .collect();
    assert_eq!(lines.len(), 4, "{}", out.stdout);
    assert!(
        lines.iter().any(|l| l.contains(&frm)
            && l.contains(&format!("launcher pid {}", launcher.pid))
            && l.contains("SIGTERM")),
        "no line for the launcher: {}",
        out.stdout
    );
    for member in ready.members() {
        let sid = member["session_id"].as_str().unwrap();
        assert!(
            lines.iter().any(|l| l.contains(sid)),
            "stop does not name {} ({sid}): {}",
            member["name"],
            out.stdout
        );
    }
    assert_stopped_line_names(&launcher.stderr(), &ready);
    assert_all_gone(&env, &ready.pids());
}

/// `mur formation -d` returns once every member is ready, printing the formation's id (the
/// readiness line with `--json`), the launcher serving on in the background; `mur stop` by that
/// id ends it all. A roster that cannot come up fails the command, saying why.
#[test]
fn a_detached_formation_returns_once_ready_and_stops_by_its_id() {
    let env = FormationFixture::new();
    let roster = three_members(&env, LEAD);
    let out = env.mur(&["formation", roster.to_str().unwrap(), "-d"]);
    out.expect_code(0);
    let frm = out.stdout.trim().to_string();
    assert!(
        frm.starts_with("frm_") && !frm.contains('\n'),
        "{}",
        out.stdout
    );
    let records = env.records();
    assert_eq!(records.len(), 3, "every member recorded once it returned");
    assert!(records.iter().all(|r| r["formation_id"] == frm.as_str()));
    let ps = env.mur(&["ps"]);
    assert!(
        ps.stdout.contains(&frm) && ps.stdout.contains("3 running"),
        "{}",
        ps.stdout
    );

    let stop = env.mur(&["stop", &frm]);
    stop.expect_code(0);
    assert_eq!(
        stop.stdout
            .lines()
            .filter(|l| l.starts_with("stopped: "))
            .count(),
        4,
        "the launcher and its three members: {}",
        stop.stdout
    );
    env.assert_nothing_running(GONE);
    assert!(env.running_files().is_empty());

    let json = env.mur(&["formation", roster.to_str().unwrap(), "-d", "--json"]);
    json.expect_code(0);
    let ready: Value = serde_json::from_str(&json.stdout).expect("the readiness line");
    assert_eq!(
        ready["members"].as_array().map(Vec::len),
        Some(3),
        "{ready}"
    );
    env.mur(&["stop", ready["formation_id"].as_str().unwrap()])
        .expect_code(0);
    env.assert_nothing_running(GONE);

    let task = env.mur(&["formation", roster.to_str().unwrap(), "-d", "--task", "x"]);
    task.expect_code(2);
    let broken = env.roster(&json!({"members": [
        {"name": "lead", "capsule": "nowhere", "entry": true},
    ]}));
    let out = env.mur(&["formation", broken.to_str().unwrap(), "-d"]);
    out.expect_code(1);
    assert!(out.stderr.contains("nowhere"), "{}", out.stderr);
}

#[test]
fn an_entry_member_killed_by_a_signal_ends_the_formation_with_128_plus_it() {
    let env = FormationFixture::new();
    let (mut launcher, ready) = serve_three(&env);
    let entry = ready.pid("lead");
    // SAFETY: kill(2) takes plain integers; the entry is a live member of this test's formation.
    assert_eq!(unsafe { libc::kill(entry as i32, libc::SIGKILL) }, 0);
    let status = launcher.finish(FORMATION_DEADLINE);
    assert_eq!(
        status.code(),
        Some(128 + libc::SIGKILL),
        "{}",
        launcher.stderr()
    );
    // The peers were still running when the launcher stopped them; the entry was not.
    let stderr = launcher.stderr();
    let line = stderr
        .lines()
        .find(|l| l.starts_with("mur formation: stopped: "))
        .unwrap_or_else(|| panic!("{stderr}"));
    for peer in ["reviewer", "summarizer"] {
        assert!(
            line.contains(&format!("{peer} (pid {})", ready.pid(peer))),
            "{line}"
        );
    }
    assert!(!line.contains("lead"), "{line}");
    for &pid in &ready.pids() {
        assert!(esrch(pid), "member {pid} left behind");
    }
    env.assert_nothing_running(GONE);
    // The SIGKILLed entry could not remove its record; the launcher, which reaped it, did.
    let left = env.records();
    assert!(left.is_empty(), "{left:?}");
    let ps = env.mur(&["ps", "--json"]);
    ps.expect_code(0);
    let listing: Value = serde_json::from_str(&ps.stdout).unwrap();
    assert_eq!(listing["capsules"], json!([]), "{listing}");
    assert!(env.records().is_empty());
}

#[test]
fn members_outlive_a_sigkilled_launcher_by_at_most_two_seconds() {
    // Orphans are reparented to the nearest subreaper: make that this test process, so the
    // members become our children once the launcher is gone and their exits can be timed. The
    // flag is the whole process's: alone in one of its own.
    if !common::alone::own_process(
        "formation::members_outlive_a_sigkilled_launcher_by_at_most_two_seconds",
    ) {
        return;
    }
    common::process::become_subreaper();
    let env = FormationFixture::new();
    let started = env.project.join("slow-started");
    let lead = "#!/bin/sh\nset -eu\n\"$MUR\" formation call slow \"$(cat)\"\n";
    let slow = format!(
        "#!/bin/sh\ncat >/dev/null\n: > '{}'\nsleep 30\necho too late\n",
        started.display()
    );
    env.write_member_capsule("lead", &manifest("lead", false, true), Some(lead));
    // Its marker is outside its workdir and capsule: declared, as its sandbox allows nothing else.
    let mut slow_manifest = manifest("slow", true, true);
    slow_manifest["sandbox"] = json!({"write": [&env.project]});
    env.write_member_capsule("slow", &slow_manifest, Some(&slow));
    env.write_member_capsule("idle", &manifest("idle", true, true), Some(REVIEWER));
    let roster = env.roster(&json!({
        "members": [
            {"name": "lead", "capsule": "lead", "entry": true},
            {"name": "slow", "capsule": "slow"},
            {"name": "idle", "capsule": "idle"},
        ],
        "reachability": [{"from": "lead", "to": ["slow"]}],
    }));
    let mut launcher = env.launch(&[roster.to_str().unwrap(), "--task", "go", "--json"]);
    let ready = launcher.readiness();
    let members = ready.pids();
    assert_eq!(members.len(), 3);
    // The entry's task is running and its call has reached the slow peer's handler.
    wait_until(FORMATION_DEADLINE, "the slow peer's handler", || {
        started.exists()
    });
    assert!(launcher.running());

    launcher.signal(libc::SIGKILL);
    let status = launcher.wait(FORMATION_DEADLINE);
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    let killed = Instant::now();

    // Each member must end on its own, by its lifeline, within 2 s.
    let mut ended: Vec<(u32, Option<i32>)> = Vec::new();
    let mut slowest = Duration::ZERO;
    while ended.len() < members.len() {
        for &pid in &members {
            if ended.iter().any(|(p, _)| *p == pid) {
                continue;
            }
            let mut wstatus = 0;
            // SAFETY: a live out-parameter for the status; WNOHANG never blocks.
            let reaped = unsafe { libc::waitpid(pid as i32, &mut wstatus, libc::WNOHANG) };
            if reaped == pid as i32 {
                let code = libc::WIFEXITED(wstatus).then(|| libc::WEXITSTATUS(wstatus));
                assert!(
                    code.is_some(),
                    "member {pid} was killed by a signal, not ended by its lifeline"
                );
                ended.push((pid, code));
                slowest = killed.elapsed();
            } else if esrch(pid) {
                // Reaped by someone else (no subreaper in effect): only its absence is known.
                ended.push((pid, None));
                slowest = killed.elapsed();
            }
        }
        assert!(
            killed.elapsed() < Duration::from_secs(2),
            "members still running 2 s after the launcher's SIGKILL: {:?} (ended: {ended:?})",
            members
                .iter()
                .filter(|p| !ended.iter().any(|(e, _)| e == *p))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        slowest < Duration::from_secs(2),
        "the last member ended {slowest:?} after the launcher's SIGKILL"
    );
    eprintln!("members ended {slowest:?} after the launcher's SIGKILL: {ended:?}");
    for (pid, code) in &ended {
        if let Some(code) = code {
            assert_eq!(*code, 143, "member {pid} did not end through its lifeline");
        }
    }
    // They ended in order: their records are removed, and their handlers (the slow `sleep`,
    // the entry's `mur formation call`) are gone with them.
    let left = env.running_files();
    assert!(left.is_empty(), "records left behind: {left:?}");
    env.assert_nothing_running(Duration::from_millis(500));
    assert!(!launcher.stdout().contains("too late"));
}

// ---------------------------------------------------------------------------------------------
// Refused launches
// ---------------------------------------------------------------------------------------------

#[test]
fn a_peer_whose_handler_is_missing_is_refused_by_admission_and_nothing_starts() {
    let env = FormationFixture::new();
    three_members(&env, LEAD);
    let mut broken = manifest("summarizer", true, true);
    broken["run"] = json!(["./missing.sh"]);
    env.write_member_capsule("summarizer", &broken, None);
    fs::remove_file(env.project.join("summarizer/handler.sh")).unwrap();
    let out = env.mur(&["formation", "--task", "x"]);
    out.expect_code(1);
    let manifest_path = env.project.join("summarizer/murmur.json");
    assert!(
        out.stderr.starts_with("mur formation: ")
            && out.stderr.contains("member 'summarizer'")
            && out.stderr.contains(&manifest_path.display().to_string())
            && out.stderr.contains("missing.sh"),
        "{}",
        out.stderr
    );
    assert!(
        env.formation_dirs().is_empty(),
        "{:?}",
        env.formation_dirs()
    );
    assert!(env.running_files().is_empty());
    env.assert_nothing_running(GONE);
}

/// A peer whose `mur run` exits before its readiness line. The deterministic way: the peer's
/// capsule path is `/proc/self/fd/0/murmur.json`. The launcher, whose stdin the test makes the
/// capsule's directory, admits it (and binds its sha256); the member's `mur run` is given
/// `/dev/null` as stdin, so the same path names no manifest there and it exits 1 before it is
/// ready — the same failure as a manifest changed between admission and start.
#[test]
fn a_peer_that_exits_before_it_is_ready_refuses_the_launch_and_stops_the_rest() {
    let env = FormationFixture::new();
    env.write_member_capsule("lead", &manifest("lead", false, false), Some(REVIEWER));
    env.write_member_capsule("good", &manifest("good", false, false), Some(REVIEWER));
    let bad_dir = env.write_member_capsule("bad", &manifest("bad", false, false), Some(REVIEWER));
    let roster = env.roster(&json!({
        "members": [
            {"name": "lead", "capsule": "lead", "entry": true},
            {"name": "good", "capsule": "good"},
            {"name": "bad", "capsule": "/proc/self/fd/0/murmur.json"},
        ],
    }));
    let mut command = env.command(&["formation", roster.to_str().unwrap(), "--json"]);
    command.stdin(fs::File::open(&bad_dir).unwrap());
    let out = run(command, FORMATION_DEADLINE);
    out.expect_code(1);
    assert_eq!(out.stdout, "", "a refused formation announces nothing");
    assert!(
        out.stderr.contains(
            "mur formation: the formation was not launched: bad: exited before it was ready"
        ),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("good:"), "{}", out.stderr);
    // The good peer had been started (its workdir exists) and was stopped with the rest.
    let dirs = env.formation_dirs();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    assert!(env.formations().join(&dirs[0]).join("good").is_dir());
    assert!(env.running_files().is_empty(), "{:?}", env.running_files());
    env.assert_nothing_running(GONE);
}

/// A peer whose door never answers as its session. The deterministic way: `~/.murmur/running`
/// is a file, so no member can write its record (each runs on, unaddressable, as the seed
/// says). A public door still names its session on its card; an authenticated one names it
/// only on the extended card, which needs the operator token from the record — so the
/// authenticated peer's door never proves itself, and it misses its (1 s) deadline.
#[test]
fn a_peer_whose_door_never_answers_misses_its_deadline_and_nothing_is_left() {
    let env = FormationFixture::new();
    fs::create_dir_all(env.home.join(".murmur")).unwrap();
    fs::write(env.running(), b"not a directory").unwrap();
    env.write_member_capsule("lead", &manifest("lead", false, false), Some(REVIEWER));
    env.write_member_capsule("open", &manifest("open", false, false), Some(REVIEWER));
    env.write_member_capsule("guarded", &manifest("guarded", false, true), Some(REVIEWER));
    let roster = env.roster(&json!({
        "members": [
            {"name": "lead", "capsule": "lead", "entry": true},
            {"name": "open", "capsule": "open"},
            {"name": "guarded", "capsule": "guarded"},
        ],
    }));
    let began = Instant::now();
    let out = env.mur(&[
        "formation",
        roster.to_str().unwrap(),
        "--json",
        "--ready-timeout",
        "1",
    ]);
    let took = began.elapsed();
    out.expect_code(1);
    assert_eq!(out.stdout, "");
    // Two clocks share the deadline: the launcher's own, and the probe that gives up on it.
    assert!(
        out.stderr
            .contains("mur formation: the formation was not launched: guarded: ")
            && (out.stderr.contains("guarded: not ready within 1s")
                || out
                    .stderr
                    .contains("guarded: its door never answered as its session")),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("open:"), "{}", out.stderr);
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(10),
        "{took:?}"
    );
    env.assert_nothing_running(GONE);
}

// ---------------------------------------------------------------------------------------------
// Door security and calls
// ---------------------------------------------------------------------------------------------

/// `token` as an `Authorization` header value.
fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// Fail unless `answer` is a 401 that names the Bearer realm and nothing else.
fn assert_401(answer: &HttpAnswer, what: &str) {
    assert_eq!(answer.status, 401, "{what}: {answer:?}");
    assert!(
        answer.head.contains("WWW-Authenticate: Bearer realm="),
        "{what}: {answer:?}"
    );
}

/// A formation token carrying `payload` under a made-up MAC.
fn crafted_token(payload: &Value) -> String {
    let payload = b64_encode(payload.to_string().as_bytes());
    format!("mft1.{payload}.{}", b64_encode(&[7u8; 32]))
}

/// The genuine lead→reviewer token, read from the entry member's memory (it is nowhere else:
/// that is the point). The entry member holds one per callee.
fn lead_to_reviewer_token(ready: &Readiness) -> String {
    let tokens = tokens_in_memory(ready.pid("lead"), "mft1.")
        .expect("read the entry member's memory (needs ptrace access to own processes)");
    let to_reviewer = tokens
        .iter()
        .find(|t| token_payload(t)["to"] == "reviewer")
        .unwrap_or_else(|| panic!("no lead→reviewer token in {tokens:?}"))
        .clone();
    assert_eq!(
        token_payload(&to_reviewer),
        json!({"formation": ready.formation_id(), "from": "lead", "to": "reviewer"})
    );
    to_reviewer
}

/// At its own door the member token is a member caller: it runs tasks, sees only the ones it
/// started, and holds only the call methods. Returns the reviewer's operator token.
fn assert_member_token_calls_at_its_door(
    env: &FormationFixture,
    ready: &Readiness,
    to_reviewer: &str,
    probe: &Value,
) -> String {
    let reviewer = ready.url("reviewer");
    // Accepted (the task simply does not exist) ...
    let answer = post(&reviewer, Some(&bearer(to_reviewer)), probe);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.json()["error"]["code"], -32001);
    // ... it runs tasks there, and sees only the ones it started.
    let answer = post(&reviewer, Some(&bearer(to_reviewer)), &send_text("by lead"));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.json()["result"]["status"]["state"], "completed");
    let operator = env.record(&ready.session_id("reviewer"))["door_token"]
        .as_str()
        .unwrap()
        .to_string();
    let own = post(
        &reviewer,
        Some(&bearer(&operator)),
        &send_text("by operator"),
    )
    .json();
    let own_id = own["result"]["id"].as_str().unwrap().to_string();
    let peek = post(
        &reviewer,
        Some(&bearer(to_reviewer)),
        &rpc("tasks/get", json!({"id": own_id})),
    );
    assert_eq!(peek.json()["error"]["code"], -32001, "{peek:?}");
    // A member token holds only the call methods.
    let stop = post(
        &reviewer,
        Some(&bearer(to_reviewer)),
        &rpc("session/stop", json!({})),
    );
    assert_eq!(stop.status, 403, "{stop:?}");
    operator
}

/// Replayed at another member's door: 401, whoever that member is — it does not verify there,
/// and what an unverified token says about itself decides nothing; a crafted token naming this
/// formation and another member is 401 the same way, whatever its MAC.
fn assert_member_token_forbidden_elsewhere(ready: &Readiness, to_reviewer: &str, probe: &Value) {
    let answer = post(&ready.url("summarizer"), Some(&bearer(to_reviewer)), probe);
    assert_eq!(answer.status, 401, "replay at summarizer: {answer:?}");
    let answer = post(&ready.url("lead"), Some(&bearer(to_reviewer)), probe);
    assert_eq!(answer.status, 401, "replay at lead: {answer:?}");
    let crafted = crafted_token(
        &json!({"formation": ready.formation_id(), "from": "lead", "to": "summarizer"}),
    );
    let answer = post(&ready.url("reviewer"), Some(&bearer(&crafted)), probe);
    assert_eq!(answer.status, 401, "{answer:?}");
}

/// Forged, truncated, garbage or foreign tokens, and another door's operator token: 401,
/// never saying why.
fn assert_bad_tokens_unauthorized(
    ready: &Readiness,
    to_reviewer: &str,
    operator: &str,
    probe: &Value,
) {
    let reviewer = ready.url("reviewer");
    let parts: Vec<&str> = to_reviewer.split('.').collect();
    let mac = parts[2];
    let flipped = format!(
        "{}{}",
        if mac.starts_with('A') { "B" } else { "A" },
        &mac[1..]
    );
    let forged = format!("mft1.{}.{flipped}", parts[1]);
    assert_401(
        &post(&reviewer, Some(&bearer(&forged)), probe),
        "forged MAC",
    );
    assert_401(
        &post(
            &reviewer,
            Some(&bearer(&to_reviewer[..to_reviewer.len() - 5])),
            probe,
        ),
        "truncated",
    );
    assert_401(
        &post(
            &reviewer,
            Some(&bearer(&format!("mft1.{}", parts[1]))),
            probe,
        ),
        "no MAC",
    );
    let self_claim = crafted_token(
        &json!({"formation": ready.formation_id(), "from": "lead", "to": "reviewer"}),
    );
    assert_401(
        &post(&reviewer, Some(&bearer(&self_claim)), probe),
        "crafted for this door",
    );
    let foreign = crafted_token(
        &json!({"formation": "frm_0199c4e2f1b7712a9d3e4f5061728390", "from": "lead", "to": "summarizer"}),
    );
    assert_401(
        &post(&reviewer, Some(&bearer(&foreign)), probe),
        "another formation",
    );
    assert_401(
        &post(&reviewer, Some("Bearer mft1.abc.def"), probe),
        "garbage",
    );
    assert_401(&post(&reviewer, None, probe), "no header");
    assert_401(
        &post(&reviewer, Some(to_reviewer), probe),
        "no Bearer scheme",
    );
    // One member's operator token is nothing at another member's door.
    assert_401(
        &post(&ready.url("summarizer"), Some(&bearer(operator)), probe),
        "another door's operator token",
    );
}

#[test]
fn member_doors_take_only_their_own_formation_tokens() {
    let env = FormationFixture::new();
    let (mut launcher, ready) = serve_three(&env);
    let probe = rpc("tasks/get", json!({"id": "tsk_nothing"}));
    let to_reviewer = lead_to_reviewer_token(&ready);
    let operator = assert_member_token_calls_at_its_door(&env, &ready, &to_reviewer, &probe);
    assert_member_token_forbidden_elsewhere(&ready, &to_reviewer, &probe);
    assert_bad_tokens_unauthorized(&ready, &to_reviewer, &operator, &probe);

    launcher.signal(libc::SIGTERM);
    assert_eq!(launcher.finish(FORMATION_DEADLINE).code(), Some(143));
    assert_all_gone(&env, &ready.pids());
}

#[test]
fn a_call_the_roster_does_not_grant_is_refused_to_the_handler() {
    let env = FormationFixture::new();
    let reached = env.project.join("summarizer-reached");
    // lead may call reviewer only; summarizer accepts peer tasks but is not lead's callee.
    let lead = r#"#!/bin/sh
set -u
text=$(cat)
if out=$("$MUR" formation call summarizer "$text" 2>&1); then rc=0; else rc=$?; fi
printf 'denied rc=%s: %s\n' "$rc" "$out"
printf 'allowed: %s\n' "$("$MUR" formation call reviewer "$text")"
"#;
    let summarizer = format!("#!/bin/sh\n: > '{}'\ncat\n", reached.display());
    env.write_member_capsule("lead", &manifest("lead", false, true), Some(lead));
    env.write_member_capsule(
        "reviewer",
        &manifest("reviewer", true, true),
        Some(REVIEWER),
    );
    env.write_member_capsule(
        "summarizer",
        &manifest("summarizer", true, true),
        Some(&summarizer),
    );
    let roster = json!({
        "members": [
            {"name": "lead", "capsule": "lead", "entry": true},
            {"name": "reviewer", "capsule": "reviewer"},
            {"name": "summarizer", "capsule": "summarizer"},
        ],
        "reachability": [{"from": "lead", "to": ["reviewer"]}],
    });
    env.roster(&roster);
    let out = env.mur(&["formation", "--task", "hi"]);
    out.expect_code(0);
    let mut lines = out.stdout.lines();
    let denied = lines.next().unwrap_or_default();
    assert!(
        denied.starts_with("denied rc=1: mur formation: ")
            && denied.contains("lead may not call 'summarizer'")
            && denied.contains("the roster lets it call: reviewer"),
        "{}",
        out.stdout
    );
    // The same socket still serves a call the roster grants.
    assert_eq!(
        lines.next(),
        Some("allowed: reviewed[hi]"),
        "{}",
        out.stdout
    );
    assert!(!reached.exists(), "the refused call reached summarizer");

    // A handler that does not catch it fails its task, and the formation says why.
    let strict = "#!/bin/sh\nset -eu\n\"$MUR\" formation call summarizer \"$(cat)\"\n";
    env.write_member_capsule("lead", &manifest("lead", false, true), Some(strict));
    let out = env.mur(&["formation", "--task", "hi"]);
    out.expect_code(1);
    assert!(
        out.stderr.contains("the task failed") && out.stderr.contains("may not call 'summarizer'"),
        "{}",
        out.stderr
    );
    assert!(!reached.exists(), "the refused call reached summarizer");
    env.assert_nothing_running(GONE);
}

#[test]
fn mur_formation_call_outside_a_member_handler_is_refused() {
    let env = FormationFixture::new();
    let out = env.mur(&["formation", "call", "reviewer", "hello"]);
    out.expect_code(1);
    assert!(
        out.stderr.starts_with("mur formation: ")
            && out
                .stderr
                .contains("works only inside a formation member's handler"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout, "");
}

/// A member the roster lets call no one gets no call socket, and `mur formation call` says why
/// rather than claiming it is outside a handler.
#[test]
fn a_member_granted_no_calls_is_told_so() {
    let env = FormationFixture::new();
    env.write_member_capsule(
        "solo",
        &manifest("solo", false, false),
        Some("#!/bin/sh\ncat >/dev/null\n\"$MUR\" formation call anyone hello\n"),
    );
    let roster =
        env.roster(&json!({"members": [{"name": "solo", "capsule": "solo", "entry": true}]}));
    let out = env.mur(&["formation", roster.to_str().unwrap(), "--task", "x"]);
    out.expect_code(1);
    assert!(
        out.stderr
            .contains("may call no one: the roster grants it no calls"),
        "{}",
        out.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// No token leaks
// ---------------------------------------------------------------------------------------------

/// Three members that all call each other, every handler dumping what it sees: its
/// environment, its argv, and its inherited descriptors' targets. The entry member also has
/// control (a ctl1 token in a .control file), the reviewer a declared credential (a second
/// mdt1 token in its record). Returns the roster.
fn three_self_dumping_members(env: &FormationFixture) -> PathBuf {
    let dump = r#"echo "== $MUR_CAPSULE"; env; cat /proc/$$/cmdline | tr '\0' ' '; echo; ls -l /proc/$$/fd"#;
    let lead = format!(
        "#!/bin/sh\nset -eu\ntext=$(cat)\n{dump}\n\"$MUR\" formation call reviewer \"$text\"\n\"$MUR\" formation call summarizer \"$text\"\n"
    );
    let peer = format!("#!/bin/sh\nset -eu\ncat >/dev/null\n{dump}\n");
    let mut lead_manifest = manifest("lead", false, true);
    lead_manifest["control"] = json!({"settings": ["MODE"], "secrets": ["KEY"]});
    let mut reviewer_manifest = manifest("reviewer", true, true);
    reviewer_manifest["network"]["authentication"]["credentials"] =
        json!([{"name": "client", "scopes": ["message/send"]}]);
    env.write_member_capsule("lead", &lead_manifest, Some(&lead));
    env.write_member_capsule("reviewer", &reviewer_manifest, Some(&peer));
    env.write_member_capsule(
        "summarizer",
        &manifest("summarizer", true, true),
        Some(&peer),
    );
    env.roster(&json!({
        "members": [
            {"name": "lead", "capsule": "lead", "entry": true},
            {"name": "reviewer", "capsule": "reviewer"},
            {"name": "summarizer", "capsule": "summarizer"},
        ],
        "reachability": "all",
    }))
}

/// Every token that exists: the records' door tokens and credentials, the control token, and
/// the formation tokens each member holds in memory.
fn every_token(env: &FormationFixture, ready: &Readiness) -> Vec<String> {
    let mut secrets: Vec<String> = Vec::new();
    for record in env.records() {
        secrets.push(record["door_token"].as_str().unwrap().to_string());
        if let Some(credentials) = record["credentials"].as_object() {
            secrets.extend(
                credentials
                    .values()
                    .map(|v| v.as_str().unwrap().to_string()),
            );
        }
    }
    let control_files: Vec<String> = env
        .running_files()
        .into_iter()
        .filter(|n| n.ends_with(".control"))
        .collect();
    assert_eq!(control_files.len(), 1, "{control_files:?}");
    let control = fs::read_to_string(env.running().join(&control_files[0])).unwrap();
    assert!(control.trim().starts_with("ctl1."), "{control}");
    secrets.push(control.trim().to_string());
    for member in ready.members() {
        let pid = member["pid"].as_u64().unwrap() as u32;
        let held = tokens_in_memory(pid, "mft1.").expect("read a member's memory");
        secrets.extend(held);
    }
    secrets
}

/// Fail if `bytes` (described as `what`) hold any token prefix or any of `secrets`.
fn assert_clean(secrets: &[String], what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for prefix in ["mft1.", "mdt1.", "ctl1."] {
        assert!(
            !text.contains(prefix),
            "{what} holds a {prefix} token: {text}"
        );
    }
    for secret in secrets {
        assert!(!text.contains(secret.as_str()), "{what} holds a token");
    }
}

/// A task through the entry member: every handler's view of itself comes back, and holds no
/// token.
fn assert_handlers_see_no_token(env: &FormationFixture, ready: &Readiness, secrets: &[String]) {
    let operator = env.record(&ready.session_id("lead"))["door_token"]
        .as_str()
        .unwrap()
        .to_string();
    let answer = post(
        &ready.url("lead"),
        Some(&format!("Bearer {operator}")),
        &send_text("look around"),
    );
    let task = answer.json()["result"].clone();
    assert_eq!(task["status"]["state"], "completed", "{task}");
    let seen = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    for capsule in ["lead@1.0.0", "reviewer@1.0.0", "summarizer@1.0.0"] {
        assert!(seen.contains(&format!("== {capsule}")), "{seen}");
    }
    assert!(seen.contains("MURMUR_FORMATION_ID="), "{seen}");
    assert!(seen.contains("MURMUR_CALL_FD="), "{seen}");
    assert!(!seen.contains("MURMUR_FORMATION_LIFELINE"), "{seen}");
    assert!(!seen.contains("MURMUR_FORMATION_CHANNEL"), "{seen}");
    assert_clean(secrets, "what the handlers saw", seen.as_bytes());
}

/// The launcher and every member: no token in their environment or argv.
fn assert_no_token_in_environ_or_argv(pids: &[u32], secrets: &[String]) {
    for &pid in pids {
        let environ = environ(pid);
        assert!(!environ.is_empty(), "cannot read the environment of {pid}");
        assert_clean(secrets, &format!("/proc/{pid}/environ"), &environ);
        let argv = cmdline(pid);
        assert!(!argv.is_empty());
        assert_clean(
            secrets,
            &format!("/proc/{pid}/cmdline"),
            argv.join(" ").as_bytes(),
        );
    }
}

/// No file but a record or a control file holds one: none under the formations directory or
/// the project.
fn assert_no_token_in_files(env: &FormationFixture, secrets: &[String]) {
    let mut stack = vec![env.formations(), env.project.clone()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                assert_clean(
                    secrets,
                    &path.display().to_string(),
                    &fs::read(&path).unwrap(),
                );
            }
        }
    }
}

#[test]
fn no_token_reaches_argv_the_environment_output_or_a_handler() {
    let env = FormationFixture::new();
    let roster = three_self_dumping_members(&env);
    let mut launcher = env.launch(&[roster.to_str().unwrap(), "--json"]);
    let ready = launcher.readiness();

    let secrets = every_token(&env, &ready);
    // lead → reviewer, lead → summarizer, reviewer → summarizer, summarizer → reviewer.
    let formation_tokens = secrets.iter().filter(|s| s.starts_with("mft1.")).count();
    assert!(
        formation_tokens >= 4,
        "{formation_tokens} formation tokens found"
    );
    assert!(secrets.iter().filter(|s| s.starts_with("mdt1.")).count() >= 4);

    assert_handlers_see_no_token(&env, &ready, &secrets);
    let mut pids = vec![launcher.pid];
    pids.extend(ready.pids());
    assert_no_token_in_environ_or_argv(&pids, &secrets);
    assert_no_token_in_files(&env, &secrets);

    launcher.signal(libc::SIGTERM);
    assert_eq!(launcher.finish(FORMATION_DEADLINE).code(), Some(143));
    // Everything the launcher and its members printed.
    assert_clean(
        &secrets,
        "the launcher's stdout",
        launcher.stdout().as_bytes(),
    );
    assert_clean(
        &secrets,
        "the launcher's and members' stderr",
        launcher.stderr().as_bytes(),
    );
    assert!(launcher.stderr().contains("stopped: "));
    assert_all_gone(&env, &ready.pids());
}

// ---------------------------------------------------------------------------------------------
// Admission: a refused roster starts nothing
// ---------------------------------------------------------------------------------------------
//
// Each of admission's refusals, and the order in which they win, is a case of the table-driven
// unit test in src/formation/admission.rs. Here, once, end to end: the real binary on a bad
// roster exits 1 with the refusal, and nothing was started.

#[test]
fn a_refused_roster_exits_1_naming_the_refusal_and_starts_nothing() {
    let env = FormationFixture::new();
    // b calls c (both authenticated, c accepting peer tasks); a, the entry, has a public door,
    // which admission's last check refuses while any member calls another.
    env.write_member_capsule("a", &manifest("a", false, false), Some(REVIEWER));
    env.write_member_capsule("b", &manifest("b", true, true), Some(REVIEWER));
    env.write_member_capsule("c", &manifest("c", true, true), Some(REVIEWER));
    let members = json!([
        {"name": "a", "capsule": "a", "entry": true},
        {"name": "b", "capsule": "b", "entry": false},
        {"name": "c", "capsule": "c", "entry": false},
    ]);
    env.roster(&json!({"members": members, "reachability": [{"from": "b", "to": ["c"]}]}));

    // No ROSTER argument: ./roster.json in the project directory.
    let out = env.mur(&["formation", "--json"]);
    out.expect_code(1);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.starts_with("mur formation: roster.json: "),
        "{}",
        out.stderr
    );
    let path = env.project.join("a/murmur.json").display().to_string();
    for fragment in [
        "member 'a'",
        "must authenticate",
        "network.authentication",
        &path,
    ] {
        assert!(
            out.stderr.contains(fragment),
            "{fragment:?} not in {}",
            out.stderr
        );
    }
    assert!(
        env.formation_dirs().is_empty(),
        "{:?}",
        env.formation_dirs()
    );
    assert!(env.running_files().is_empty());
    env.assert_nothing_running(Duration::ZERO);

    // Without any edge the same members are admitted, and the formation runs.
    env.roster(&json!({"members": members}));
    env.mur(&["formation", "--task", "fine"]).expect_code(0);

    // A roster wrong in several ways: every problem at once, each under its key path.
    let before = env.formation_dirs();
    env.roster(
        &json!({"members": [{"name": 1, "capsule": "a", "entry": "yes"}],
        "reachability": "some"}),
    );
    let out = env.mur(&["formation", "--task", "x"]);
    out.expect_code(1);
    assert_eq!(
        out.stderr,
        "mur formation: roster.json: 3 problems:\n  \
         members[0].name: expected a string, found the number 1\n  \
         members[0].entry: expected true or false, found a string\n  \
         reachability: 'some' is not one of all\n"
    );
    assert_eq!(env.formation_dirs(), before, "nothing started");
}

/// A peer's answer streams all the way: the peer's handler writes a line, the calling handler's
/// `mur formation call` prints it at once, the entry's `--task` answer carries it, and the
/// launcher's stdout shows it — all while the peer's handler still waits to write the rest.
#[test]
fn a_peer_answer_streams_through_call_and_the_formation_task() {
    let env = FormationFixture::new();
    let gate = Gate::at(env.project.join("release"));
    let lead = "#!/bin/sh\nset -eu\n\"$MUR\" formation call steps \"$(cat)\"\n";
    let steps = gate.two_steps();
    env.write_member_capsule("lead", &manifest("lead", false, true), Some(lead));
    env.write_member_capsule("steps", &manifest("steps", true, true), Some(&steps));
    let roster = env.roster(&json!({
        "members": [
            {"name": "lead", "capsule": "lead", "entry": true},
            {"name": "steps", "capsule": "steps"},
        ],
        "reachability": [{"from": "lead", "to": ["steps"]}],
    }));
    let mut launcher = env.launch(&[roster.to_str().unwrap(), "--task", "go", "--json"]);
    launcher.readiness();
    let first = launcher.line(FORMATION_DEADLINE);
    gate.open();
    assert_eq!(
        first, "first",
        "printed while the peer's handler still waits"
    );
    assert_eq!(launcher.line(FORMATION_DEADLINE), "second");
    assert!(launcher.finish(FORMATION_DEADLINE).success());
}
