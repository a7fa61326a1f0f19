//! `mur run` end to end (DESIGN.md §2, §3, §5): the real binary, real handler processes
//! (`/bin/sh` scripts), real sockets, and a throwaway `HOME` per test.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    door::{CAPSULE_EXTENSION_URI, session_of},
    home::{Home, mode_of},
    http::{Http, HttpResponse},
    process::{Lifeline, assert_all_dead, assert_group_ended, group_pids, group_script, read_pids},
    run::{MUR_DEADLINE, mur_bin, run_to_end},
    session::{Session, artifact_text, send_params, state, status_text},
    wait::{WAIT, wait_until},
};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// The embedded echo capsule: readiness, ps, the card, tasks
// ---------------------------------------------------------------------------------------------

#[test]
fn readiness_line_ps_and_card_agree_on_the_session() {
    let home = Home::new();
    let session = home.start(&[]);

    // Exactly the six keys, no token.
    let keys: Vec<&str> = session
        .ready
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    let mut keys = keys;
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["name", "pid", "session_id", "url", "version", "workdir"]
    );
    assert_eq!(session.ready["name"], "echo");
    assert_eq!(session.ready["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        session.ready["workdir"],
        home.path().to_str().unwrap(),
        "the default workdir is the current directory"
    );
    assert!(
        session.id.starts_with("ses_")
            && session.id.len() == 36
            && session.id[4..]
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "{}",
        session.id
    );
    assert!(
        session.url.starts_with("127.0.0.1:"),
        "loopback by default: {}",
        session.url
    );
    assert!(!session.ready_line.contains("mdt1."));
    assert_eq!(session.ready_line.matches('\n').count(), 1, "one line");

    // The record agrees.
    let record = home.record(&session.id);
    assert_eq!(record["session_id"], session.id.as_str());
    assert_eq!(record["url"], session.url.as_str());
    assert_eq!(record["pid"], session.pid);
    assert_eq!(record["records_dir"], home.path().to_str().unwrap());

    // mur ps --json shows it running.
    let ps = home.mur(&["ps", "--json"]);
    ps.expect_code(0);
    let listing = ps.json();
    let capsules = listing["capsules"].as_array().unwrap();
    assert_eq!(capsules.len(), 1, "{listing}");
    let entry = &capsules[0];
    assert_eq!(entry["session_id"], session.id.as_str());
    assert_eq!(entry["status"], "running", "{entry}");
    assert_eq!(entry["capsule_name"], "echo");
    assert_eq!(entry["url"], session.url.as_str());
    assert_eq!(entry["pid"], session.pid);

    // The card: A2A 0.3 with the 0.3 interface and the capsule extension naming the session.
    let card = session.card();
    assert_eq!(card["protocolVersion"], "0.3.0");
    assert_eq!(card["preferredTransport"], "JSONRPC");
    let url = format!("http://{}/", session.url);
    assert_eq!(card["url"], url.as_str());
    // Both generations at the one URL, JSON-RPC 1.0 first (the preferred one), then HTTP+JSON.
    let bindings = [
        ("JSONRPC", "1.0"),
        ("JSONRPC", "0.3"),
        ("HTTP+JSON", "1.0"),
        ("HTTP+JSON", "0.3"),
    ];
    for (i, (binding, version)) in bindings.into_iter().enumerate() {
        let interface = &card["supportedInterfaces"][i];
        assert_eq!(interface["protocolVersion"], version, "{card}");
        assert_eq!(interface["protocolBinding"], binding);
        assert_eq!(interface["url"], url.as_str());
    }
    assert_eq!(card["supportedInterfaces"].as_array().unwrap().len(), 4);
    assert_eq!(card["additionalInterfaces"][1]["transport"], "HTTP+JSON");
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["capabilities"]["extendedAgentCard"], false);
    assert_eq!(card["skills"][0]["id"], "task");
    let extension = card["capabilities"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["uri"] == CAPSULE_EXTENSION_URI)
        .unwrap_or_else(|| panic!("no capsule extension: {card}"));
    assert_eq!(extension["params"]["sessionId"], record["session_id"]);
    assert!(card.get("supportsAuthenticatedExtendedCard").is_none());
}

#[test]
fn echo_answers_with_the_text_and_keeps_the_task() {
    let home = Home::new();
    let session = home.start(&[]);
    let task = session.call(
        None,
        "message/send",
        send_params(&["first line", "second line"], true),
    );
    assert_eq!(task["kind"], "task");
    assert_eq!(state(&task), "completed", "{task}");
    // Echo answers with every part it got, each as it came.
    let parts =
        json!([{"kind": "text", "text": "first line"}, {"kind": "text", "text": "second line"}]);
    assert_eq!(task["artifacts"][0]["parts"], parts, "{task}");
    assert_eq!(task["status"]["message"]["parts"], parts, "{task}");
    let id = task["id"].as_str().unwrap();
    assert!(id.starts_with("tsk_"), "{id}");
    assert!(task["contextId"].as_str().unwrap().starts_with("ctx_"));

    let got = session.get_task(None, id);
    assert_eq!(got["id"], id);
    assert_eq!(state(&got), "completed");
    assert_eq!(got["artifacts"][0]["parts"], parts);

    // A second task is a different task.
    let other = session.send(None, "another", true);
    assert_ne!(other["id"], task["id"]);
    assert_eq!(artifact_text(&other), "another");
}

// ---------------------------------------------------------------------------------------------
// Shell handlers
// ---------------------------------------------------------------------------------------------

/// A handler that blocks until `<dir>/release` exists, then answers `done <its stdin>`.
fn gated_script(dir: &Path) -> String {
    format!(
        "#!/bin/sh\n\
         input=$(cat)\n\
         while [ ! -e '{dir}/release' ]; do sleep 0.02; done\n\
         echo \"done $input\"\n",
        dir = dir.display()
    )
}

#[test]
fn a_non_blocking_task_is_working_then_completed() {
    let home = Home::new();
    let gate = home.dir("gate");
    let manifest = home.write_capsule(
        "slow",
        json!({"name": "slow", "version": "1.0.0"}),
        Some(&gated_script(&gate)),
    );
    let session = home.start(&[manifest.to_str().unwrap()]);
    let task = session.send(None, "patience", false);
    let id = task["id"].as_str().unwrap().to_string();
    assert!(
        ["working", "submitted"].contains(&state(&task).as_str()),
        "a non-blocking send returns before the handler ends: {task}"
    );
    // Still not done while the gate is shut.
    let again = session.get_task(None, &id);
    assert!(
        ["working", "submitted"].contains(&state(&again).as_str()),
        "{again}"
    );
    fs::write(gate.join("release"), "").unwrap();
    let done = session.wait_task(None, &id, WAIT);
    assert_eq!(state(&done), "completed", "{done}");
    assert_eq!(artifact_text(&done), "done patience");
}

#[test]
fn a_handler_whose_workdir_is_gone_fails_naming_the_workdir() {
    let home = Home::new();
    let workdir = home.dir("work");
    let manifest = home.write_capsule(
        "homeless",
        json!({"name": "homeless", "version": "1"}),
        Some("#!/bin/sh\necho ran\n"),
    );
    let session = home.start(&[
        manifest.to_str().unwrap(),
        "--workdir",
        workdir.to_str().unwrap(),
    ]);
    fs::remove_dir(&workdir).unwrap();
    let task = session.call(None, "message/send", send_params(&["x"], true));
    assert_eq!(state(&task), "failed", "{task}");
    let why = status_text(&task);
    assert!(
        why.contains(&format!("cannot enter the workdir {}: ", workdir.display())),
        "{why}"
    );
}

#[test]
fn a_shell_handler_gets_stdin_env_and_workdir_and_its_stdout_is_the_answer() {
    let home = Home::new();
    let out = home.dir("seen");
    let workdir = home.dir("work");
    let script = format!(
        "#!/bin/sh\n\
         o='{out}'\n\
         cat > \"$o/stdin\"\n\
         pwd -P > \"$o/cwd\"\n\
         printf '%s' \"$MUR_SESSION_ID\" > \"$o/session\"\n\
         printf '%s' \"$MUR_TASK_ID\" > \"$o/task\"\n\
         printf '%s' \"$MUR_CONTEXT_ID\" > \"$o/context\"\n\
         printf '%s' \"$MUR_CAPSULE\" > \"$o/capsule\"\n\
         printf 'the answer\\nline two\\n\\n'\n",
        out = out.display()
    );
    let manifest = home.write_capsule(
        "shelly",
        json!({"name": "shelly", "version": "2.3.4", "sandbox": {"write": [&out]}}),
        Some(&script),
    );
    let session = home.start(&[
        manifest.to_str().unwrap(),
        "--workdir",
        workdir.to_str().unwrap(),
    ]);
    assert_eq!(session.ready["workdir"], workdir.to_str().unwrap());

    let task = session.call(None, "message/send", send_params(&["one", "two"], true));
    assert_eq!(state(&task), "completed", "{task}");
    // One trailing newline dropped, not more.
    assert_eq!(artifact_text(&task), "the answer\nline two\n");
    assert_eq!(status_text(&task), "the answer\nline two\n");

    let read = |name: &str| fs::read_to_string(out.join(name)).unwrap();
    // The text parts joined by newlines, ending in one (so `read` sees the last line).
    assert_eq!(read("stdin"), "one\ntwo\n");
    assert_eq!(read("cwd").trim_end(), workdir.to_str().unwrap());
    assert_eq!(read("session"), session.id);
    assert_eq!(read("task"), task["id"].as_str().unwrap());
    assert_eq!(read("context"), task["contextId"].as_str().unwrap());
    assert_eq!(read("capsule"), "shelly@2.3.4");
}

