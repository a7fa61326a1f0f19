//! `mur ps` against real processes, real doors and a throwaway `HOME` (DESIGN.md §3, §4, §6).

use crate::common;

use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{
    door::{Door, DoorSpec},
    home::{Home, mode_of},
    http::dead_url,
    process::{Proc, exited_pid, mkfifo, start_token},
    records::{
        formation_id, ps_row, ps_rows, record, record_for, session_id, status_of, write_private,
    },
    run::{PATIENT_DEADLINE, mur_bin, run},
    session::Session,
    wait::wait_until,
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

/// The table row of `mur ps` for `session_id`, split on whitespace: the one whose first cell
/// (the id as the table shows it, shortened) begins `session_id`.
fn row<'a>(stdout: &'a str, session_id: &str) -> Option<Vec<&'a str>> {
    stdout
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .find(|cells| {
            cells
                .first()
                .is_some_and(|c| c.starts_with("ses_") && session_id.starts_with(c))
        })
}

/// Exactly the pruning lines of `-v` stderr.
fn pruned_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("mur ps: pruned "))
        .collect()
}

#[test]
fn an_empty_home_lists_no_running_capsules_and_creates_nothing() {
    let home = Home::patient();
    let run = home.mur(&["ps"]);
    run.expect_code(0);
    assert_eq!(run.stdout, "no running capsules\n");
    assert_eq!(run.stderr, "");
    assert!(
        !home.murmur().exists(),
        "a reader must leave a missing ~/.murmur missing"
    );

    let run = home.mur(&["ps", "--json"]);
    run.expect_code(0);
    assert_eq!(run.json(), json!({"capsules": [], "formations": []}));

    // An existing, empty running directory is an empty machine too.
    home.running_dir();
    let run = home.mur(&["ps"]);
    run.expect_code(0);
    assert_eq!(run.stdout, "no running capsules\n");
    assert_eq!(run.stderr, "");
}

#[test]
fn records_of_exited_processes_are_pruned_and_counted() {
    // Without -v: a count on stderr.
    let home = Home::patient();
    let mut ids = vec![];
    for _ in 0..2 {
        let (pid, start) = exited_pid();
        let id = session_id();
        home.write_record(&record(&id, pid, &start, &dead_url()));
        ids.push(id);
    }
    home.write_control(&ids[0], "ctl1.payload.mac");
    let run = home.mur(&["ps"]);
    run.expect_code(0);
    assert_eq!(run.stdout, "no running capsules\n");
    assert!(
        run.stderr.contains("pruned 2 stale records"),
        "stderr: {}",
        run.stderr
    );
    assert_eq!(
        home.running_entries(),
        Vec::<String>::new(),
        "records and the control file that went with one are gone"
    );

    // With -v: one line per record, naming its file and why.
    let home = Home::patient();
    let (pid, start) = exited_pid();
    let id = session_id();
    let path = home.write_record(&record(&id, pid, &start, &dead_url()));
    let run = home.mur(&["ps", "-v"]);
    run.expect_code(0);
    let lines = pruned_lines(&run.stderr);
    assert_eq!(lines.len(), 1, "stderr: {}", run.stderr);
    assert!(
        lines[0].contains(&path.display().to_string()),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains(&format!("no process holds pid {pid}")),
        "{}",
        lines[0]
    );
    assert!(!path.exists());
}

#[test]
fn a_reused_pid_is_pruned_and_never_signalled() {
    let home = Home::patient();
    let mut sleeper = Proc::sleeper();
    let real: u64 = sleeper.start().parse().unwrap();
    let id = session_id();
    let path = home.write_record(&record(
        &id,
        sleeper.pid(),
        &(real + 1).to_string(),
        &dead_url(),
    ));
    let run = home.mur(&["ps", "-v"]);
    run.expect_code(0);
    assert_eq!(run.stdout, "no running capsules\n");
    let lines = pruned_lines(&run.stderr);
    assert_eq!(lines.len(), 1, "stderr: {}", run.stderr);
    assert!(lines[0].contains("another time"), "{}", lines[0]);
    assert!(!path.exists(), "the record of a reused pid is pruned");
    // ps never signals anything; and whatever holds the pid now is certainly not ours to end.
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        sleeper.alive(),
        "the process holding the reused pid was hurt"
    );
}

#[test]
fn a_live_process_without_a_door_is_unreachable_and_kept() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let id = session_id();
    let path = home.write_record(&record_for(&id, &sleeper, &dead_url()));

    let run = home.mur(&["ps"]);
    run.expect_code(0);
    let cells = row(&run.stdout, &id).unwrap_or_else(|| panic!("not listed:\n{}", run.stdout));
    assert_eq!(cells[3], "unreachable", "{cells:?}");
    assert_eq!(run.stderr, "", "nothing pruned, nothing to say");
    assert!(
        path.exists(),
        "an unreachable live session's record is kept"
    );

    let doc = home.mur(&["ps", "--json"]).json();
    assert_eq!(status_of(&doc, &id).as_deref(), Some("unreachable"));
    let reason = ps_row(&doc, &id).unwrap()["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!reason.is_empty());
    assert!(path.exists());
}

#[test]
fn a_door_answering_for_another_session_is_unreachable_and_kept() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let id = session_id();
    let other = session_id();
    let door = Door::public(&other);
    let path = home.write_record(&record_for(&id, &sleeper, &door.url()));

    let run = home.mur(&["ps", "--json"]);
    run.expect_code(0);
    let doc = run.json();
    assert_eq!(status_of(&doc, &id).as_deref(), Some("unreachable"));
    let reason = ps_row(&doc, &id).unwrap()["reason"].as_str().unwrap();
    assert!(reason.contains(&other), "reason: {reason}");
    assert!(path.exists());
    assert!(
        !door.seen_of("/.well-known/agent-card.json").is_empty(),
        "the door was asked"
    );
}

