//! `mur token` against real records of live processes (DESIGN.md §5, §6).

use crate::common;

use common::{
    home::Home,
    http::dead_url,
    process::{Proc, exited_pid},
    records::{record, record_for, session_id},
};
use serde_json::json;

const OPERATOR: &str = "mdt1.eyJjcmVkZW50aWFsIjoib3BlcmF0b3IifQ.OPERATORMAC";
const READER: &str = "mdt1.eyJjcmVkZW50aWFsIjoicmVhZGVyIn0.READERMAC";
const WRITER: &str = "mdt1.eyJjcmVkZW50aWFsIjoid3JpdGVyIn0.WRITERMAC";
const CONTROL: &str = "ctl1.eyJzZXNzaW9uX2lkIjoic2VzIn0.CONTROLMAC";

/// An authenticated session's record (operator token, two credentials) naming `process`.
fn authenticated(home: &Home, process: &Proc) -> String {
    let id = session_id();
    let mut r = record_for(&id, process, &dead_url());
    r["door_token"] = json!(OPERATOR);
    r["credentials"] = json!({"reader": READER, "writer": WRITER});
    home.write_record(&r);
    id
}

#[track_caller]
fn assert_no_token(text: &str) {
    for token in [OPERATOR, READER, WRITER, CONTROL] {
        assert!(!text.contains(token), "a token leaked: {text}");
    }
    for mac in ["OPERATORMAC", "READERMAC", "WRITERMAC", "CONTROLMAC"] {
        assert!(!text.contains(mac), "a token leaked: {text}");
    }
}

#[test]
fn the_operator_token_is_printed_exactly() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let id = authenticated(&home, &sleeper);
    for args in [
        &["token"][..],
        &["token", &id],
        &["token", "@1"],
        &["token", &id[id.len() - 6..].to_ascii_uppercase()],
    ] {
        let run = home.mur(args);
        run.expect_code(0);
        assert_eq!(run.stdout, format!("{OPERATOR}\n"), "{args:?}");
        assert_eq!(run.stderr, "", "{args:?}");
    }
}

#[test]
fn a_named_credential_is_printed_exactly() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let id = authenticated(&home, &sleeper);
    let run = home.mur(&["token", &id, "reader"]);
    run.expect_code(0);
    assert_eq!(run.stdout, format!("{READER}\n"));
    assert_eq!(run.stderr, "");
    let run = home.mur(&["token", "@1", "writer"]);
    run.expect_code(0);
    assert_eq!(run.stdout, format!("{WRITER}\n"));
}

#[test]
fn an_unknown_credential_lists_the_known_ones_and_no_token() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let id = authenticated(&home, &sleeper);
    let run = home.mur(&["token", &id, "admin"]);
    run.expect_code(1);
    assert_eq!(run.stdout, "");
    assert!(run.stderr.starts_with("mur token: "), "{}", run.stderr);
    assert!(
        run.stderr.contains("reader") && run.stderr.contains("writer"),
        "the known credentials are listed: {}",
        run.stderr
    );
    assert!(run.stderr.contains("admin"), "{}", run.stderr);
    assert_no_token(&run.stderr);

    // A session declaring no credentials at all: still exit 1, still no token.
    let home = Home::patient();
    let id = session_id();
    let mut r = record_for(&id, &sleeper, &dead_url());
    r["door_token"] = json!(OPERATOR);
    home.write_record(&r);
    let run = home.mur(&["token", &id, "reader"]);
    run.expect_code(1);
    assert_eq!(run.stdout, "");
    assert_no_token(&run.stderr);
}

#[test]
fn a_public_door_has_no_token() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let id = session_id();
    home.write_record(&record_for(&id, &sleeper, &dead_url()));
    for args in [&["token"][..], &["token", &id], &["token", &id, "reader"]] {
        let run = home.mur(args);
        run.expect_code(1);
        assert_eq!(run.stdout, "", "{args:?}");
        assert!(run.stderr.contains("public"), "{args:?}: {}", run.stderr);
    }
}

#[test]
fn the_control_token_is_read_from_the_control_file() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let id = authenticated(&home, &sleeper);
    home.write_control(&id, CONTROL);
    for args in [&["token", "--control"][..], &["token", &id, "--control"]] {
        let run = home.mur(args);
        run.expect_code(0);
        assert_eq!(run.stdout, format!("{CONTROL}\n"), "{args:?}");
        assert_eq!(run.stderr, "");
    }
    // A trailing newline in the file is not part of the token.
    home.write_control(&id, &format!("{CONTROL}\n"));
    let run = home.mur(&["token", "--control"]);
    run.expect_code(0);
    assert_eq!(run.stdout, format!("{CONTROL}\n"));

    // --control takes no CREDENTIAL.
    let run = home.mur(&["token", &id, "reader", "--control"]);
    run.expect_code(2);
    assert_eq!(run.stdout, "");
}