/// A handler inherits the session's environment less what is the session's alone (its call
/// socket's number), with its task's own variables over any of the same name the session had —
/// on every task alike (the inherited part is rendered once, at the first, and shared).
#[test]
fn a_handler_inherits_the_sessions_environment_with_its_tasks_variables_over_it() {
    let home = Home::new();
    // Read from what the handler was given (its exec's environment, as /proc keeps it), not
    // from the shell's variables, which would hide a name given twice.
    let script = "#!/bin/sh\n\
                  cat >/dev/null\n\
                  given=$(tr '\\0' '\\n' < /proc/$$/environ)\n\
                  of() { printf '%s\\n' \"$given\" | grep \"$@\"; }\n\
                  printf '%s|%s|%s' \"$(of '^MUR_TEST_KEPT=')\" \"$(of '^MUR_TASK_ID=')\" \
                  \"$(of -c '^MURMUR_CALL_FD=')\"\n";
    let manifest = home.write_capsule("env", json!({"name": "env", "version": "1"}), Some(script));
    let mut command = home.command(&["run", "--json", manifest.to_str().unwrap()]);
    command
        .env("MUR_TEST_KEPT", "kept = as is")
        .env("MUR_TASK_ID", "the session's, not a task's")
        .env("MURMUR_CALL_FD", "99");
    let session = Session::spawn(command);
    for _ in 0..2 {
        let task = session.send(None, "go", true);
        assert_eq!(state(&task), "completed", "{task}");
        let id = task["id"].as_str().unwrap();
        let want = format!("MUR_TEST_KEPT=kept = as is|MUR_TASK_ID={id}|0");
        assert_eq!(artifact_text(&task), want);
    }
}

#[test]
fn a_handler_exiting_non_zero_fails_with_its_exit_code_and_not_its_stderr() {
    let home = Home::new();
    let manifest = home.write_capsule(
        "grumpy",
        json!({"name": "grumpy", "version": "1"}),
        Some(
            "#!/bin/sh\ncat >/dev/null\necho 'partial answer'\necho 'early noise' >&2\necho 'the real reason' >&2\nexit 3\n",
        ),
    );
    let session = home.start(&[manifest.to_str().unwrap()]);
    let task = session.send(None, "go", true);
    assert_eq!(state(&task), "failed", "{task}");
    let message = status_text(&task);
    // The stderr is the operator's (the session's log), never a caller's.
    assert!(!message.contains("the real reason"), "{message}");
    assert!(message.contains("code 3"), "the exit code: {message}");
    assert!(
        task.get("artifacts")
            .is_none_or(|a| a.as_array().is_none_or(|a| a.is_empty())),
        "a failed task has no answer artifact: {task}"
    );
}

#[test]
fn a_timed_out_handler_fails_and_its_whole_process_group_is_gone() {
    let home = Home::new();
    let dir = home.dir("pids");
    let manifest = home.write_capsule(
        "sleepy",
        json!({"name": "sleepy", "version": "1", "lifecycle": {"task_timeout_secs": 1}}),
        Some(&group_script(&dir)),
    );
    let session = home.start(&[manifest.to_str().unwrap()]);
    let started = Instant::now();
    let task = session.send(None, "never finishes", false);
    let id = task["id"].as_str().unwrap().to_string();
    let pids = group_pids(&dir);
    let done = session.wait_task(None, &id, WAIT);
    assert_eq!(state(&done), "failed", "{done}");
    assert!(status_text(&done).contains("timed out"), "{done}");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "not before the timeout"
    );
    assert_group_ended(&dir, &pids, "the timed-out handler's group");
}

#[test]
fn a_canceled_handler_is_canceled_and_its_whole_process_group_is_gone() {
    let home = Home::new();
    let dir = home.dir("pids");
    let manifest = home.write_capsule(
        "cancelme",
        json!({"name": "cancelme", "version": "1"}),
        Some(&group_script(&dir)),
    );
    let session = home.start(&[manifest.to_str().unwrap()]);
    let task = session.send(None, "stop me", false);
    let id = task["id"].as_str().unwrap().to_string();
    let pids = group_pids(&dir);
    let canceled = session.call(None, "tasks/cancel", json!({"id": id}));
    assert_eq!(canceled["id"], id.as_str());
    let done = session.wait_task(None, &id, WAIT);
    assert_eq!(state(&done), "canceled", "{done}");
    assert_group_ended(&dir, &pids, "the canceled handler's group");
    // A finished task cannot be canceled again.
    assert_eq!(
        session.call_err(None, "tasks/cancel", json!({"id": id})),
        -32002
    );
}

#[test]
fn single_acceptance_refuses_a_second_concurrent_task() {
    let home = Home::new();
    let gate = home.dir("gate");
    let manifest = home.write_capsule(
        "single",
        json!({"name": "single", "version": "1", "lifecycle": {"task_acceptance": "single"}}),
        Some(&gated_script(&gate)),
    );
    let session = home.start(&[manifest.to_str().unwrap()]);
    let first = session.send(None, "first", false);
    // A blocking send must be refused at once, not wait for the first to finish.
    let mut conn = session.connect();
    conn.set_read_timeout(Duration::from_secs(5));
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "message/send",
                      "params": send_params(&["second"], true)});
    let answer = conn
        .try_request("POST", "/", &[], body.to_string().as_bytes())
        .unwrap_or_else(|e| panic!("the second task was not refused promptly: {e}"));
    assert_eq!(answer.status, 200);
    let answer = answer.json();
    assert!(answer.get("result").is_none(), "{answer}");
    assert!(answer["error"]["code"].is_i64(), "{answer}");
    assert_ne!(
        answer["error"]["code"], -32004,
        "it does take tasks: {answer}"
    );

    fs::write(gate.join("release"), "").unwrap();
    let id = first["id"].as_str().unwrap();
    let done = session.wait_task(None, id, WAIT);
    assert_eq!(artifact_text(&done), "done first");
    // With the slot free again, a task is taken.
    let third = session.send(None, "third", true);
    assert_eq!(artifact_text(&third), "done third");
}

#[test]
fn a_full_queue_refuses_the_next_task_and_the_queued_one_runs_later() {
    let home = Home::new();
    let gate = home.dir("gate");
    let manifest = home.write_capsule(
        "queued",
        json!({"name": "queued", "version": "1",
               "lifecycle": {"task_acceptance": "queue", "concurrency": 1, "queue_depth": 1}}),
        Some(&gated_script(&gate)),
    );
    let session = home.start(&[manifest.to_str().unwrap()]);
    let first = session.send(None, "one", false);
    let second = session.send(None, "two", false);
    assert_eq!(
        state(&second),
        "submitted",
        "queued behind the first: {second}"
    );
    let third = session.rpc(None, "message/send", send_params(&["three"], false));
    assert!(third.get("result").is_none(), "{third}");
    assert!(third["error"]["code"].is_i64(), "{third}");

    fs::write(gate.join("release"), "").unwrap();
    for (task, text) in [(&first, "done one"), (&second, "done two")] {
        let done = session.wait_task(None, task["id"].as_str().unwrap(), WAIT);
        assert_eq!(state(&done), "completed", "{done}");
        assert_eq!(artifact_text(&done), text);
    }
}

#[test]
fn acceptance_none_takes_no_tasks() {
    let home = Home::new();
    let manifest = home.write_capsule(
        "closed",
        json!({"name": "closed", "version": "1", "lifecycle": {"task_acceptance": "none"}}),
        Some("#!/bin/sh\necho should-not-run\n"),
    );
    let session = home.start(&[manifest.to_str().unwrap()]);
    assert_eq!(
        session.call_err(None, "message/send", send_params(&["hi"], true)),
        -32004
    );
}

// ---------------------------------------------------------------------------------------------
// --task
// ---------------------------------------------------------------------------------------------

#[test]
fn task_mode_prints_the_answer_and_passes_the_outcome_through() {
    let home = Home::new();
    let out = home.mur(&["run", "--task", "hello there"]);
    out.expect_code(0);
    assert_eq!(out.stdout, "hello there\n");
    assert!(
        home.running_entries().is_empty(),
        "{:?}",
        home.running_entries()
    );

    let failing = home.write_capsule(
        "failing",
        json!({"name": "failing", "version": "1"}),
        Some("#!/bin/sh\ncat >/dev/null\necho 'it broke' >&2\nexit 7\n"),
    );
    let out = home.mur(&["run", failing.to_str().unwrap(), "--task", "x"]);
    out.expect_code(1);
    assert_eq!(out.stdout, "", "no answer on stdout");
    assert!(out.stderr.contains("it broke"), "{:?}", out.stderr);

    let upper = home.write_capsule(
        "upper",
        json!({"name": "upper", "version": "1"}),
        Some("#!/bin/sh\ntr a-z A-Z\n"),
    );
    let mut command = home.command(&["run", upper.to_str().unwrap(), "--task", "-"]);
    command.stdin(Stdio::piped());
    let out = run_to_end(command, Some(b"from stdin\n"), MUR_DEADLINE);
    out.expect_code(0);
    assert_eq!(out.stdout, "FROM STDIN\n");
    assert!(
        home.running_entries().is_empty(),
        "{:?}",
        home.running_entries()
    );
}