#[test]
fn a_zombie_is_pruned() {
    let home = Home::patient();
    let mut cat = Proc::cat_on_pipe();
    let id = session_id();
    let path = home.write_record(&record_for(&id, &cat, &dead_url()));
    drop(cat.take_stdin());
    wait_until(WAIT, "cat to exit unreaped", || cat.is_zombie());

    let run = home.mur(&["ps", "-v"]);
    run.expect_code(0);
    assert_eq!(run.stdout, "no running capsules\n");
    assert_eq!(pruned_lines(&run.stderr).len(), 1, "{}", run.stderr);
    assert!(!path.exists(), "a zombie's record is pruned");
    assert!(cat.wait_exit(WAIT).success());
}

#[test]
fn pid_zero_and_pids_outside_pid_t_are_pruned() {
    let home = Home::patient();
    let mine = start_token(std::process::id()).unwrap();
    for pid in [0u32, u32::MAX, 1 << 31] {
        home.write_record(&record(&session_id(), pid, &mine, &dead_url()));
    }
    let run = home.mur(&["ps", "-v"]);
    run.expect_code(0);
    assert_eq!(run.stdout, "no running capsules\n");
    assert_eq!(pruned_lines(&run.stderr).len(), 3, "{}", run.stderr);
    assert!(home.running_entries().is_empty());
}

#[test]
fn malformed_formation_fields_make_a_record_unreadable_and_pruned() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let door_good = session_id();
    let door = Door::public(&door_good);
    // A control record proving the sweep reads well-formed records naming the same process.
    home.write_record(&record_for(&door_good, &sleeper, &door.url()));

    let mut paths = vec![];
    let bad_cases = [
        ("formation_id", json!("frm_ABC")),
        ("formation_launcher", json!({"pid": 4242})),
        ("formation_launcher", json!(4242)),
        (
            "formation_launcher",
            json!({"pid": "1", "process_start": "1"}),
        ),
    ];
    for (key, bad) in bad_cases {
        let mut r = record_for(&session_id(), &sleeper, &dead_url());
        r[key] = bad;
        paths.push(home.write_record(&r));
    }
    let run = home.mur(&["ps", "-v", "--json"]);
    run.expect_code(0);
    let doc = run.json();
    assert_eq!(ps_rows(&doc).len(), 1, "{doc}");
    assert_eq!(status_of(&doc, &door_good).as_deref(), Some("running"));
    let lines = pruned_lines(&run.stderr);
    assert_eq!(lines.len(), paths.len(), "stderr: {}", run.stderr);
    for path in &paths {
        assert!(!path.exists(), "{} kept", path.display());
        assert!(
            lines
                .iter()
                .any(|l| l.contains(&path.display().to_string())),
            "{} not named on stderr: {}",
            path.display(),
            run.stderr
        );
    }
}

#[test]
fn links_fifos_and_oversized_files_are_refused_and_removed() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let running = home.running_dir();

    // A valid record, of a live session behind an answering door, outside the running dir.
    let linked = session_id();
    let door = Door::public(&linked);
    let elsewhere = home.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    let target = elsewhere.join("target.json");
    let target_body = serde_json::to_vec(&record_for(&linked, &sleeper, &door.url())).unwrap();
    write_private(&target, &target_body);
    let link = running.join("x.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();

    // A record of a live session padded past the size limit: valid JSON, refused for its size.
    let big = session_id();
    let big_door = Door::public(&big);
    let mut big_body = serde_json::to_vec(&record_for(&big, &sleeper, &big_door.url())).unwrap();
    big_body.resize(2 << 20, b' ');
    let big_path = running.join(format!("{big}.json"));
    write_private(&big_path, &big_body);

    // A FIFO named like a record: must be neither read (it would block) nor kept.
    let fifo = running.join("y.json");
    mkfifo(&fifo);

    let run = home.mur(&["ps", "--json", "-v"]);
    run.expect_code(0);
    let doc = run.json();
    assert_eq!(ps_rows(&doc), Vec::<Value>::new(), "{doc}");
    assert_eq!(pruned_lines(&run.stderr).len(), 3, "{}", run.stderr);
    assert!(fs::symlink_metadata(&link).is_err(), "the link is removed");
    assert!(!big_path.exists(), "the oversized file is removed");
    assert!(fs::symlink_metadata(&fifo).is_err(), "the FIFO is removed");
    assert_eq!(
        fs::read(&target).unwrap(),
        target_body,
        "the link's target is untouched"
    );
    assert_eq!(mode_of(&target), 0o600);
    assert!(
        door.seen().is_empty() && big_door.seen().is_empty(),
        "nothing read through the link or out of the big file was probed"
    );
}