#[test]
fn a_session_without_control_has_no_control_token() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let id = authenticated(&home, &sleeper);
    let run = home.mur(&["token", &id, "--control"]);
    run.expect_code(1);
    assert_eq!(run.stdout, "");
    assert!(run.stderr.contains("control"), "{}", run.stderr);
    assert_no_token(&run.stderr);
}

#[test]
fn without_an_address_exactly_one_session_must_be_running() {
    let home = Home::patient();
    let run = home.mur(&["token"]);
    run.expect_code(1);
    assert_eq!(run.stdout, "");

    let sleeper = Proc::sleeper();
    let first = authenticated(&home, &sleeper);
    let run = home.mur(&["token"]);
    run.expect_code(0);
    assert_eq!(run.stdout, format!("{OPERATOR}\n"));

    let second = session_id();
    let mut r = record_for(&second, &sleeper, &dead_url());
    r["door_token"] = json!("mdt1.e30.SECONDMAC");
    home.write_record(&r);
    let run = home.mur(&["token"]);
    run.expect_code(1);
    assert_eq!(run.stdout, "");
    assert!(run.stderr.contains("2 sessions"), "{}", run.stderr);
    assert_no_token(&run.stderr);
    assert!(!run.stderr.contains("SECONDMAC"));

    // Named, each gives its own.
    assert_eq!(home.mur(&["token", &first]).stdout, format!("{OPERATOR}\n"));
    assert_eq!(home.mur(&["token", "@1"]).stdout, "mdt1.e30.SECONDMAC\n");
}

#[test]
fn a_stale_record_is_not_served() {
    for stale in ["exited", "reused"] {
        let home = Home::patient();
        let sleeper = Proc::sleeper();
        let (pid, start) = match stale {
            "exited" => exited_pid(),
            _ => {
                let real: u64 = sleeper.start().parse().unwrap();
                (sleeper.pid(), (real + 1).to_string())
            }
        };
        let id = session_id();
        let mut r = record(&id, pid, &start, &dead_url());
        r["door_token"] = json!(OPERATOR);
        r["credentials"] = json!({"reader": READER});
        let path = home.write_record(&r);
        home.write_control(&id, CONTROL);
        for args in [
            &["token"][..],
            &["token", &id],
            &["token", &id, "reader"],
            &["token", &id, "--control"],
            &["token", "@1"],
        ] {
            let run = home.mur(args);
            run.expect_code(1);
            assert_eq!(run.stdout, "", "{stale} {args:?} served a token");
            assert_no_token(&run.stderr);
        }
        assert!(
            !path.exists(),
            "{stale}: the stale record is pruned on the way past"
        );
    }
}

/// Issue 32: with one session running, `mur token reader` reads `reader` as an address; when it
/// is that session's credential, the error says how to ask for it.
#[test]
fn a_credential_given_as_the_address_gets_a_hint() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    authenticated(&home, &sleeper);
    let run = home.mur(&["token", "reader"]);
    run.expect_code(1);
    assert!(
        run.stderr
            .contains("'reader' is a credential of the one running session")
            && run.stderr.contains("mur token @1 reader"),
        "{}",
        run.stderr
    );
    assert_no_token(&run.stderr);
    // A word that is no credential gets no such hint.
    let run = home.mur(&["token", "nobody"]);
    run.expect_code(1);
    assert!(!run.stderr.contains("credential"), "{}", run.stderr);
}

#[test]
fn usage_errors_are_exit_2() {
    let home = Home::patient();
    let sleeper = Proc::sleeper();
    let id = authenticated(&home, &sleeper);
    for args in [
        &["token", &id, "reader", "extra"][..],
        &["token", "--bogus"],
        &["token", &id, "reader", "--control"],
        &["token", "@0"],
        &["token", "@x", "reader"],
    ] {
        let run = home.mur(args);
        run.expect_code(2);
        assert_eq!(run.stdout, "", "{args:?}");
        assert!(
            run.stderr.contains("Try 'mur token --help'"),
            "{}",
            run.stderr
        );
        assert_no_token(&run.stderr);
    }
}