/// `echo hi | mur run --task -` is the task "hi": echo answers it once, with one newline.
#[test]
fn a_task_from_stdin_loses_its_line_newline() {
    let home = Home::new();
    let mut command = home.command(&["run", "--task", "-"]);
    command.stdin(Stdio::piped());
    let out = run_to_end(command, Some(b"hi\n"), MUR_DEADLINE);
    out.expect_code(0);
    assert_eq!(out.stdout, "hi\n");
}

/// `mur run --task - < /dev/zero` must not read all of memory: past the door's 1 MiB request
/// bound it is a usage error naming the limit, and no session is left behind.
#[test]
fn a_task_on_stdin_larger_than_a_request_is_refused_naming_the_limit() {
    let home = Home::new();
    let mut command = home.command(&["run", "--task", "-"]);
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // mur stops reading past the limit: the rest of the write may meet a closed pipe.
    let writer = std::thread::spawn(move || {
        let _ = std::io::Write::write_all(&mut stdin, &vec![b'x'; 2 << 20]);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("larger than 1 MiB"), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(home.running_entries().is_empty());
}

/// The current directory is read only when no `--workdir` is given: a session started from a
/// directory that was deleted still runs where it is told to, and without one says what to do.
#[test]
fn a_deleted_current_directory_matters_only_without_workdir() {
    let home = Home::new();
    let gone = home.dir("gone");
    let workdir = home.dir("work");
    let script = format!(
        "cd {gone} && rmdir {gone} && exec {mur} run --workdir {work} --task hi",
        gone = gone.display(),
        mur = mur_bin(),
        work = workdir.display()
    );
    let mut command = Command::new("sh");
    command.args(["-c", &script]).env("HOME", home.path());
    let out = run_to_end(command, None, MUR_DEADLINE);
    out.expect_code(0);
    assert_eq!(out.stdout, "hi\n");

    fs::create_dir(&gone).unwrap();
    let script = format!(
        "cd {gone} && rmdir {gone} && exec {mur} run --task hi",
        gone = gone.display(),
        mur = mur_bin()
    );
    let mut command = Command::new("sh");
    command.args(["-c", &script]).env("HOME", home.path());
    let out = run_to_end(command, None, MUR_DEADLINE);
    out.expect_code(1);
    assert!(out.stderr.contains("give --workdir DIR"), "{}", out.stderr);
}

/// A child that leaves the handler's process group (`setsid`) and keeps its stdout open can
/// neither hold the task past its end nor outlive it: the session, a subreaper, ends it.
#[test]
fn a_child_escaping_the_handlers_group_neither_hangs_the_task_nor_outlives_it() {
    let home = Home::new();
    let pid_file = home.dir("escape").join("escaped.pid");
    let script = format!(
        "#!/bin/sh\ncat >/dev/null\nsetsid sleep 30 &\necho $! > {}\necho done\n",
        pid_file.display()
    );
    let capsule = home.write_capsule(
        "escape",
        json!({"name": "escape", "version": "1", "lifecycle": {"task_timeout_secs": 20}}),
        Some(&script),
    );
    let started = Instant::now();
    let out = home.mur(&["run", capsule.to_str().unwrap(), "--task", "x"]);
    out.expect_code(0);
    assert_eq!(out.stdout, "done\n");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the task waited for the escaped child: {:?}",
        started.elapsed()
    );
    let escaped: i32 = fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    wait_until(
        Duration::from_secs(5),
        "the escaped child to be gone",
        || {
            // SAFETY: signal 0 only checks existence.
            let probe = unsafe { libc::kill(escaped, 0) };
            probe != 0
        },
    );
}

// ---------------------------------------------------------------------------------------------
// An authenticated door
// ---------------------------------------------------------------------------------------------

/// Every token's MAC part, which nothing but `mur token` may ever print.
fn secret_parts(tokens: &[&str]) -> Vec<String> {
    tokens
        .iter()
        .map(|t| t.rsplit('.').next().unwrap().to_string())
        .collect()
}

/// The `guarded` capsule: an authenticated door with three credentials (a reader, a writer
/// and another writer) whose handler answers `got LINE`.
fn guarded_capsule(home: &Home) -> PathBuf {
    home.write_capsule(
        "guarded",
        json!({"name": "guarded", "version": "1",
        "network": {"authentication": {"credentials": [
            {"name": "reader", "scopes": ["tasks/get"]},
            {"name": "writer", "scopes": ["message/send", "tasks/get"]},
            {"name": "other", "scopes": ["message/send", "tasks/get"]},
        ]}}}),
        Some("#!/bin/sh\nread line\necho \"got $line\"\n"),
    )
}

/// The door tokens `mur token` prints for the guarded session.
struct GuardedTokens {
    operator: String,
    reader: String,
    writer: String,
    other: String,
}

impl GuardedTokens {
    /// Every token, checked to be well formed, the operator's the one in the record.
    fn of(home: &Home, session: &Session) -> Self {
        let tokens = GuardedTokens {
            operator: home.token(&[]),
            reader: home.token(&["@1", "reader"]),
            writer: home.token(&["@1", "writer"]),
            other: home.token(&[&session.id, "other"]),
        };
        for token in tokens.all() {
            assert!(
                token.starts_with("mdt1.") && token.split('.').count() == 3,
                "{token}"
            );
        }
        assert_eq!(
            home.record(&session.id)["door_token"],
            tokens.operator.as_str()
        );
        tokens
    }

    /// operator, reader, writer, other.
    fn all(&self) -> [&String; 4] {
        [&self.operator, &self.reader, &self.writer, &self.other]
    }
}

/// Fail unless `refused` is a 401 naming the guarded realm.
#[track_caller]
fn assert_401_with_realm(refused: &HttpResponse, what: &str) {
    assert_eq!(refused.status, 401, "{what}: {}", refused.text());
    assert_eq!(
        refused.header("www-authenticate"),
        Some("Bearer realm=\"guarded\"")
    );
}

/// Wrong, forged and truncated tokens, whatever part is wrong; one is a token from another
/// session of the capsule at `manifest`.
fn bad_tokens(operator: &str, writer: &str, manifest: &Path) -> Vec<String> {
    let (head, rest) = writer.split_once('.').unwrap();
    let (_payload, mac) = rest.split_once('.').unwrap();
    let forged_payload = {
        // The operator's payload with the writer's MAC.
        let op_payload = operator.split('.').nth(1).unwrap();
        format!("{head}.{op_payload}.{mac}")
    };
    let bad_mac = {
        let mut m: Vec<u8> = mac.bytes().collect();
        m[0] = if m[0] == b'A' { b'B' } else { b'A' };
        format!(
            "{head}.{}.{}",
            rest.split_once('.').unwrap().0,
            String::from_utf8(m).unwrap()
        )
    };
    let wrong_session = {
        // A token from another session of the same capsule: another key.
        let home2 = Home::new();
        let manifest2 = home2.write_capsule(
            "guarded",
            serde_json::from_slice(&fs::read(manifest).unwrap()).unwrap(),
            Some("#!/bin/sh\necho x\n"),
        );
        let session2 = home2.start(&[manifest2.to_str().unwrap()]);
        let token = home2.token(&[]);
        drop(session2);
        token
    };
    vec![
        "garbage".to_string(),
        "mdt1.e30.AAAA".to_string(),
        forged_payload,
        bad_mac,
        wrong_session,
        operator[..operator.len() - 4].to_string(),
        operator[..operator.len() / 2].to_string(),
        format!("{operator}x"),
    ]
}

/// The writer's task: visible to the writer and the operator only; to anyone else it looks
/// exactly like an unknown one.
fn assert_a_task_is_its_owners(session: &Session, tokens: &GuardedTokens) {
    let task = session.send(Some(&tokens.writer), "mine", true);
    assert_eq!(state(&task), "completed", "{task}");
    assert_eq!(artifact_text(&task), "got mine");
    let id = task["id"].as_str().unwrap();
    assert_eq!(session.get_task(Some(&tokens.writer), id)["id"], id);
    assert_eq!(session.get_task(Some(&tokens.operator), id)["id"], id);
    let unknown = json!({"id": "tsk_0190f0f0f0f07000800000000000abcd"});
    for stranger in [&tokens.reader, &tokens.other] {
        let hidden = session.rpc(Some(stranger), "tasks/get", json!({"id": id}));
        let missing = session.rpc(Some(stranger), "tasks/get", unknown.clone());
        assert_eq!(hidden["error"]["code"], -32001, "{hidden}");
        assert_eq!(
            hidden["error"], missing["error"],
            "someone else's task looks exactly like an unknown one"
        );
    }
}

/// The public card hides the session; the extended card (both method names) names it.
fn assert_only_the_extended_card_names_the_session(session: &Session, operator: &str) {
    let card = session.card();
    assert_eq!(session_of(&card), None, "{card}");
    assert_eq!(card["supportsAuthenticatedExtendedCard"], true);
    assert_eq!(card["capabilities"]["extendedAgentCard"], true);
    // The bearer scheme in both generations' shapes.
    let scheme = &card["securitySchemes"]["bearer"];
    assert_eq!(
        (&scheme["type"], &scheme["scheme"]),
        (&json!("http"), &json!("Bearer"))
    );
    assert_eq!(scheme["httpAuthSecurityScheme"]["scheme"], "Bearer");
    assert_eq!(card["security"], json!([{"bearer": []}]));
    assert_eq!(
        card["securityRequirements"][0]["schemes"]["bearer"],
        json!({"list": []})
    );
    let extended = session.call(
        Some(operator),
        "agent/getAuthenticatedExtendedCard",
        json!({}),
    );
    assert_eq!(session_of(&extended), Some(session.id.clone()));
    let v1 = session.call(Some(operator), "GetExtendedAgentCard", json!({}));
    assert_eq!(session_of(&v1), Some(session.id.clone()));
}

/// `mur ps` probes the session with the record's operator token, and prints no token's MAC.
fn assert_ps_probes_it_printing_no_token(home: &Home, session: &Session, tokens: &GuardedTokens) {
    let ps = home.mur(&["ps", "--json"]);
    ps.expect_code(0);
    let entry = &ps.json()["capsules"][0];
    assert_eq!(entry["session_id"], session.id.as_str());
    assert_eq!(entry["status"], "running", "{entry}");
    assert_eq!(entry["authenticated"], true);
    for part in secret_parts(&[&tokens.operator, &tokens.reader, &tokens.writer]) {
        assert!(!ps.stdout.contains(&part) && !ps.stderr.contains(&part));
    }
}

/// Nothing mur run printed, start to end, holds a token (nor any token's MAC).
fn assert_printed_no_token(stdout: &str, stderr: &str, tokens: &GuardedTokens) {
    for token in tokens.all() {
        assert!(!stdout.contains(token.as_str()) && !stderr.contains(token.as_str()));
    }
    let all = tokens.all().map(String::as_str);
    for part in secret_parts(&all) {
        assert!(
            !stdout.contains(&part) && !stderr.contains(&part),
            "stdout {stdout:?} stderr {stderr:?}"
        );
    }
    assert!(!stdout.contains("mdt1") && !stderr.contains("mdt1"));
}

#[test]
fn an_authenticated_door_checks_tokens_scopes_and_task_ownership() {
    let home = Home::new();
    let manifest = guarded_capsule(&home);
    let mut session = home.start(&[manifest.to_str().unwrap()]);
    let tokens = GuardedTokens::of(&home, &session);
    let operator = &tokens.operator;

    // No token: 401 with the realm.
    let send = send_params(&["hi"], true);
    let refused = session.rpc_http(None, "message/send", send.clone());
    assert_401_with_realm(&refused, "no token");

    // Wrong, forged and truncated tokens: 401, whatever part is wrong.
    for bad in bad_tokens(operator, &tokens.writer, &manifest) {
        let refused = session.rpc_http(Some(&bad), "message/send", send.clone());
        assert_401_with_realm(&refused, &format!("token {bad:?}"));
    }
    // Not a bearer scheme.
    let mut conn = session.connect();
    let basic = format!("Basic {operator}");
    let refused = conn.request(
        "POST",
        "/",
        &[("Authorization", &basic)],
        json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(refused.status, 401);

    // The reader may not send: 403.
    let forbidden = session.rpc_http(Some(&tokens.reader), "message/send", send.clone());
    assert_eq!(forbidden.status, 403, "{}", forbidden.text());

    assert_a_task_is_its_owners(&session, &tokens);
    assert_only_the_extended_card_names_the_session(&session, operator);
    assert_ps_probes_it_printing_no_token(&home, &session, &tokens);

    // Nothing mur run printed, start to end, holds a token.
    session.signal(libc::SIGTERM);
    assert_eq!(session.wait_exit(WAIT).code(), Some(143));
    let (stdout, stderr) = session.printed();
    assert_printed_no_token(&stdout, &stderr, &tokens);
}

// ---------------------------------------------------------------------------------------------
// Control
// ---------------------------------------------------------------------------------------------

/// The `tuned` capsule (setting STYLE, secret API_KEY): its handler writes the API_KEY it
/// sees to `seen/api_key` and answers `style=STYLE`.
fn tuned_capsule(home: &Home, seen: &Path) -> PathBuf {
    let script = format!(
        "#!/bin/sh\n\
         cat > /dev/null\n\
         printf '%s' \"${{API_KEY-unset}}\" > '{seen}/api_key'\n\
         printf 'style=%s' \"${{STYLE-unset}}\"\n",
        seen = seen.display()
    );
    home.write_capsule(
        "tuned",
        json!({"name": "tuned", "version": "1",
               "control": {"settings": ["STYLE"], "secrets": ["API_KEY"]}}),
        Some(&script),
    )
}

/// The session's control file, private, and the control token `mur token --control` prints,
/// which is what the file holds.
fn control_file_and_token(home: &Home, session: &Session) -> (PathBuf, String) {
    let control_path = home.control_path(&session.id);
    assert!(control_path.exists());
    assert_eq!(mode_of(&control_path), 0o600);
    let control = home.token(&["--control"]);
    assert!(control.starts_with("ctl1."), "{control}");
    assert_eq!(
        fs::read_to_string(&control_path).unwrap().trim_end(),
        control
    );
    (control_path, control)
}

/// Without (or with a wrong) control token: 401, nothing set; a door token is not a control
/// token (this door has none; an mdt1-looking one fails too).
fn assert_control_needs_its_token(conn: &mut Http) {
    for headers in [vec![], vec![("Authorization", "Bearer ctl1.e30.AAAA")]] {
        let refused = conn.request(
            "PUT",
            "/control/settings/STYLE",
            &headers,
            br#"{"value":"bad"}"#,
        );
        assert_eq!(refused.status, 401, "{}", refused.text());
        let refused = conn.request("PUT", "/control/secrets/API_KEY", &headers, b"bad");
        assert_eq!(refused.status, 401);
        let refused = conn.request("GET", "/control", &headers, b"");
        assert_eq!(refused.status, 401);
    }
    let refused = conn.request(
        "GET",
        "/control",
        &[("Authorization", "Bearer mdt1.e30.AAAA")],
        b"",
    );
    assert_eq!(refused.status, 401);
}

/// With the `control` token: sets STYLE=terse and API_KEY=`secret`, is refused an undeclared
/// name, and lists both as set. Returns every response body.
fn set_style_and_secret(conn: &mut Http, control: &str, secret: &str) -> Vec<String> {
    let auth = format!("Bearer {control}");
    let mut responses: Vec<String> = vec![];
    let put = conn.request(
        "PUT",
        "/control/settings/STYLE",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        br#"{"value":"terse"}"#,
    );
    assert_eq!(put.status, 200, "{}", put.text());
    assert_eq!(
        put.json(),
        json!({"name": "STYLE", "previous": null, "value": "terse", "applies_from": "next_task"}),
        "the original runtime's answer shape"
    );
    responses.push(put.text());
    let put = conn.request(
        "PUT",
        "/control/secrets/API_KEY",
        &[("Authorization", &auth)],
        secret.as_bytes(),
    );
    assert_eq!(put.status, 200, "{}", put.text());
    assert_eq!(
        put.json(),
        json!({"name": "API_KEY", "set": true, "replaced": false})
    );
    responses.push(put.text());
    // Undeclared names are refused.
    let put = conn.request(
        "PUT",
        "/control/settings/OTHER",
        &[("Authorization", &auth)],
        br#"{"value":"x"}"#,
    );
    assert_eq!(put.status, 404);
    responses.push(put.text());

    let listing = conn.request("GET", "/control", &[("Authorization", &auth)], b"");
    assert_eq!(listing.status, 200);
    responses.push(listing.text());
    let listing = listing.json();
    assert_eq!(
        (&listing["settings"], &listing["secrets"]),
        (
            &json!([{"name": "STYLE", "value": "terse"}]),
            &json!([{"name": "API_KEY", "set": true}])
        ),
        "{listing}"
    );
    responses
}

#[test]
fn control_settings_and_secrets_reach_the_next_task_and_secrets_never_leave() {
    let home = Home::new();
    let seen = home.dir("seen");
    let manifest = tuned_capsule(&home, &seen);
    let mut session = home.start(&[manifest.to_str().unwrap()]);
    let (control_path, control) = control_file_and_token(&home, &session);

    let secret = "s3cr3t-VALUE-9f8e7d";

    // Before: nothing set.
    let before = session.send(None, "a", true);
    assert_eq!(artifact_text(&before), "style=unset");
    assert_eq!(fs::read_to_string(seen.join("api_key")).unwrap(), "unset");

    let mut conn = session.connect();
    assert_control_needs_its_token(&mut conn);
    let mut responses = set_style_and_secret(&mut conn, &control, secret);

    // The next task sees both.
    let after = session.send(None, "b", true);
    assert_eq!(artifact_text(&after), "style=terse");
    assert_eq!(fs::read_to_string(seen.join("api_key")).unwrap(), secret);
    responses.push(after.to_string());
    responses.push(
        session
            .get_task(None, after["id"].as_str().unwrap())
            .to_string(),
    );
    responses.push(session.card().to_string());

    for response in &responses {
        assert!(!response.contains(secret), "the secret leaked: {response}");
    }

    // The control file goes with the record when the session ends.
    session.signal(libc::SIGTERM);
    assert_eq!(session.wait_exit(WAIT).code(), Some(143));
    assert!(!control_path.exists());
    assert!(!home.record_path(&session.id).exists());
    assert!(
        home.running_entries().is_empty(),
        "{:?}",
        home.running_entries()
    );
    let (stdout, stderr) = session.printed();
    let control_mac = control.rsplit('.').next().unwrap();
    for printed in [&stdout, &stderr] {
        assert!(!printed.contains(secret) && !printed.contains(control_mac));
    }
}

// ---------------------------------------------------------------------------------------------
// Lifecycle
// ---------------------------------------------------------------------------------------------

fn control_capsule(home: &Home) -> PathBuf {
    home.write_capsule(
        "ctl",
        json!({"name": "ctl", "version": "1", "control": {"settings": ["STYLE"]}}),
        Some("#!/bin/sh\ncat\n"),
    )
}

#[test]
fn sigterm_ends_the_session_with_143_and_removes_its_files() {
    let home = Home::new();
    let manifest = control_capsule(&home);
    let mut session = home.start(&[manifest.to_str().unwrap()]);
    let record = home.record_path(&session.id);
    let control = home.control_path(&session.id);
    assert!(record.exists() && control.exists());
    session.signal(libc::SIGTERM);
    let status = session.wait_exit(WAIT);
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert!(!record.exists(), "the record is removed");
    assert!(!control.exists(), "the control file is removed");
}

#[test]
fn sigint_ends_the_session_with_130() {
    let home = Home::new();
    let mut session = home.start(&[]);
    let record = home.record_path(&session.id);
    assert!(record.exists());
    session.signal(libc::SIGINT);
    assert_eq!(session.wait_exit(WAIT).code(), Some(130));
    assert!(!record.exists());
}

#[test]
fn sighup_ends_the_session_with_143() {
    let home = Home::new();
    let mut session = home.start(&[]);
    session.signal(libc::SIGHUP);
    assert_eq!(session.wait_exit(WAIT).code(), Some(143));
    assert!(home.running_entries().is_empty());
}

#[test]
fn after_sigkill_the_record_stays_until_ps_prunes_it() {
    let home = Home::new();
    let mut session = home.start(&[]);
    let record = home.record_path(&session.id);
    session.signal(libc::SIGKILL);
    let status = session.wait_exit(WAIT);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
    assert!(record.exists(), "a SIGKILLed session writes no farewell");
    let ps = home.mur(&["ps", "--json"]);
    ps.expect_code(0);
    assert_eq!(ps.json()["capsules"], json!([]));
    assert!(ps.stderr.contains("pruned 1"), "{:?}", ps.stderr);
    assert!(!record.exists(), "mur ps pruned it");
}

#[test]
fn eof_on_the_lifeline_ends_the_session_with_143() {
    let home = Home::new();
    let mut command = home.command(&["run", "--json"]);
    let mut lifeline = Lifeline::attach(&mut command);
    let mut session = Session::spawn(command);
    lifeline.spawned();
    let record = home.record(&session.id);
    assert_eq!(record["formation_lifeline"], true, "{record}");
    // Alive while the lifeline is open.
    assert!(session.alive());
    assert_eq!(state(&session.send(None, "still here", true)), "completed");
    lifeline.cut();
    let status = session.wait_exit(WAIT);
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert!(
        home.running_entries().is_empty(),
        "{:?}",
        home.running_entries()
    );
}

#[test]
fn mur_stop_ends_a_live_session_through_session_stop() {
    let home = Home::new();
    let mut session = home.start(&[]);
    let stop = home.mur(&["stop", "@1"]);
    stop.expect_code(0);
    let line = stop.stdout.lines().next().unwrap_or("");
    assert!(line.starts_with("stopped: "), "{:?}", stop.stdout);
    assert!(line.contains(&session.id), "{line}");
    assert!(line.ends_with("session/stop"), "{line}");
    assert_eq!(session.wait_exit(WAIT).code(), Some(143));
    assert!(home.running_entries().is_empty());
}

#[test]
fn session_stop_over_the_door_ends_the_session() {
    let home = Home::new();
    let mut session = home.start(&[]);
    let result = session.call(None, "session/stop", json!({}));
    assert_eq!(result["stopping"], true, "{result}");
    assert_eq!(session.wait_exit(WAIT).code(), Some(143));
    assert!(home.running_entries().is_empty());
}

#[test]
fn sigterm_with_a_task_running_takes_the_handlers_group_down_too() {
    let home = Home::new();
    let dir = home.dir("pids");
    let manifest = home.write_capsule(
        "busy",
        json!({"name": "busy", "version": "1"}),
        Some(&group_script(&dir)),
    );
    let mut session = home.start(&[manifest.to_str().unwrap()]);
    let task = session.send(None, "work", false);
    assert!(["working", "submitted"].contains(&state(&task).as_str()));
    let pids = group_pids(&dir);
    session.signal(libc::SIGTERM);
    let status = session.wait_exit(WAIT);
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert_group_ended(&dir, &pids, "the running handler's group");
    assert!(home.running_entries().is_empty());
}

#[test]
fn a_second_signal_ends_the_session_at_once() {
    let home = Home::new();
    let dir = home.dir("pids");
    // Every process in the group ignores SIGTERM: only the session's SIGKILL ends it, which the
    // orderly end sends 2 s after SIGTERM, and a second signal sends at once.
    let script = format!(
        "#!/bin/sh\n\
         exec < /dev/null\n\
         trap '' TERM\n\
         echo $$ > '{dir}/pids.tmp'\n\
         sleep 120 &\n\
         echo $! >> '{dir}/pids.tmp'\n\
         mv '{dir}/pids.tmp' '{dir}/pids'\n\
         wait\n",
        dir = dir.display()
    );
    let manifest = home.write_capsule(
        "stubborn",
        json!({"name": "stubborn", "version": "1"}),
        Some(&script),
    );
    let mut session = home.start(&[manifest.to_str().unwrap()]);
    session.send(None, "hold on", false);
    let pids = read_pids(&dir.join("pids"), 2);
    let first = Instant::now();
    session.signal(libc::SIGTERM);
    // Once the session has begun its orderly end it takes no tasks.
    wait_until(WAIT, "the session to stop taking tasks", || {
        let answer = session.rpc(None, "message/send", send_params(&["more"], false));
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("stopping"))
    });
    assert!(
        session.alive(),
        "still winding down: its handler ignores SIGTERM"
    );
    let second = Instant::now();
    session.signal(libc::SIGTERM);
    let status = session.wait_exit(WAIT);
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert!(
        second.elapsed() < Duration::from_millis(1500)
            && first.elapsed() < Duration::from_millis(1900),
        "the second signal ended it at once, not after the 2 s grace: {:?} after the first",
        first.elapsed()
    );
    assert_all_dead(&pids, Duration::from_secs(5), "the handler's group");
    assert!(home.running_entries().is_empty());
}

#[test]
fn readiness_reaches_notify_socket_after_the_record_is_written() {
    let home = Home::new();
    let socket_path = home.path().join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&socket_path).unwrap();
    socket.set_read_timeout(Some(WAIT)).unwrap();
    let mut command = home.command(&["run", "--json"]);
    command.env("NOTIFY_SOCKET", &socket_path);
    let session = Session::spawn(command);
    let mut buf = [0u8; 64];
    let n = socket.recv(&mut buf).expect("READY=1 on NOTIFY_SOCKET");
    assert_eq!(&buf[..n], b"READY=1");
    assert!(home.record_path(&session.id).exists());
}