#[test]
fn a_running_dir_that_is_a_regular_file_is_exit_1_naming_it() {
    let home = Home::patient();
    fs::create_dir(home.murmur()).unwrap();
    fs::set_permissions(home.murmur(), fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(home.running(), "not a directory").unwrap();
    for args in [&["ps"][..], &["ps", "--json"]] {
        let run = home.mur(args);
        run.expect_code(1);
        assert!(run.stderr.starts_with("mur ps: "), "stderr: {}", run.stderr);
        assert!(
            run.stderr.contains(&home.running().display().to_string()),
            "stderr: {}",
            run.stderr
        );
        assert_eq!(run.stdout, "");
    }
    assert_eq!(
        fs::read_to_string(home.running()).unwrap(),
        "not a directory"
    );
}

#[test]
fn a_live_session_behind_its_door_is_running() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let id = session_id();
    let door = Door::public(&id);
    let path = home.write_record(&record_for(&id, &sleeper, &door.url()));

    let run = home.mur(&["ps"]);
    run.expect_code(0);
    assert_eq!(run.stderr, "");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "header and one row:\n{}", run.stdout);
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        [
            "SESSION", "NAME", "CAPSULE", "STATUS", "DETACHED", "UPTIME", "URL"
        ]
    );
    let cells = row(&run.stdout, &id).unwrap();
    assert_eq!(cells.len(), 7, "{cells:?}");
    assert_eq!(cells[0], &id[..16], "docker's 12 hex digits");
    assert_eq!(cells[1], "-", "no name");
    assert_eq!(cells[2], "echo@0.1.0");
    assert_eq!(cells[3], "running");
    assert_eq!(cells[4], "yes");
    assert_eq!(cells[6], door.url());
    assert!(path.exists());
    assert!(!door.seen_of("/.well-known/agent-card.json").is_empty());
}

#[test]
fn an_authenticated_door_is_probed_with_the_operator_token() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();

    // The right token: running, and the token reached the door as a bearer.
    let good = session_id();
    let good_door = Door::start(DoorSpec {
        session_id: good.clone(),
        token: Some("mdt1.goodoperator.mac".into()),
        ..DoorSpec::default()
    });
    let mut r = record_for(&good, &sleeper, &good_door.url());
    r["door_token"] = json!("mdt1.goodoperator.mac");
    home.write_record(&r);

    // A door of the original runtime's newer kind, answering the A2A 1.0 method name only.
    let v1 = session_id();
    let v1_door = Door::start(DoorSpec {
        session_id: v1.clone(),
        token: Some("mdt1.v1operator.mac".into()),
        v1_only: true,
        ..DoorSpec::default()
    });
    let mut r = record_for(&v1, &sleeper, &v1_door.url());
    r["door_token"] = json!("mdt1.v1operator.mac");
    home.write_record(&r);

    // A token the door refuses: the door says nothing about the session, so unreachable.
    let refused = session_id();
    let refused_door = Door::start(DoorSpec {
        session_id: refused.clone(),
        token: Some("mdt1.realtoken.mac".into()),
        ..DoorSpec::default()
    });
    let mut r = record_for(&refused, &sleeper, &refused_door.url());
    r["door_token"] = json!("mdt1.staletoken.mac");
    let refused_path = home.write_record(&r);

    // No token recorded for an authenticated door: its public card names no session.
    let tokenless = session_id();
    let tokenless_door = Door::start(DoorSpec {
        session_id: tokenless.clone(),
        token: Some("mdt1.unknown.mac".into()),
        ..DoorSpec::default()
    });
    home.write_record(&record_for(&tokenless, &sleeper, &tokenless_door.url()));

    let run = home.mur(&["ps", "--json"]);
    run.expect_code(0);
    let doc = run.json();
    assert_eq!(status_of(&doc, &good).as_deref(), Some("running"), "{doc}");
    assert_eq!(status_of(&doc, &v1).as_deref(), Some("running"), "{doc}");
    assert_eq!(
        status_of(&doc, &refused).as_deref(),
        Some("unreachable"),
        "{doc}"
    );
    assert_eq!(
        status_of(&doc, &tokenless).as_deref(),
        Some("unreachable"),
        "{doc}"
    );
    assert!(refused_path.exists(), "an unreachable session is kept");
    assert_eq!(ps_row(&doc, &good).unwrap()["authenticated"], json!(true));
    assert_eq!(
        ps_row(&doc, &tokenless).unwrap()["authenticated"],
        json!(false)
    );

    let calls = good_door.seen_of("agent/getAuthenticatedExtendedCard");
    assert!(!calls.is_empty(), "{:?}", good_door.seen());
    assert!(
        calls
            .iter()
            .all(|c| c.authorization.as_deref() == Some("Bearer mdt1.goodoperator.mac")),
        "{calls:?}"
    );
    assert_eq!(v1_door.seen_of("GetExtendedAgentCard").len(), 1);
    for token in ["goodoperator", "v1operator", "staletoken"] {
        assert!(!run.stdout.contains(token) && !run.stderr.contains(token));
    }
}

/// Every capsule row of `ps --json` has each stable key with its type, and no token-bearing
/// key.
fn assert_capsule_schema(capsules: &[Value]) {
    type Check = fn(&Value) -> bool;
    let schema: [(&str, Check); 14] = [
        ("session_id", Value::is_string),
        ("capsule_name", Value::is_string),
        ("capsule_version", Value::is_string),
        ("status", Value::is_string),
        ("reason", |v| v.is_string() || v.is_null()),
        ("pid", Value::is_u64),
        ("url", Value::is_string),
        ("workdir", Value::is_string),
        ("started_at", Value::is_string),
        ("uptime_secs", |v| v.is_u64() || v.is_null()),
        ("outlives_launcher", Value::is_boolean),
        ("authenticated", Value::is_boolean),
        ("formation_id", |v| v.is_string() || v.is_null()),
        ("log_lines_dropped", Value::is_u64),
    ];
    for c in capsules {
        for (key, check) in schema {
            assert!(
                c.get(key).is_some_and(check),
                "capsule key {key} missing or mistyped: {c}"
            );
        }
        for key in c.as_object().unwrap().keys() {
            assert!(
                !key.contains("token") && key != "credentials",
                "a token-bearing key in ps --json: {key}"
            );
        }
    }
}

