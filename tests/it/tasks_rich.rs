//! Tasks beyond one-shot text (DESIGN.md §5): every part of a message reaches the handler in
//! `MUR_TASK_DIR/message.json`, files it leaves in `out/` come back as parts, a handler that
//! exits 10 asks for input and a message naming the task continues it (`MUR_TURN`,
//! `history.json`), in both generations; cancel and the input timeout end a waiting task; the
//! task directory is private and goes when the task ends.

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use common::{
    home::{Home, mode_of},
    session::{Session, send_params, v1_message, v1_send},
    wait::{WAIT, wait_for, wait_until},
};
use serde_json::{Value, json};

/// A handler that keeps its message, reports its turn and task dir, and leaves files in `out/`.
const PARTS_HANDLER: &str = r#"#!/bin/sh
cat >/dev/null
echo "$MUR_TASK_DIR" > "$HOME/state/seen-dir"
cp "$MUR_TASK_DIR/message.json" "$MUR_TASK_DIR/out/got.json"
printf 'plain words' > "$MUR_TASK_DIR/out/note.txt"
echo "turn $MUR_TURN"
"#;

/// Counts its tasks; writes what its directory holds (mode, entries, `out/`'s entries, the
/// message) to `$HOME/state/seen-N`, then leaves a mess: files, a subdirectory, a file in `out/`,
/// the directory opened to 0755, and `message.json` replaced by a symbolic link (task 1) or a
/// hard link (task 2) to `$HOME/state/target`.
const MESSY_HANDLER: &str = r#"#!/bin/sh
cat >/dev/null
cd "$MUR_TASK_DIR" || exit 1
n=$(( $(cat "$HOME/state/count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$HOME/state/count"
{ stat -c '%a' .; ls -A .; echo --; ls -A out; echo --; cat message.json; } > "$HOME/state/seen-$n"
echo junk > junk; mkdir sub; echo y > sub/z; echo o > out/o.txt; chmod 755 .
case $n in
1) rm message.json; ln -s "$HOME/state/target" message.json ;;
2) rm message.json; ln "$HOME/state/target" message.json ;;
esac
echo "task $n"
"#;

/// Turn 1 asks a question (exit 10); turn 2 answers with what it was told and keeps the history.
const ASKING_HANDLER: &str = r#"#!/bin/sh
input=$(cat)
if [ "$MUR_TURN" = 1 ]; then
    echo "what is your name?"
    exit 10
fi
cp "$MUR_TASK_DIR/history.json" "$MUR_TASK_DIR/out/history.json"
echo "hello $input (turn $MUR_TURN)"
"#;

/// Capsule `name`, its handler free to write in `~/state` (where the handlers above leave what
/// they saw; their sandbox allows nothing else outside their workdir and task directory).
fn capsule(home: &Home, name: &str, lifecycle: Value, script: &str) -> String {
    let state = home.dir("state");
    let manifest = json!({"name": name, "version": "1.0.0", "lifecycle": lifecycle,
                          "sandbox": {"write": [state]}});
    let path = home.write_capsule(name, manifest, Some(script));
    path.to_str().unwrap().to_string()
}

/// Send `text` as the next turn of task `task` (in context `context`), in either generation;
/// the task as that generation shows it.
fn continue_task(session: &Session, task: &Value, text: &str, v1: bool) -> Value {
    if v1 {
        let mut message = v1_message(json!([{"text": text}]));
        message["taskId"] = task["id"].clone();
        session.call(None, "SendMessage", json!({"message": message}))["task"].clone()
    } else {
        let mut params = send_params(&[text], true);
        params["message"]["taskId"] = task["id"].clone();
        params["message"]["contextId"] = task["contextId"].clone();
        session.call(None, "message/send", params)
    }
}

#[test]
fn every_part_reaches_the_handler_and_its_files_come_back() {
    let home = Home::new();
    let session = home.start(&[&capsule(&home, "parts", json!({}), PARTS_HANDLER)]);
    let sent = json!([
        {"text": "hi"},
        {"data": {"k": [1, 2]}, "mediaType": "application/json"},
        {"raw": "aGVsbG8=", "filename": "h.txt", "mediaType": "text/plain"},
        {"url": "https://example.com/f.png", "filename": "f.png"},
    ]);
    let answer = session.call(None, "SendMessage", v1_send(sent.clone()));
    let task = &answer["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
    let parts = task["artifacts"][0]["parts"].as_array().unwrap();
    assert_eq!(parts[0], json!({"text": "turn 1"}), "{answer}");
    // out/got.json: valid JSON, so a data part — the message.json the handler was given.
    assert_eq!(parts[1]["filename"], "got.json");
    assert_eq!(parts[1]["mediaType"], "application/json");
    let given = &parts[1]["data"];
    assert_eq!(given["role"], "ROLE_USER");
    assert_eq!(
        given["parts"], sent,
        "message.json holds every part in the 1.0 shape"
    );
    assert_eq!(given["taskId"], task["id"]);
    // out/note.txt: a raw part, base64, with its name and a media type from its extension.
    assert_eq!(
        parts[2],
        json!({"raw": "cGxhaW4gd29yZHM=", "filename": "note.txt", "mediaType": "text/plain"})
    );
    // A 0.3 client's file parts arrive converted, and read back in 0.3's shape.
    let mut old = send_params(&["x"], true);
    old["message"]["parts"] = json!([
        {"kind": "file", "file": {"bytes": "aGk=", "name": "a.bin", "mimeType": "application/octet-stream"}},
        {"kind": "file", "file": {"uri": "https://example.com/b", "name": "b"}},
    ]);
    let task = session.call(None, "message/send", old);
    let got = &task["artifacts"][0]["parts"][1];
    assert_eq!(got["kind"], "data", "{task}");
    assert_eq!(
        got["data"]["parts"],
        json!([
            {"raw": "aGk=", "filename": "a.bin", "mediaType": "application/octet-stream"},
            {"url": "https://example.com/b", "filename": "b"},
        ])
    );
    assert_eq!(task["artifacts"][0]["parts"][2]["kind"], "file");
    assert_eq!(task["artifacts"][0]["parts"][2]["file"]["name"], "note.txt");
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Wait until the session's `tasks/<session>/` holds one entry, an emptied spare; its path.
fn wait_for_spare(tasks: &Path) -> std::path::PathBuf {
    wait_until(
        WAIT,
        "the ended task's directory emptied as a spare",
        || matches!(listing(tasks).as_slice(), [one] if one.starts_with(".spare.")),
    );
    tasks.join(&listing(tasks)[0])
}

#[test]
fn an_ended_tasks_directory_is_reused_with_nothing_of_it_left_and_no_link_followed() {
    let home = Home::new();
    let target = home.dir("state").join("target");
    fs::write(&target, "precious").unwrap();
    // As private as a message file, so only its second link tells it apart.
    fs::set_permissions(&target, fs::Permissions::from_mode(0o600)).unwrap();
    let mut session = home.start(&[&capsule(&home, "messy", json!({}), MESSY_HANDLER)]);
    let tasks = home.murmur().join("tasks").join(&session.id);
    for n in 1..=3 {
        let text = format!("message {n}");
        let done = session.send(None, &text, true);
        assert_eq!(done["status"]["state"], "completed", "{done}");
        let seen = fs::read_to_string(home.path().join(format!("state/seen-{n}"))).unwrap();
        let (listed, message) = seen.split_once("--\n--\n").expect(&seen);
        assert_eq!(listed, "700\nmessage.json\nout\n", "task {n} saw {seen}");
        let message: Value = serde_json::from_str(message).expect(message);
        assert_eq!(message["parts"][0]["text"], text.as_str());
        // Before the next task, the directory is back as a spare (else a new one is made).
        let spare = wait_for_spare(&tasks);
        if n == 1 {
            // As a process of task 1 stuck past its sweep might: task 2 must not get these.
            fs::write(spare.join("out/planted.txt"), "from task 1").unwrap();
            fs::write(spare.join("stray"), "from task 1").unwrap();
        }
    }
    assert_eq!(
        fs::read_to_string(&target).unwrap(),
        "precious",
        "no message written through a link"
    );
    assert!(fs::symlink_metadata(&target).unwrap().is_file());
    session.signal(libc::SIGTERM);
    session.wait_exit(WAIT);
    assert!(!tasks.exists(), "spares go with the session");
}

#[test]
fn the_task_directory_is_private_and_goes_with_the_task_and_the_session() {
    let home = Home::new();
    let mut session = home.start(&[&capsule(&home, "parts", json!({}), PARTS_HANDLER)]);
    let done = session.send(None, "x", true);
    assert_eq!(done["status"]["state"], "completed", "{done}");
    let dir = fs::read_to_string(home.path().join("state/seen-dir")).unwrap();
    let dir = Path::new(dir.trim_end());
    let tasks = home.murmur().join("tasks").join(&session.id);
    assert_eq!(
        dir,
        tasks.join(done["id"].as_str().unwrap()),
        "under ~/.murmur/tasks/<session>/"
    );
    assert!(!dir.exists(), "off its path when the task ended");
    // Emptied just after the answer (outside the engine's lock), not at session end.
    let spare = wait_for_spare(&tasks);
    assert_eq!(listing(&spare), ["message.json", "out"]);
    assert_eq!(listing(&spare.join("out")), Vec::<String>::new());
    assert_eq!(
        fs::read(spare.join("message.json")).unwrap(),
        b"",
        "nothing of the task kept"
    );
    assert_eq!(mode_of(&tasks), 0o700);
    assert_eq!(mode_of(&home.murmur().join("tasks")), 0o700);
    session.signal(libc::SIGTERM);
    session.wait_exit(WAIT);
    assert!(!tasks.exists(), "the session's task directories go with it");
}

/// A session stopped the moment a task's answer arrives — before the thread that wrote it has
/// recycled the task's directory — still leaves nothing of its task directories: the wind-down
/// waits for the recycling, not only for the running count (which drops first).
#[test]
fn a_session_stopped_as_its_answer_arrives_leaves_no_task_directory() {
    let home = Home::new();
    let cat = capsule(&home, "cat", json!({}), "#!/bin/sh\ncat\n");
    for round in 0..30 {
        let mut session = home.start(&[&cat]);
        let tasks = home.murmur().join("tasks").join(&session.id);
        let done = session.send(None, "x", true);
        session.signal(libc::SIGTERM);
        assert_eq!(done["status"]["state"], "completed", "{done}");
        session.wait_exit(WAIT);
        assert!(
            !tasks.exists(),
            "round {round}: left behind: {:?}",
            listing(&tasks)
        );
    }
}

#[test]
fn a_question_is_answered_by_a_message_naming_the_task_in_either_generation() {
    let home = Home::new();
    let session = home.start(&[&capsule(&home, "asks", json!({}), ASKING_HANDLER)]);
    for v1 in [false, true] {
        let asked = session.send(None, "hi", true);
        assert_eq!(asked["status"]["state"], "input-required", "{asked}");
        assert_eq!(
            asked["status"]["message"]["parts"][0]["text"],
            "what is your name?"
        );
        assert!(asked.get("artifacts").is_none(), "no answer yet: {asked}");
        let roles: Vec<&Value> = asked["history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| &m["role"])
            .collect();
        assert_eq!(roles, [&json!("user"), &json!("agent")], "{asked}");

        let done = continue_task(&session, &asked, "Ann", v1);
        assert_eq!(done["id"], asked["id"], "the same task");
        let text = &done["artifacts"][0]["parts"][0]["text"];
        assert_eq!(text, "hello Ann (turn 2)", "{done}");
        // history.json held both earlier messages, both roles, 1.0 shape.
        let history = &done["artifacts"][0]["parts"][1]["data"];
        assert_eq!(history[0]["parts"], json!([{"text": "hi"}]), "{done}");
        assert_eq!(history[1]["role"], "ROLE_AGENT");
        assert_eq!(history[1]["parts"], json!([{"text": "what is your name?"}]));
        assert_eq!(done["history"].as_array().unwrap().len(), 3, "{done}");

        // A finished task is not continued.
        let again = session.rpc(None, "message/send", {
            let mut params = send_params(&["more"], true);
            params["message"]["taskId"] = done["id"].clone();
            params
        });
        assert_eq!(again["error"]["code"], -32602, "{again}");
    }
}

#[test]
fn a_waiting_task_can_be_canceled_refuses_a_stranger_context_and_times_out() {
    let home = Home::new();
    let lifecycle = json!({"input_timeout_secs": 1});
    let session = home.start(&[&capsule(&home, "asks", lifecycle, ASKING_HANDLER)]);
    let asked = session.send(None, "hi", true);
    assert_eq!(asked["status"]["state"], "input-required", "{asked}");
    // Cancel ends it at once; it is then ended for good.
    let canceled = session.call(None, "tasks/cancel", json!({"id": asked["id"]}));
    assert_eq!(canceled["status"]["state"], "canceled", "{canceled}");
    let read = session.call(None, "GetTask", json!({"id": asked["id"]}));
    assert_eq!(read["status"]["state"], "TASK_STATE_CANCELED");

    // Another context is refused, naming the field; the task still waits.
    let waiting = session.send(None, "hi", true);
    let mut params = send_params(&["Ann"], true);
    params["message"]["taskId"] = waiting["id"].clone();
    params["message"]["contextId"] = json!("ctx-not-this-one");
    let refused = session.rpc(None, "message/send", params);
    assert_eq!(
        refused["error"]["data"]["field"], "params.message.contextId",
        "{refused}"
    );
    let id = waiting["id"].as_str().unwrap().to_string();

    // No input within a second: failed, saying why — so the refusal left it waiting (a task
    // the refusal had ended or continued would not fail for want of input).
    let failed = wait_for(Duration::from_secs(10), "the input timeout", || {
        let task = session.get_task(None, &id);
        (task["status"]["state"] == "failed").then_some(task)
    });
    let why = failed["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(why.contains("no input within 1s"), "{why}");
}

#[test]
fn out_entries_that_are_not_plain_files_are_skipped_with_a_note() {
    let home = Home::new();
    let script = r#"#!/bin/sh
cat >/dev/null
cd "$MUR_TASK_DIR/out"
ln -s /etc/passwd link
mkdir sub
mkfifo fifo
head -c 5000000 /dev/zero > big
printf ok > good.txt
echo done
"#;
    let session = home.start(&[&capsule(&home, "odd", json!({}), script)]);
    let done = session.call(None, "SendMessage", v1_send(json!([{"text": "x"}])));
    let parts = &done["task"]["artifacts"][0]["parts"];
    assert_eq!(
        parts,
        &json!([{"text": "done"}, {"raw": "b2s=", "filename": "good.txt", "mediaType": "text/plain"}]),
        "only the plain file within the bound came back: {done}"
    );
    wait_until(WAIT, "a note for each skipped entry on stderr", || {
        let stderr = session.stderr();
        ["link", "sub", "fifo", "big"]
            .iter()
            .all(|name| stderr.contains(&format!("skipped out/{name}")))
    });
}

/// The memory bound: 200 requests of 1 MiB each (half a million tiny JSON values in `metadata`,
/// the shape that costs most as a parsed tree) keep a public echo session's peak RSS under
/// 200 MiB, finished tasks being kept serialized within their 64 MiB budget.
#[test]
fn two_hundred_one_mib_requests_keep_the_session_under_200_mib() {
    let home = Home::new();
    let session = home.start(&[]);
    let zeros = vec!["0"; 500_000].join(",");
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"message/send","params":{{"message":{{"kind":"message","messageId":"m","role":"user","parts":[{{"kind":"text","text":"x"}}],"metadata":{{"zeros":[{zeros}]}}}}}}}}"#
    );
    assert!(
        body.len() > 1_000_000 && body.len() <= 1 << 20,
        "{}",
        body.len()
    );
    let mut http = session.connect();
    let mut first = None;
    for _ in 0..200 {
        let answer = http.post("/", None, body.as_bytes());
        assert_eq!(answer.status, 200);
        let id = serde_json::from_slice::<Value>(&answer.body).unwrap()["result"]["id"].clone();
        first.get_or_insert(id);
    }
    let peak_kib = common::process::status_field(session.pid, "VmHWM").expect("VmHWM");
    eprintln!(
        "peak RSS after 200 one-MiB requests: {} MiB",
        peak_kib / 1024
    );
    assert!(peak_kib < 200 * 1024, "peak RSS {peak_kib} KiB");
    // The oldest went over the budget: forgotten, like any unknown task.
    let forgotten = session.rpc(None, "tasks/get", json!({"id": first.unwrap()}));
    assert_eq!(forgotten["error"]["code"], -32001, "{forgotten}");
}

/// A session that could not remove its task directories (SIGKILLed mid-task) leaves them until
/// its record is pruned as gone: then they go too.
#[test]
fn a_killed_sessions_task_directories_go_when_its_record_is_pruned() {
    let home = Home::new();
    let gate = home.dir("gate");
    let script = format!(
        "#!/bin/sh\ncat >/dev/null\n: > '{}/started'\nsleep 30\n",
        gate.display()
    );
    let mut session = home.start(&[&capsule(&home, "held", json!({}), &script)]);
    session.send(None, "x", false);
    wait_until(WAIT, "the handler to start", || {
        gate.join("started").exists()
    });
    let tasks = home.murmur().join("tasks").join(&session.id);
    assert_eq!(
        common::home::list_dir(&tasks).len(),
        1,
        "the task's directory"
    );
    session.signal(libc::SIGKILL);
    session.wait_exit(WAIT);
    assert!(tasks.exists(), "a SIGKILLed session cannot clean up");
    home.mur(&["ps"]).expect_code(0);
    assert!(!tasks.exists(), "pruned with the record");
    assert!(home.murmur().join("tasks").exists(), "only that session's");
}