/// What `systemctl status` shows: a `STATUS=` line as the session's tasks change (sent only
/// changed), then `STOPPING=1` when it winds down; to an abstract socket (`@name`) too, as
/// systemd names one.
#[cfg(target_os = "linux")]
#[test]
fn the_service_manager_hears_the_tasks_and_the_stop() {
    use std::os::linux::net::SocketAddrExt;
    let home = Home::new();
    let name = format!("mur-test-notify-{}", std::process::id());
    let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let socket = std::os::unix::net::UnixDatagram::bind_addr(&address).unwrap();
    socket.set_read_timeout(Some(WAIT)).unwrap();
    let mut command = home.command(&["run", "--json"]);
    command.env("NOTIFY_SOCKET", format!("@{name}"));
    let mut session = Session::spawn(command);
    let mut heard = Vec::new();
    let next = || {
        let mut buf = [0u8; 256];
        let n = socket.recv(&mut buf).expect("a notification");
        String::from_utf8(buf[..n].to_vec()).unwrap()
    };
    heard.push(next());
    heard.push(next());
    assert_eq!(heard[0], "READY=1");
    assert_eq!(
        heard[1],
        "STATUS=0 tasks running, 0 queued, 0 waiting for input, 0 ended"
    );
    let answer = common::http::post(&session.url, None, &common::session::send_body("hi"));
    assert_eq!(answer.status, 200, "{}", answer.text());
    let ended = next();
    assert_eq!(
        ended, "STATUS=0 tasks running, 0 queued, 0 waiting for input, 1 ended",
        "{heard:?}"
    );
    session.signal(libc::SIGTERM);
    let stopping = next();
    assert!(
        stopping.starts_with("STOPPING=1\nSTATUS=stopping"),
        "{stopping:?}"
    );
    assert_eq!(session.wait_exit(WAIT).code(), Some(143));
}