#[test]
fn json_output_has_the_stable_keys_and_never_a_token() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let launcher = Proc::sleeper();
    let frm = formation_id();

    let member = session_id();
    let door = Door::start(DoorSpec {
        session_id: member.clone(),
        token: Some("mdt1.SECRETOPERATOR.mac".into()),
        ..DoorSpec::default()
    });
    let mut r = record_for(&member, &sleeper, &door.url());
    r["door_token"] = json!("mdt1.SECRETOPERATOR.mac");
    r["credentials"] = json!({"reader": "mdt1.SECRETREADER.mac"});
    r["formation_id"] = json!(frm);
    r["formation_lifeline"] = json!(true);
    r["formation_launcher"] = json!({"pid": launcher.pid(), "process_start": launcher.start()});
    home.write_record(&r);
    home.write_control(&member, "ctl1.SECRETCONTROL.mac");

    let plain = session_id();
    home.write_record(&record_for(&plain, &sleeper, &dead_url()));

    let run = home.mur(&["ps", "--json", "-v"]);
    run.expect_code(0);
    assert_eq!(
        run.stdout.lines().count(),
        1,
        "one JSON document on one line"
    );
    let doc = run.json();
    let object = doc.as_object().unwrap();
    assert!(object.contains_key("capsules") && object.contains_key("formations"));

    let capsules = ps_rows(&doc);
    assert_eq!(capsules.len(), 2);
    // Most recent first.
    assert_eq!(capsules[0]["session_id"], json!(plain));
    assert_eq!(capsules[1]["session_id"], json!(member));
    assert_capsule_schema(&capsules);
    let m = &capsules[1];
    assert_eq!(m["status"], json!("running"));
    assert_eq!(m["reason"], Value::Null);
    assert_eq!(m["pid"], json!(sleeper.pid()));
    assert_eq!(m["url"], json!(door.url()));
    assert_eq!(m["capsule_name"], json!("echo"));
    assert_eq!(m["capsule_version"], json!("0.1.0"));
    assert_eq!(m["formation_id"], json!(frm));
    assert_eq!(m["authenticated"], json!(true));
    let uptime = m["uptime_secs"].as_u64().unwrap();
    assert!((85..=600).contains(&uptime), "uptime {uptime}");
    assert_eq!(capsules[0]["status"], json!("unreachable"));
    assert_eq!(capsules[0]["formation_id"], Value::Null);

    let formations = doc["formations"].as_array().unwrap();
    assert_eq!(formations.len(), 1, "{doc}");
    let f = &formations[0];
    for key in [
        "formation_id",
        "members",
        "running",
        "unreachable",
        "launcher",
    ] {
        assert!(f.get(key).is_some(), "formation key {key} missing: {f}");
    }
    assert_eq!(f["formation_id"], json!(frm));
    assert_eq!(f["members"], json!([member]));
    assert_eq!(f["running"], json!(1));
    assert_eq!(f["unreachable"], json!(0));
    assert_eq!(f["launcher"]["pid"], json!(launcher.pid()));
    assert_eq!(f["launcher"]["alive"], json!(true));

    for secret in ["SECRETOPERATOR", "SECRETREADER", "SECRETCONTROL"] {
        for args in [&["ps", "--json", "-v"][..], &["ps", "-v"], &["ps"]] {
            let run = home.mur(args);
            assert!(
                !run.stdout.contains(secret) && !run.stderr.contains(secret),
                "{secret} leaked by {args:?}"
            );
        }
    }
}

#[test]
fn formations_get_a_column_and_a_summary_line() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let launcher = Proc::sleeper();
    let frm = formation_id();
    let mut members = vec![];
    for _ in 0..2 {
        let id = session_id();
        let mut r = record_for(&id, &sleeper, &dead_url());
        r["formation_id"] = json!(frm);
        r["formation_lifeline"] = json!(true);
        r["formation_launcher"] = json!({"pid": launcher.pid(), "process_start": launcher.start()});
        home.write_record(&r);
        members.push(id);
    }
    let alone = session_id();
    let door = Door::public(&alone);
    home.write_record(&record_for(&alone, &sleeper, &door.url()));

    let run = home.mur(&["ps"]);
    run.expect_code(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        [
            "SESSION",
            "NAME",
            "CAPSULE",
            "STATUS",
            "DETACHED",
            "UPTIME",
            "FORMATION",
            "URL"
        ],
        "{}",
        run.stdout
    );
    for id in &members {
        let cells = row(&run.stdout, id).unwrap();
        assert!(frm.starts_with(cells[6]), "{cells:?}");
        assert_eq!(cells[3], "unreachable");
    }
    let cells = row(&run.stdout, &alone).unwrap();
    assert_eq!(cells[6], "-");
    assert_eq!(cells[3], "running");
    let summaries: Vec<&&str> = lines
        .iter()
        .filter(|l| l.starts_with("formation "))
        .collect();
    assert_eq!(summaries.len(), 1, "{}", run.stdout);
    let summary = summaries[0];
    assert!(summary.contains(&frm), "{summary}");
    assert!(summary.contains("2 members"), "{summary}");
    assert!(summary.contains("0 running, 2 unreachable"), "{summary}");
    assert!(
        summary.contains(&format!("launcher pid {}", launcher.pid())) && !summary.contains("gone"),
        "{summary}"
    );
    // Header, three rows, the summary, and each unreachable member's reason.
    assert_eq!(lines.len(), 1 + 3 + 1 + 2, "{}", run.stdout);
    for id in &members {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("unreachable {id}: "))),
            "{}",
            run.stdout
        );
    }
}

