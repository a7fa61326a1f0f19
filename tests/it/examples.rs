//! The example capsules under `examples/` do what docs/capsules.md says: `countdown`
//! streams its lines as it writes them, `greeter` asks a question and is answered in a second
//! turn, `parts` reads every part from `message.json` and sends files back from `out/`.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Instant;

use common::home::{Home, repo};
use common::session::{send_params, v1_send};
use serde_json::{Value, json};

fn example(name: &str) -> String {
    repo()
        .join("examples")
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn countdown_prints_each_line_as_it_is_written() {
    let home = Home::new();
    let mut child = home
        .command(&["run", &example("countdown"), "--task", "go"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let lines: Vec<(String, f64)> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|line| (line.unwrap(), started.elapsed().as_secs_f64()))
        .collect();
    assert!(child.wait().unwrap().success());
    let texts: Vec<&str> = lines.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(texts, ["3", "2", "1", "liftoff"]);
    // The handler sleeps 1.5 s in all: the first line came well before the last.
    assert!(lines[3].1 - lines[0].1 >= 1.0, "{lines:?}");
}

#[test]
fn greeter_asks_and_is_answered_in_a_second_turn() {
    let home = Home::new();
    let session = home.start(&[&example("greeter")]);
    let asked = session.send(None, "hi", true);
    assert_eq!(asked["status"]["state"], "input-required", "{asked}");
    assert_eq!(
        asked["status"]["message"]["parts"][0]["text"],
        "what is your name?"
    );
    let mut params = send_params(&["Ann"], true);
    params["message"]["taskId"] = asked["id"].clone();
    let done = session.call(None, "message/send", params);
    assert_eq!(done["status"]["state"], "completed", "{done}");
    assert_eq!(
        done["artifacts"][0]["parts"][0]["text"],
        "hello, Ann (turn 2)"
    );
}

#[test]
fn parts_sends_every_part_back_as_a_file() {
    let home = Home::new();
    let session = home.start(&[&example("parts")]);
    let sent = json!([
        {"text": "hi"},
        {"data": {"n": 1}},
        {"raw": "aGk=", "filename": "hi.txt", "mediaType": "text/plain"},
    ]);
    let task = session.call(None, "SendMessage", v1_send(sent.clone()))["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    let parts = task["artifacts"][0]["parts"].as_array().unwrap();
    let named = |name: &str| {
        parts
            .iter()
            .find(|p| p["filename"] == name)
            .unwrap_or_else(|| panic!("no {name} in {task}"))
    };
    let received = &named("received.json")["data"];
    assert_eq!(received["parts"], sent, "every part, 1.0 shape");
    let note = named("note.txt")["raw"].as_str().unwrap();
    assert!(!note.is_empty());
    assert_eq!(
        parts[0]["text"],
        Value::from("your message came back as received.json, with a note")
    );
}

/// The README's first capsule, as a newcomer types it: its `sh` block run as written (it makes
/// `hello/` and runs one task), then each exit it shows — 0 with a file from `out/`, 3 failing
/// with its stderr in the log and not in the answer, 10 asking.
#[test]
fn the_readme_first_capsule_works_as_written() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = readme
        .split("\n## Your first capsule\n")
        .nth(1)
        .expect("a 'Your first capsule' section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("its sh block");
    assert!(block.lines().count() <= 20, "a 20-line capsule:\n{block}");
    let home = Home::new();
    let bin = std::path::Path::new(common::run::mur_bin())
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut sh = std::process::Command::new("sh");
    sh.args(["-c", block])
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", &path)
        .current_dir(home.path())
        .stdin(Stdio::null());
    let out = common::run::run(sh, common::run::MUR_DEADLINE);
    out.expect_code(0);
    assert_eq!(out.stdout, "hello, Ann\n");

    let capsule = home.path().join("hello");
    let capsule = capsule.to_str().unwrap();
    let failed = home.mur(&["run", capsule, "--task", "bad"]);
    failed.expect_code(1);
    assert!(
        failed.stderr.contains("exited with code 3") && failed.stderr.contains("no greeting"),
        "{}",
        failed.stderr
    );
    let asks = home.mur(&["run", capsule, "--task", ""]);
    asks.expect_code(1);
    assert_eq!(asks.stdout, "Whom shall I greet?\n");

    let session = home.start(&[capsule]);
    let task = session.call(None, "message/send", send_params(&["Bob"], true));
    let parts = &task["artifacts"][0]["parts"];
    assert_eq!(parts[0]["text"], "hello, Bob", "{task}");
    assert_eq!(parts[1]["file"]["name"], "card.txt", "{task}");
    let failed = session.call(None, "message/send", send_params(&["bad"], true));
    assert_eq!(failed["status"]["state"], "failed", "{failed}");
    assert!(
        !failed.to_string().contains("no greeting"),
        "stderr stays out: {failed}"
    );
    let logs = home.mur(&["logs", "hello"]);
    logs.expect_code(0);
    assert!(
        logs.stdout.contains("stderr: greeting 'Bob'")
            && logs.stdout.contains("stderr: no greeting for that"),
        "{}",
        logs.stdout
    );
}