#[test]
fn files_are_private_even_under_umask_000() {
    let home = Home::new();
    let manifest = control_capsule(&home);
    let mut command = Command::new("/bin/sh");
    command
        .args([
            "-c",
            "umask 000; exec \"$0\" run --json \"$1\"",
            mur_bin(),
            manifest.to_str().unwrap(),
        ])
        .env("HOME", home.path())
        .env_remove("MURMUR_FORMATION_LIFELINE")
        .current_dir(home.path());
    let session = Session::spawn(command);
    assert_eq!(mode_of(&home.murmur()), 0o700);
    assert_eq!(mode_of(&home.running()), 0o700);
    assert_eq!(mode_of(&home.record_path(&session.id)), 0o600);
    assert_eq!(mode_of(&home.control_path(&session.id)), 0o600);
    // No staging files left beside them.
    let mut expected = vec![
        format!("{}.control", session.id),
        format!("{}.json", session.id),
    ];
    expected.sort();
    assert_eq!(home.running_entries(), expected);
}

#[test]
fn a_wider_murmur_home_is_re_moded() {
    let home = Home::new();
    fs::create_dir_all(home.running()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for dir in [home.murmur(), home.running()] {
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
    }
    let _session = home.start(&[]);
    assert_eq!(mode_of(&home.murmur()), 0o700);
    assert_eq!(mode_of(&home.running()), 0o700);
}

// ---------------------------------------------------------------------------------------------
// Bad manifests
// ---------------------------------------------------------------------------------------------

#[test]
fn bad_manifests_are_refused_naming_the_path_and_key_and_write_nothing() {
    let home = Home::new();
    let good = || json!({"name": "fine", "version": "1", "run": ["./handler.sh"]});
    let with = |key: &str, value: Value| {
        let mut m = good();
        m[key] = value;
        m
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        ("unknown-key", with("colour", json!("blue")), "colour"),
        ("bad-name", with("name", json!("Bad_Name")), "name"),
        ("empty-run", with("run", json!([])), "run"),
        ("missing-handler", with("run", json!(["./nope.sh"])), "run"),
        (
            "operator-credential",
            with(
                "network",
                json!({"authentication": {"credentials": [{"name": "operator", "scopes": ["tasks/get"]}]}}),
            ),
            "network.authentication.credentials",
        ),
        (
            "bad-scope",
            with(
                "network",
                json!({"authentication": {"credentials": [{"name": "r", "scopes": ["tasks/delete"]}]}}),
            ),
            "tasks/delete",
        ),
        (
            "bad-lifecycle",
            with("lifecycle", json!({"task_acceptance": "maybe"})),
            "maybe",
        ),
    ];
    let script = "#!/bin/sh\ncat\n";
    for (dir, manifest, key) in cases {
        let path = home.write_capsule(dir, manifest, Some(script));
        let out = home.mur(&["run", path.to_str().unwrap()]);
        out.expect_code(1);
        assert!(
            out.stderr.starts_with("mur run: "),
            "{dir}: {:?}",
            out.stderr
        );
        assert!(
            out.stderr.contains(path.to_str().unwrap()),
            "{dir}: the path: {:?}",
            out.stderr
        );
        assert!(
            out.stderr.contains(key),
            "{dir}: the key {key}: {:?}",
            out.stderr
        );
        assert_eq!(out.stdout, "");
        assert!(
            home.running_entries().is_empty(),
            "{dir}: {:?}",
            home.running_entries()
        );
    }

    // A handler that exists but is not executable.
    let path = home.write_capsule("not-executable", good(), None);
    fs::write(path.parent().unwrap().join("handler.sh"), script).unwrap();
    let out = home.mur(&["run", path.to_str().unwrap()]);
    out.expect_code(1);
    assert!(
        out.stderr.contains(path.to_str().unwrap()),
        "{:?}",
        out.stderr
    );
    assert!(out.stderr.contains("run"), "{:?}", out.stderr);
    assert!(out.stderr.contains("executable"), "{:?}", out.stderr);

    // A directory holding a murmur.json is taken as its manifest; the refusal names the file.
    let path = home.write_capsule("dir-form", with("colour", json!(1)), Some(script));
    let out = home.mur(&["run", path.parent().unwrap().to_str().unwrap()]);
    out.expect_code(1);
    assert!(
        out.stderr.contains(path.to_str().unwrap()),
        "{:?}",
        out.stderr
    );

    // --capsule-sha256 that does not match.
    let path = home.write_capsule("digest", good(), Some(script));
    let wrong = "0".repeat(64);
    let out = home.mur(&["run", path.to_str().unwrap(), "--capsule-sha256", &wrong]);
    out.expect_code(1);
    assert!(
        out.stderr.contains(path.to_str().unwrap()),
        "{:?}",
        out.stderr
    );
    assert!(out.stderr.contains("sha256"), "{:?}", out.stderr);
    // ... and one that does starts.
    let digest = sha256_of_file(&path);
    let session = home.start(&[path.to_str().unwrap(), "--capsule-sha256", &digest]);
    assert_eq!(session.ready["name"], "fine");
    drop(session);

    assert!(
        home.running_entries().is_empty(),
        "{:?}",
        home.running_entries()
    );
}

/// `sha256sum`'s digest of a file (the tests take no hashing dependency).
fn sha256_of_file(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

/// A handler file still open for writing somewhere (just written; or its writer's descriptor
/// inherited by a child another thread forked and has not yet exec'd) makes exec fail ETXTBSY for
/// a moment: the task waits that out instead of failing.
#[test]
fn a_handler_busy_for_a_moment_still_runs() {
    let home = Home::new();
    let manifest = home.write_capsule(
        "busy",
        json!({"name": "busy", "version": "1.0.0"}),
        Some("#!/bin/sh\necho \"ran $(cat)\"\n"),
    );
    let script = manifest.parent().unwrap().join("handler.sh");
    let session = home.start(&[manifest.to_str().unwrap()]);
    let writer = fs::OpenOptions::new().write(true).open(&script).unwrap();
    let task = session.send(None, "late", false);
    std::thread::sleep(Duration::from_millis(60));
    drop(writer);
    let id = task["id"].as_str().unwrap();
    let done = session.wait_task(None, id, WAIT);
    assert_eq!(state(&done), "completed", "{done}");
    assert_eq!(artifact_text(&done), "ran late");
}

/// Issue 21: `--advertise-url` (and `network.advertise_url`) is the URL the card advertises, in
/// both generations' members; the record keeps the bind address, so `mur ps` still probes it.
#[test]
fn the_card_advertises_the_advertise_url_and_the_record_keeps_the_bind_address() {
    let home = Home::new();
    let advertised = "http://203.0.113.7:18080/";
    let session = home.start(&["--advertise-url", advertised]);
    let card = session.card();
    assert_eq!(card["url"], advertised, "{card}");
    for interface in card["supportedInterfaces"].as_array().unwrap() {
        assert_eq!(interface["url"], advertised, "{card}");
    }
    assert!(session.url.starts_with("127.0.0.1:"), "{}", session.url);
    assert_eq!(home.record(&session.id)["url"], session.url.as_str());
    let ps = home.mur(&["ps", "--format", "{{.status}} {{.url}}"]);
    ps.expect_code(0);
    assert_eq!(ps.stdout, format!("running {}\n", session.url));

    let manifest = home.write_capsule(
        "mapped",
        json!({"name": "mapped", "version": "1", "network": {"advertise_url": "https://agents.example.com/mapped/"}}),
        Some("#!/bin/sh\ncat\n"),
    );
    let mapped = home.start(&[manifest.to_str().unwrap()]);
    assert_eq!(mapped.card()["url"], "https://agents.example.com/mapped/");
    let flag_wins = home.start(&[manifest.to_str().unwrap(), "--advertise-url", advertised]);
    assert_eq!(flag_wins.card()["url"], advertised);

    for bad in ["203.0.113.7:18080", "ftp://x/", "http://", "http://a b/"] {
        let out = home.mur(&["run", "--advertise-url", bad, "--task", "x"]);
        out.expect_code(2);
        assert!(
            out.stderr.contains("--advertise-url"),
            "{bad}: {}",
            out.stderr
        );
    }
    let wrong = home.write_capsule(
        "wrong",
        json!({"name": "wrong", "version": "1", "network": {"advertise_url": "localhost:8080"}}),
        Some("#!/bin/sh\ncat\n"),
    );
    let out = home.mur(&["run", wrong.to_str().unwrap(), "--task", "x"]);
    out.expect_code(1);
    assert!(
        out.stderr.contains("network.advertise_url"),
        "{}",
        out.stderr
    );
}

/// Issue 21: `mur run -d` returns once the record is written and the door answers, printing the
/// session id (the readiness line with --json); a session that cannot come up is a non-zero
/// exit with its reason, and leaves nothing running.
#[test]
fn detach_returns_once_the_door_answers_and_fails_cleanly() {
    let home = Home::new();
    let out = home.mur(&["run", "-d"]);
    out.expect_code(0);
    let id = out.stdout.trim_end().to_string();
    assert!(
        id.starts_with("ses_") && out.stdout.ends_with('\n'),
        "{}",
        out.stdout
    );
    // Up already: no waiting, no timing.
    let record = home.record(&id);
    let url = record["url"].as_str().unwrap().to_string();
    let card = Http::connect(&url).get("/.well-known/agent-card.json");
    assert_eq!(card.status, 200);
    let ps = home.mur(&[
        "ps",
        "--format",
        "{{.session_id}} {{.status}} {{.outlives_launcher}}",
    ]);
    assert_eq!(ps.stdout, format!("{id} running true\n"));

    let json_out = home.mur(&["run", "--detach", "--json"]);
    json_out.expect_code(0);
    let ready: Value = serde_json::from_str(json_out.stdout.trim_end()).unwrap();
    assert!(
        ready["session_id"].as_str().unwrap().starts_with("ses_"),
        "{ready}"
    );
    assert_eq!(json_out.stdout.lines().count(), 1);

    let bad = home.write_capsule("bad", json!({"name": "Bad!", "version": "1"}), None);
    let failed = home.mur(&["run", "-d", bad.to_str().unwrap()]);
    failed.expect_code(1);
    assert!(
        failed
            .stderr
            .starts_with("mur run: the session did not come up")
            && failed.stderr.contains("name"),
        "{}",
        failed.stderr
    );
    home.mur(&["run", "-d", "--task", "x"]).expect_code(2);

    let stop = home.mur(&["stop", "--all"]);
    stop.expect_code(0);
    assert!(
        home.running_entries().is_empty(),
        "{:?}",
        home.running_entries()
    );
}

// ---------------------------------------------------------------------------------------------
// Issue 21: no silent fallback, capsule authoring, usage errors, the door's pointers
// ---------------------------------------------------------------------------------------------

#[test]
fn the_embedded_echo_serves_only_without_a_murmur_json_and_says_so() {
    let home = Home::new();
    let out = home.mur(&["run", "--task", "hi"]);
    out.expect_code(0);
    assert_eq!(out.stdout, "hi\n");
    assert!(
        out.stderr.contains("serving the embedded 'echo' capsule"),
        "the fallback is said on stderr: {}",
        out.stderr
    );
    // A named capsule is never replaced by the echo, nor is a murmur.json that is here but
    // broken (a dangling link): its error, exit 1, no answer.
    let out = home.mur(&["run", "no-such-capsule", "--task", "hi"]);
    out.expect_code(1);
    assert!(!out.stderr.contains("embedded"), "{}", out.stderr);
    std::os::unix::fs::symlink(
        home.path().join("gone.json"),
        home.path().join("murmur.json"),
    )
    .unwrap();
    let out = home.mur(&["run", "--task", "hi"]);
    out.expect_code(1);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.contains("murmur.json") && !out.stderr.contains("embedded"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_handler_gets_mur_capsule_dir_and_a_bare_run_name_beside_the_manifest_gets_a_hint() {
    let home = Home::new();
    let manifest = home.write_capsule(
        "dirty",
        json!({"name": "dirty", "version": "1"}),
        Some("#!/bin/sh\nprintf '%s|%s' \"$MUR_CAPSULE_DIR\" \"$(pwd)\"\n"),
    );
    let capsule_dir = fs::canonicalize(manifest.parent().unwrap()).unwrap();
    let workdir = home.dir("work");
    let expected = format!("{}|{}", capsule_dir.display(), workdir.display());
    // Named by path, from elsewhere.
    let out = home.mur(&[
        "run",
        manifest.to_str().unwrap(),
        "--task",
        "x",
        "--workdir",
        workdir.to_str().unwrap(),
    ]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim_end(), expected);
    // Found as ./murmur.json: still absolute.
    let mut command = common::run::mur_command(
        home.path(),
        &capsule_dir,
        &["run", "--task", "x", "--workdir", workdir.to_str().unwrap()],
    );
    command.stdin(Stdio::null());
    let out = common::run::run(command, MUR_DEADLINE);
    out.expect_code(0);
    assert_eq!(out.stdout.trim_end(), expected);

    let bare = home.write_capsule(
        "bare",
        json!({"name": "bare", "version": "1", "run": ["handler.sh"]}),
        Some("#!/bin/sh\ncat\n"),
    );
    let out = home.mur(&["run", bare.to_str().unwrap(), "--task", "x"]);
    out.expect_code(1);
    assert!(
        out.stderr.contains("not an executable on PATH")
            && out.stderr.contains("did you mean ./handler.sh?"),
        "{}",
        out.stderr
    );
}

/// Issue 32: a handler without its execute bit is named as a path without `./` in it, with the
/// command that fixes it.
#[test]
fn a_handler_that_is_not_executable_gets_a_chmod_hint_with_its_path_normalized() {
    let home = Home::new();
    let manifest = home.write_capsule(
        "unexec",
        json!({"name": "unexec", "version": "1", "run": ["./././h.sh"]}),
        None,
    );
    let handler = fs::canonicalize(manifest.parent().unwrap())
        .unwrap()
        .join("h.sh");
    fs::write(&handler, "#!/bin/sh\ncat\n").unwrap();
    let out = home.mur(&["run", manifest.to_str().unwrap(), "--task", "x"]);
    out.expect_code(1);
    let shown = handler.display();
    assert!(
        out.stderr.contains(&format!(
            "run: the handler {shown} is not executable; make it so: chmod +x {shown}"
        )),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("/./"), "{}", out.stderr);
}

/// Admission reports every problem of a manifest at once, each under its key path, in plain
/// words: never serde's (`invalid type: integer 1, expected a string at line 1 column 23`).
#[test]
fn a_manifest_with_several_problems_names_each_under_its_key_path() {
    let home = Home::new();
    let manifest = home.write_capsule(
        "broken",
        json!({"name": "broken", "version": 1, "run": ["handler.sh"],
            "lifecycle": {"concurrency": "4", "queue_depth": 100000, "bogus": true},
            "network": {"cors": ["*"]}}),
        Some("#!/bin/sh\ncat\n"),
    );
    let out = home.mur(&["run", manifest.to_str().unwrap(), "--task", "x"]);
    out.expect_code(1);
    assert_eq!(out.stdout, "");
    let head = format!("mur run: {}: 6 problems:\n", manifest.display());
    assert!(out.stderr.starts_with(&head), "{}", out.stderr);
    for line in [
        "  lifecycle: unknown field `bogus` (the fields here: ",
        "  lifecycle.concurrency: expected a whole number, found a string\n",
        "  lifecycle.queue_depth: must be 0 to 65536, not 100000\n",
        "  network.cors[0]: '*' is not an origin",
        "  run: the handler 'handler.sh' is not an executable on PATH; did you mean ./handler.sh?",
        "  version: expected a string, found the number 1\n",
    ] {
        assert!(out.stderr.contains(line), "{line:?} in:\n{}", out.stderr);
    }
    assert!(
        !out.stderr.contains("invalid type") && !out.stderr.contains(" at line "),
        "{}",
        out.stderr
    );
}

/// A handler's stdin ends in a newline (added unless the text has one), so the shell's `read`
/// sees a line; an empty text is empty stdin; and a `cat` handler still answers the text.
#[test]
fn a_handler_reads_its_task_as_a_line() {
    let home = Home::new();
    let reader = home.write_capsule(
        "reader",
        json!({"name": "reader", "version": "1", "run": ["./handler.sh"]}),
        Some("#!/bin/sh\nprintf '[%s]' \"$(od -An -c | tr -s ' \\n' ' ')\"\n"),
    );
    for (text, seen) in [
        ("hi", "[ h i \\n ]"),
        ("hi\n", "[ h i \\n ]"),
        ("a\nb", "[ a \\n b \\n ]"),
        ("", "[]"),
    ] {
        let out = home.mur(&["run", reader.to_str().unwrap(), "--task", text]);
        out.expect_code(0);
        assert_eq!(out.stdout.trim_end(), seen, "{text:?}");
    }
    let line = home.write_capsule(
        "line",
        json!({"name": "line", "version": "1", "run": ["./handler.sh"]}),
        Some("#!/bin/sh\nread -r n || exit 3\necho \"got $n\"\n"),
    );
    let out = home.mur(&["run", line.to_str().unwrap(), "--task", "42"]);
    out.expect_code(0);
    assert_eq!(out.stdout, "got 42\n");
    let cat = home.write_capsule(
        "cat",
        json!({"name": "cat", "version": "1", "run": ["cat"]}),
        None,
    );
    let out = home.mur(&["run", cat.to_str().unwrap(), "--task", "exact"]);
    out.expect_code(0);
    assert_eq!(
        out.stdout, "exact\n",
        "one newline: the answer's, printed by --task"
    );
}

#[test]
fn run_usage_errors_name_the_range_and_a_repeated_task_and_version_works_through_a_link() {
    let home = Home::new();
    let out = home.mur(&["run", "--port", "99999"]);
    out.expect_code(2);
    assert!(out.stderr.contains("0 to 65535"), "{}", out.stderr);
    for applet in ["run", "formation"] {
        let out = home.mur(&[applet, "--task", "a", "--task", "b"]);
        out.expect_code(2);
        assert!(out.stderr.contains("--task given twice"), "{}", out.stderr);
    }
    let version = home.mur(&["--version"]);
    version.expect_code(0);
    let link = home.path().join("mur-run");
    std::os::unix::fs::symlink(mur_bin(), &link).unwrap();
    let mut command = Command::new(&link);
    command
        .arg("--version")
        .env_clear()
        .env("HOME", home.path())
        .stdin(Stdio::null());
    let out = common::run::run(command, MUR_DEADLINE);
    out.expect_code(0);
    assert_eq!(out.stdout, version.stdout);
}

/// `--bind localhost` is the IPv4 loopback, never a lookup; a name that is not an address is
/// still a usage error.
#[test]
fn bind_localhost_is_the_loopback() {
    let home = Home::new();
    let session = home.start(&["--bind", "localhost"]);
    let url = session.ready["url"].as_str().unwrap_or_default();
    assert!(url.starts_with("127.0.0.1:"), "{}", session.ready);
    let mut conn = session.connect();
    assert_eq!(conn.get("/.well-known/agent-card.json").status, 200);
    let out = home.mur(&["run", "--bind", "example.invalid"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("an IP address or localhost"),
        "{}",
        out.stderr
    );
}

#[test]
fn the_door_points_a_stray_request_at_the_card() {
    let home = Home::new();
    let session = home.start(&[]);
    let mut conn = session.connect();
    let root = conn.get("/");
    assert_eq!(root.status, 405);
    assert_eq!(root.header("allow"), Some("POST"));
    assert!(
        root.text().contains("GET /.well-known/agent-card.json"),
        "{}",
        root.text()
    );
    let mut conn = session.connect();
    let nowhere = conn.get("/nowhere");
    assert_eq!(nowhere.status, 404);
    assert!(
        nowhere.text().contains("/.well-known/agent-card.json"),
        "{}",
        nowhere.text()
    );
}

/// A start that fails leaves nothing in the murmur home: not a log, not a task directory, not a
/// `TMPDIR` — whether the port is taken (the commonest failure) or the sandbox refuses what the
/// manifest declares.
#[test]
fn a_start_that_fails_leaves_nothing_behind() {
    let home = Home::new();
    let capsule = home.write_capsule(
        "cap",
        json!({"name": "cap", "version": "1"}),
        Some("#!/bin/sh\ncat\n"),
    );
    let capsule = capsule.to_str().unwrap();
    let serving = home.start(&[capsule]);
    let port = serving.url.rsplit(':').next().unwrap().to_string();
    let before = |dir: &str| common::home::list_dir(&home.murmur().join(dir));
    let (logs, tasks) = (before("logs"), before("tasks"));

    let out = home.mur(&["run", capsule, "--port", &port, "--task", "hi"]);
    out.expect_code(1);
    assert!(
        out.stderr.contains("Address already in use"),
        "{}",
        out.stderr
    );
    assert_eq!(before("logs"), logs, "a log was left");
    assert_eq!(before("tasks"), tasks, "task directories were left");

    let refused = home.write_capsule(
        "refused",
        json!({"name": "refused", "version": "1", "sandbox": {"write": ["~"]}}),
        Some("#!/bin/sh\ncat\n"),
    );
    let out = home.mur(&["run", refused.to_str().unwrap(), "--task", "hi"]);
    out.expect_code(1);
    assert!(out.stderr.contains("sandbox.write"), "{}", out.stderr);
    assert_eq!(before("logs"), logs, "a log was left");
    assert_eq!(before("tasks"), tasks, "task directories were left");
    drop(serving);
}

/// `--task`'s answer files: named on stderr when there is no `--out` (never dropped without a
/// word), written into `--out DIR` by their `out/` names (a name that would leave DIR is not
/// used); with `--json`, stdout is one JSON object — the answer, its state and files — and
/// nothing else.
#[test]
fn a_tasks_files_are_named_or_written_and_json_is_one_object() {
    let home = Home::new();
    let capsule = home.write_capsule(
        "files",
        json!({"name": "files", "version": "1"}),
        Some(
            "#!/bin/sh\nread -r name\necho \"to $name\" > \"$MUR_TASK_DIR/out/card.txt\"\n\
             echo '{\"n\": 1}' > \"$MUR_TASK_DIR/out/data.json\"\necho \"hello, $name\"\n",
        ),
    );
    let capsule = capsule.to_str().unwrap();

    let out = home.mur(&["run", capsule, "--task", "Ann"]);
    out.expect_code(0);
    assert_eq!(out.stdout, "hello, Ann\n");
    assert!(
        out.stderr.contains("2 files not written")
            && out.stderr.contains("card.txt (7 bytes)")
            && out.stderr.contains("--out DIR"),
        "{}",
        out.stderr
    );

    let dir = home.dir("answers");
    let out = home.mur(&[
        "run",
        capsule,
        "--task",
        "Bo",
        "--out",
        dir.to_str().unwrap(),
    ]);
    out.expect_code(0);
    assert_eq!(out.stdout, "hello, Bo\n");
    assert_eq!(fs::read_to_string(dir.join("card.txt")).unwrap(), "to Bo\n");
    let data: Value =
        serde_json::from_str(&fs::read_to_string(dir.join("data.json")).unwrap()).unwrap();
    assert_eq!(data, json!({"n": 1}));
    assert!(out.stderr.contains("wrote "), "{}", out.stderr);

    let out = home.mur(&[
        "run",
        capsule,
        "--task",
        "Cy",
        "--json",
        "--out",
        dir.to_str().unwrap(),
    ]);
    out.expect_code(0);
    let said: Value = serde_json::from_str(&out.stdout).expect("one JSON object, nothing else");
    assert_eq!(said["state"], "completed");
    assert_eq!(said["answer"], "hello, Cy");
    assert!(
        said["task_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("tsk_")),
        "{said}"
    );
    let files = said["files"].as_array().unwrap();
    assert_eq!(files.len(), 2, "{said}");
    assert!(files.iter().any(|f| f["name"] == "card.txt"
        && f["bytes"] == 6
        && f["path"] == dir.join("card.txt").display().to_string()));
    assert_eq!(fs::read_to_string(dir.join("card.txt")).unwrap(), "to Cy\n");

    let out = home.mur(&["run", capsule, "--out", dir.to_str().unwrap()]);
    out.expect_code(2);
    assert!(out.stderr.contains("give --task too"), "{}", out.stderr);
}

/// A handler starts with every signal at its default but those ignored when mur was started
/// (an exec keeps them; this test starts mur with none), none blocked, none caught — though the
/// session catches SIGINT, SIGTERM and SIGHUP and the Rust runtime SIGSEGV and SIGBUS, and
/// ignores SIGPIPE: its subreaper puts exactly those back without reading every disposition.
#[test]
fn a_handler_starts_with_no_signal_of_the_sessions_caught_ignored_or_blocked() {
    let home = Home::new();
    let manifest = home.write_capsule(
        "signals",
        json!({"name": "signals", "version": "1.0.0",
               "run": ["/bin/cat", "/proc/self/status"]}),
        None,
    );
    let session = home.start(&[manifest.to_str().unwrap()]);
    let task = session.call(None, "message/send", send_params(&["x"], true));
    assert_eq!(state(&task), "completed", "{task}");
    let seen = artifact_text(&task);
    for line in [
        "SigBlk:\t0000000000000000",
        "SigIgn:\t0000000000000000",
        "SigCgt:\t0000000000000000",
    ] {
        assert!(seen.lines().any(|l| l == line), "{line} in {seen}");
    }
    // The session itself does catch them (so the test can fail).
    let status = fs::read_to_string(format!("/proc/{}/status", session.ready["pid"])).unwrap();
    let caught = status.lines().find(|l| l.starts_with("SigCgt:")).unwrap();
    let mask = u64::from_str_radix(caught.split_whitespace().nth(1).unwrap(), 16).unwrap();
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        assert_ne!(
            mask & (1 << (signal - 1)),
            0,
            "the session catches {signal}: {caught}"
        );
    }
}