#[test]
fn staging_and_control_files_are_left_alone() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let id = session_id();
    let door = Door::public(&id);
    let record_path = home.write_record(&record_for(&id, &sleeper, &door.url()));
    let control = home.write_control(&id, "ctl1.live.mac");
    let running = home.running();
    // A record mid-write (garbage so far), and a control file whose record is not there.
    let staging = running.join(format!(".{}.json.4242.0.tmp", session_id()));
    write_private(&staging, b"{\"session_id\": \"ses_");
    let orphan_control = home.write_control(&session_id(), "ctl1.orphan.mac");

    let before = home.running_entries();
    let run = home.mur(&["ps", "-v"]);
    run.expect_code(0);
    assert_eq!(run.stderr, "", "nothing pruned, nothing unreadable");
    assert_eq!(row(&run.stdout, &id).unwrap()[3], "running");
    assert_eq!(home.running_entries(), before);
    for path in [&record_path, &control, &staging, &orphan_control] {
        assert!(path.exists(), "{} removed", path.display());
    }
    assert_eq!(
        fs::read_to_string(&staging).unwrap(),
        "{\"session_id\": \"ses_"
    );
}

#[test]
fn silent_doors_are_probed_concurrently() {
    let home = Home::patient();
    let mut keep = vec![];
    let mut ids = vec![];
    for _ in 0..5 {
        let sleeper = Proc::sleeper();
        let id = session_id();
        let door = Door::start(DoorSpec {
            session_id: id.clone(),
            silent: true,
            ..DoorSpec::default()
        });
        home.write_record(&record_for(&id, &sleeper, &door.url()));
        ids.push(id);
        keep.push((sleeper, door));
    }
    let run = home.mur(&["ps", "--json"]);
    run.expect_code(0);
    // Five probes of ~5 s each, run one after the other, would take ~25 s.
    assert!(
        run.elapsed < Duration::from_secs(15),
        "ps took {:?} for 5 silent doors: probes are not concurrent",
        run.elapsed
    );
    let doc = run.json();
    for id in &ids {
        assert_eq!(status_of(&doc, id).as_deref(), Some("unreachable"), "{doc}");
        assert!(home.record_path(id).exists());
    }
}

#[test]
fn a_door_that_trickles_its_answer_is_unreachable_once_the_probe_deadline_passes() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let id = session_id();
    let door = Door::start(DoorSpec {
        session_id: id.clone(),
        trickle: true,
        ..DoorSpec::default()
    });
    home.write_record(&record_for(&id, &sleeper, &door.url()));
    let run = home.mur(&["ps", "--json"]);
    run.expect_code(0);
    let doc = run.json();
    let row = ps_row(&doc, &id).unwrap();
    assert_eq!(row["status"], "unreachable", "{doc}");
    assert_eq!(
        row["reason"],
        json!(format!("{}: no complete answer within 5s", door.url())),
        "{doc}"
    );
}

/// Bad input at a scale a test can afford (`cargo bench --bench ps` runs it at 10,000): a third
/// of the files junk — garbage, links, FIFOs — and doors that trickle beside doors that answer,
/// all probed at once: the listing is right, the junk pruned, every trickling door unreachable.
#[test]
fn junk_links_fifos_and_trickling_doors_together_leave_a_right_listing() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let running = home.running_dir();
    let mut doors = vec![];
    let (mut answering, mut trickling) = (vec![], vec![]);
    for n in 0..60 {
        let id = session_id();
        let door = Door::start(DoorSpec {
            session_id: id.clone(),
            trickle: n % 2 == 0,
            ..DoorSpec::default()
        });
        home.write_record(&record_for(&id, &sleeper, &door.url()));
        if n % 2 == 0 {
            &mut trickling
        } else {
            &mut answering
        }
        .push(id);
        doors.push(door);
    }
    let elsewhere = home.path().join("elsewhere.json");
    write_private(&elsewhere, b"{}");
    for k in 0..30 {
        let path = running.join(format!("junk-{k}.json"));
        match k % 3 {
            0 => write_private(&path, b"{\"session_id\": \"ses_"),
            1 => std::os::unix::fs::symlink(&elsewhere, &path).unwrap(),
            _ => mkfifo(&path),
        }
    }
    let run = home.mur(&["ps", "--json"]);
    run.expect_code(0);
    let doc = run.json();
    assert_eq!(ps_rows(&doc).len(), 60, "{doc}");
    for id in &answering {
        assert_eq!(status_of(&doc, id).as_deref(), Some("running"), "{doc}");
    }
    for id in &trickling {
        assert_eq!(status_of(&doc, id).as_deref(), Some("unreachable"), "{doc}");
    }
    assert!(
        run.stderr.contains("pruned 30 stale records"),
        "{}",
        run.stderr
    );
    assert_eq!(common::home::list_dir(&running).len(), 60);
}

#[test]
fn a_reader_that_goes_away_is_not_an_error() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let url = dead_url();
    // Enough rows that the output overflows a pipe buffer, so ps is mid-write when the reader
    // leaves, as with `mur ps | head -1`.
    for _ in 0..1000 {
        home.write_record(&record_for(&session_id(), &sleeper, &url));
    }
    for (args, take) in [(&["ps"][..], 1usize), (&["ps", "--json"], 1), (&["ps"], 0)] {
        let mut child = home
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        // `head -1`: read a little, then close the read end.
        let mut first = vec![0u8; 64];
        if take > 0 {
            stdout.read_exact(&mut first).unwrap();
        }
        drop(stdout);
        let mut err = String::new();
        stderr.read_to_string(&mut err).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(
            status.code(),
            Some(0),
            "{args:?} with a closed stdout: {status:?}, stderr: {err}"
        );
        assert_eq!(err, "", "{args:?}: a closed stdout is not worth a word");
    }
}

#[test]
fn pruning_under_umask_000_holds_the_dirs_at_0700() {
    let home = Home::patient();
    let running = home.running_dir();
    fs::set_permissions(home.murmur(), fs::Permissions::from_mode(0o777)).unwrap();
    fs::set_permissions(&running, fs::Permissions::from_mode(0o755)).unwrap();
    let (pid, start) = exited_pid();
    let stale = home.write_record(&record(&session_id(), pid, &start, &dead_url()));

    let under_umask_000 = |args: &[&str]| {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg("umask 000; exec \"$0\" \"$@\"")
            .arg(mur_bin())
            .args(args)
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::null());
        run(command, PATIENT_DEADLINE)
    };
    let run = under_umask_000(&["ps"]);
    run.expect_code(0);
    assert!(
        run.stderr.contains("pruned 1 stale record"),
        "{}",
        run.stderr
    );
    assert!(!stale.exists());
    assert_eq!(mode_of(&home.murmur()), 0o700, "~/.murmur re-moded");
    assert_eq!(mode_of(&running), 0o700, "running re-moded");

    // Again with a 0755 running dir and a stale record, through mur stop's prune.
    fs::set_permissions(&running, fs::Permissions::from_mode(0o755)).unwrap();
    let (pid, start) = exited_pid();
    let stale = home.write_record(&record(&session_id(), pid, &start, &dead_url()));
    fs::set_permissions(&running, fs::Permissions::from_mode(0o755)).unwrap();
    let run = under_umask_000(&["stop", "--all"]);
    run.expect_code(0);
    assert!(!stale.exists());
    assert_eq!(mode_of(&home.murmur()), 0o700);
    assert_eq!(mode_of(&running), 0o700);
}

#[test]
fn home_unset_or_relative_is_a_clear_error() {
    let home = Home::patient();
    let mut unset = home.command(&["ps"]);
    unset.env_remove("HOME");
    let failed = run(unset, PATIENT_DEADLINE);
    failed.expect_code(1);
    assert!(failed.stderr.contains("HOME"), "{}", failed.stderr);

    let mut relative = home.command(&["ps"]);
    relative
        .env("HOME", "relative/home")
        .current_dir(home.path());
    let failed = run(relative, PATIENT_DEADLINE);
    failed.expect_code(1);
    assert!(failed.stderr.contains("relative/home"), "{}", failed.stderr);
    assert!(
        !home.path().join("relative").exists(),
        "nothing created under a relative HOME"
    );
}

/// A live session's record copied under another session's name with the pid of a process that
/// has exited (a stale backup put back): `mur ps` reports the copy, names it and why, keeps it,
/// and acts on nothing it names — the live session's task directories stay, and its next task
/// completes. `mur stop` finds nothing under the copy's name.
#[test]
fn a_stale_copy_of_a_live_record_under_another_name_is_reported_and_never_acted_on() {
    let home = Home::new();
    let manifest = home.write_capsule(
        "cat",
        json!({"name": "cat", "version": "1.0.0"}),
        Some("#!/bin/sh\ncat\n"),
    );
    let mut session = home.start(&[manifest.to_str().unwrap()]);
    let first = session.send(None, "first", true);
    assert_eq!(first["status"]["state"], "completed", "{first}");
    let tasks = home.murmur().join("tasks").join(&session.id);
    assert!(tasks.is_dir(), "the live session's task directories");

    let mut copy = home.record(&session.id);
    let (dead, dead_start) = exited_pid();
    copy["pid"] = json!(dead);
    copy["process_start"] = json!(dead_start);
    let other = session_id();
    let copy_path = home.running_dir().join(format!("{other}.json"));
    write_private(&copy_path, &serde_json::to_vec(&copy).unwrap());

    let ps = home.mur(&["ps"]);
    ps.expect_code(0);
    let named = format!(
        "kept {}: holds the record of session {}",
        copy_path.display(),
        session.id
    );
    assert!(ps.stderr.contains(&named), "{}", ps.stderr);
    assert!(pruned_lines(&ps.stderr).is_empty() && !ps.stderr.contains("pruned"));
    assert!(row(&ps.stdout, &session.id).is_some(), "{}", ps.stdout);
    assert!(row(&ps.stdout, &other).is_none(), "{}", ps.stdout);
    assert!(copy_path.exists(), "reported, not removed");
    assert!(tasks.is_dir(), "nothing the copy names is removed");

    let stop = home.mur(&["stop", &other]);
    assert_ne!(stop.code, Some(0), "{stop:?}");
    assert!(session.alive(), "no signal through the copy");

    let second = session.send(None, "second", true);
    assert_eq!(second["status"]["state"], "completed", "{second}");
    assert_eq!(
        second["artifacts"][0]["parts"][0]["text"], "second",
        "{second}"
    );
    session.signal(libc::SIGTERM);
    session.wait_exit(WAIT);
    assert!(!tasks.exists(), "the session's own end takes them");
    assert!(copy_path.exists(), "and still leaves the copy alone");
}

/// Two sessions: the embedded echo, and `shout@1.2`.
fn echo_and_shout(home: &Home) -> (Session, Session) {
    let shout = home.write_capsule(
        "shout",
        json!({"name": "shout", "version": "1.2"}),
        Some("#!/bin/sh\ntr a-z A-Z\n"),
    );
    (home.start(&[]), home.start(&[shout.to_str().unwrap()]))
}

/// Issue 21: `-q`, `--format` over the `--json` keys, the filters, and exit 1 when a filter
/// matched nothing; an unreachable session's reason in the table.
#[test]
fn quiet_format_filters_and_the_unreachable_reason() {
    let home = Home::patient();
    let (echo, loud) = echo_and_shout(&home);
    let sleeper = Proc::sleeper();
    let lost = session_id();
    let frm = formation_id();
    let mut r = record_for(&lost, &sleeper, &dead_url());
    r["formation_id"] = json!(frm);
    home.write_record(&r);

    let ids = home.mur(&["ps", "-q"]);
    ids.expect_code(0);
    let listed: Vec<&str> = ids.stdout.lines().collect();
    assert_eq!(listed.len(), 3, "{}", ids.stdout);
    assert!(listed.contains(&echo.id.as_str()) && listed.contains(&loud.id.as_str()));

    // Every --json key renders as that key's value.
    let doc = home.mur(&["ps", "--json"]).json();
    let row_of_loud = ps_row(&doc, &loud.id).unwrap().clone();
    for (key, value) in row_of_loud.as_object().unwrap() {
        let template = format!("{{{{.{key}}}}}");
        let out = home.mur(&["ps", "--capsule", "shout", "--format", &template]);
        out.expect_code(0);
        let expected = match value {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        };
        if key != "uptime_secs" {
            assert_eq!(out.stdout, format!("{expected}\n"), "{key}");
        }
    }
    let urls = home.mur(&[
        "ps",
        "--status",
        "running",
        "--format",
        "{{.url}} {{ .capsule_name }}",
    ]);
    urls.expect_code(0);
    assert!(
        urls.stdout.contains(&format!("{} shout\n", loud.url)),
        "{}",
        urls.stdout
    );
    assert!(
        urls.stdout.contains(&format!("{} echo\n", echo.url)),
        "{}",
        urls.stdout
    );
    let bad = home.mur(&["ps", "--format", "{{.nope}}"]);
    bad.expect_code(2);
    assert!(bad.stderr.contains("unknown key '.nope'"), "{}", bad.stderr);

    let by_version = home.mur(&["ps", "-q", "--capsule", "shout@1.2"]);
    by_version.expect_code(0);
    assert_eq!(by_version.stdout, format!("{}\n", loud.id));
    let unreachable = home.mur(&["ps", "-q", "--status", "unreachable"]);
    assert_eq!(unreachable.stdout, format!("{lost}\n"));
    let member = home.mur(&["ps", "-q", "--formation", &frm[frm.len() - 6..]]);
    assert_eq!(member.stdout, format!("{lost}\n"));

    // As pgrep: a filter that matched nothing is exit 1, and nothing printed.
    for args in [
        &["ps", "-q", "--capsule", "nothing"][..],
        &["ps", "--capsule", "shout@9"],
        &["ps", "--json", "--formation", "0123456789"],
    ] {
        let none = home.mur(args);
        none.expect_code(1);
        assert!(!none.stdout.contains("ses_"), "{args:?}: {}", none.stdout);
    }
    home.mur(&["ps", "--status", "asleep"]).expect_code(2);

    let table = home.mur(&["ps"]);
    table.expect_code(0);
    let reason = table
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("unreachable {lost}: ")))
        .unwrap_or_else(|| panic!("no reason line:\n{}", table.stdout));
    assert!(
        reason.len() > format!("unreachable {lost}: ").len(),
        "{reason}"
    );
}

#[test]
fn an_empty_machine_is_exit_0_without_a_filter_and_1_with_one() {
    let home = Home::patient();
    home.mur(&["ps"]).expect_code(0);
    home.mur(&["ps", "-q"]).expect_code(0);
    home.mur(&["ps", "-q", "--status", "running"])
        .expect_code(1);
}

/// Issue 32: docker's `--format json`, `{{json}}` and `table TEMPLATE`.
#[test]
fn docker_formats() {
    let home = Home::patient();
    let (echo, loud) = echo_and_shout(&home);
    let doc = home.mur(&["ps", "--json"]).json();

    // --format json: each session's --json object, one a line; {{json .}} is the same.
    for template in ["json", "{{json .}}"] {
        let out = home.mur(&["ps", "--format", template]);
        out.expect_code(0);
        let lines: Vec<Value> = out
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{template}: {}", out.stdout);
        for line in &lines {
            let id = line["session_id"].as_str().unwrap();
            let mut expected = ps_row(&doc, id).unwrap().clone();
            // Uptimes move on between the two listings.
            expected["uptime_secs"] = line["uptime_secs"].clone();
            assert_eq!(line, &expected, "{template}");
        }
    }
    let quoted = home.mur(&[
        "ps",
        "--filter",
        "name=shout",
        "--format",
        "{{json .url}} {{json .pid}}",
    ]);
    quoted.expect_code(0);
    assert_eq!(quoted.stdout, format!("\"{}\" {}\n", loud.url, loud.pid));

    // table TEMPLATE: a header row, then aligned columns (\t or blanks between keys).
    let table = home.mur(&[
        "ps",
        "--format",
        "table {{.capsule_name}}\\t{{.url}} {{.status}}",
    ]);
    table.expect_code(0);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", table.stdout);
    let url_at = lines[0].find("URL").expect("a header row");
    assert!(
        lines[0].starts_with("CAPSULE_NAME  URL"),
        "{}",
        table.stdout
    );
    assert!(lines[0].ends_with("STATUS"), "{}", table.stdout);
    for line in &lines[1..] {
        assert_eq!(
            line.find("127.0.0.1:"),
            Some(url_at),
            "aligned: {}",
            table.stdout
        );
        assert!(line.ends_with("running"), "{}", table.stdout);
    }
    let one = home.mur(&["ps", "--format", "table {{.url}}", "--filter", "name=echo"]);
    assert_eq!(one.stdout, format!("URL\n{}\n", echo.url));
    // `table` alone is the default table.
    let default = home.mur(&["ps", "--format", "table"]);
    assert!(default.stdout.starts_with("SESSION "), "{}", default.stdout);
}

/// Issue 32: `--filter KEY=VALUE` (repeatable, the old filters as its shorthands); two output
/// options refused naming both; a filter that excludes every running session said as such.
#[test]
fn docker_filters_and_conflicting_outputs() {
    let home = Home::patient();
    let (echo, loud) = echo_and_shout(&home);
    // --filter: docker's keys; a key twice is either value, two keys are both.
    let ids = |args: &[&str]| {
        let out = home.mur(&[&["ps", "-q"][..], args].concat());
        let mut ids: Vec<String> = out.stdout.lines().map(String::from).collect();
        ids.sort();
        (out.code.unwrap(), ids)
    };
    let mut both = vec![echo.id.clone(), loud.id.clone()];
    both.sort();
    assert_eq!(ids(&["--filter", "name=shout"]), (0, vec![loud.id.clone()]));
    assert_eq!(
        ids(&["--filter", "capsule=shout@1.2"]),
        (0, vec![loud.id.clone()])
    );
    assert_eq!(
        ids(&["--filter", "name=shout", "--filter", "name=echo"]),
        (0, both.clone())
    );
    assert_eq!(ids(&["--filter", "status=running"]), (0, both));
    // The shortest prefix of echo's id that is not also loud's (ids begin with their time).
    let shared = echo
        .id
        .chars()
        .zip(loud.id.chars())
        .take_while(|(a, b)| a == b)
        .count();
    let prefix = &echo.id[..(shared + 1).max(8)];
    assert_eq!(
        ids(&["--filter", &format!("id={prefix}")]),
        (0, vec![echo.id.clone()])
    );
    assert_eq!(
        ids(&["--filter", &format!("id={}", &echo.id[echo.id.len() - 6..])]),
        (0, vec![echo.id.clone()])
    );
    assert_eq!(
        ids(&["--filter", "name=shout", "--status", "unreachable"]),
        (1, vec![])
    );
    assert_eq!(
        ids(&["--capsule", "echo", "--filter", "status=running"]),
        (0, vec![echo.id.clone()])
    );

    // Filters that exclude every running session: said, exit 1.
    let none = home.mur(&["ps", "--filter", "name=nothing"]);
    none.expect_code(1);
    assert_eq!(none.stdout, "no running capsules match\n");

    // Usage errors, exit 2, each naming what was wrong.
    for (args, says) in [
        (&["ps", "--json", "-q"][..], "--json and -q"),
        (&["ps", "-q", "--json"], "-q and --json"),
        (
            &["ps", "--json", "--format", "{{.url}}"],
            "--json and --format",
        ),
        (&["ps", "--format", "json", "--quiet"], "--format and -q"),
        (
            &["ps", "--format", "{{.url}}", "--format", "{{.pid}}"],
            "--format given twice",
        ),
        (&["ps", "--filter", "nme=x"], "did you mean 'name'?"),
        (&["ps", "--filter", "name"], "KEY=VALUE"),
        (
            &["ps", "--filter", "status=asleep"],
            "one of running, unreachable, exited, killed, gone",
        ),
        (&["ps", "--filter", "id=ab"], "at least 4"),
        (&["ps", "--format", "{{json .nope}}"], "unknown key '.nope'"),
    ] {
        let out = home.mur(args);
        out.expect_code(2);
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("Try 'mur ps --help'"), "{}", out.stderr);
        assert_eq!(out.stdout, "", "{args:?}");
    }
}

/// Issue 32: over a SIGSTOPped session, `ps` on a terminal says after a second which door it
/// waits for (stderr); without a terminal it says nothing of the kind.
#[test]
fn on_a_terminal_ps_says_which_door_it_waits_for() {
    let home = Home::patient();
    let session = home.start(&[]);
    session.signal(libc::SIGSTOP);
    let plain = home.mur(&["ps"]);
    session.signal(libc::SIGCONT);
    plain.expect_code(0);
    assert!(!plain.stderr.contains("waiting"), "{}", plain.stderr);

    // `script` gives mur a terminal for stdout and stderr alike.
    let command = format!("{} ps", mur_bin());
    let mut script = Command::new("script");
    script
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("LC_ALL", "C")
        .stdin(Stdio::null());
    session.signal(libc::SIGSTOP);
    let out = script.output();
    session.signal(libc::SIGCONT);
    let Ok(out) = out else {
        return common::skip::skipped(
            "on_a_terminal_ps_says_which_door_it_waits_for",
            "no script(1) here (Debian: bsdutils)",
        );
    };
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!(
            "mur ps: waiting for the door of {} (pid {}) at {} to answer",
            session.id, session.pid, session.url
        )),
        "{said}"
    );
    assert!(said.contains("unreachable"), "{said}");
}
