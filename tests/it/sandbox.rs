//! Handlers in a Landlock domain (issue 24): what a handler may not reach — the murmur home and
//! its tokens, another session's task directory, files outside its allowed paths, mur's own
//! process and other sessions' — and what it still may (its workdir, task directory, `TMPDIR`,
//! what `sandbox` declares). Each handler reports what it tried, one `label: outcome` line each,
//! and the answer is checked line by line; the same probe under `"sandbox": false` shows each
//! refusal would otherwise have been a success.
//!
//! A kernel without Landlock is simulated with a seccomp filter that answers ENOSYS to
//! `landlock_create_ruleset`, installed in `mur run` before its exec: the binary under test is
//! the very one that ships, with no switch of its own.

use crate::common;

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{
    formation::{FormationFixture, manifest, rpc},
    home::{Home, write_script},
    http::post,
    run::{MUR_DEADLINE, Output, run},
    session::{Session, artifact_text, state},
    skip::skipped,
};
use serde_json::{Value, json};

/// The shell function every probe uses: `try LABEL CMD…` prints `LABEL: allowed`, or
/// `LABEL: EACCES` / `LABEL: EPERM` when the command said so, or `LABEL: <what it said>`.
const TRY: &str = r#"#!/bin/sh
try() {
    label=$1; shift
    if out=$("$@" 2>&1); then echo "$label: allowed"; return; fi
    case $out in
        *"Permission denied"*) echo "$label: EACCES" ;;
        *"Operation not permitted"*) echo "$label: EPERM" ;;
        *) echo "$label: $out" | head -1 ;;
    esac
}
"#;

/// Reads the murmur home: the session's own record (its operator token), the home's listing,
/// and (named on stdin) another session's record and task directory.
const READS: &str = r#"other=$(cat)
try record cat "$HOME/.murmur/running/$MUR_SESSION_ID.json"
try home ls "$HOME/.murmur"
try other-record cat "$HOME/.murmur/running/$other.json"
try other-tasks ls "$HOME/.murmur/tasks/$other"
"#;

/// The system's interpreter (a python3 on PATH may be a user's own, e.g. pyenv's, outside what
/// a sandboxed handler may run without declaring it).
const PYTHON: &str = "/usr/bin/python3";

/// The kernel's Landlock ABI, `None` without one.
fn landlock_abi() -> Option<i64> {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) reads no memory.
    let abi = unsafe { libc::syscall(444, std::ptr::null::<u8>(), 0usize, 1u32) };
    (abi > 0).then_some(abi)
}

/// Whether this kernel has Landlock of at least `abi`; says the test skipped when not.
pub fn has_landlock(test: &str, abi: i64) -> bool {
    let found = landlock_abi();
    if found.is_some_and(|found| found >= abi) {
        return true;
    }
    skipped(
        test,
        &format!("needs Landlock ABI >= {abi}; this kernel has {found:?}"),
    );
    false
}

/// Whether this kernel has Landlock and this machine the system's `python3`; says the test
/// skipped when not.
fn has_landlock_and_python(test: &str) -> bool {
    if !has_landlock(test, 1) {
        return false;
    }
    let python = Command::new(PYTHON).arg("-c").arg("").status();
    if python.is_ok_and(|s| s.success()) {
        return true;
    }
    skipped(test, &format!("no {PYTHON}"));
    false
}

/// A capsule `name` whose handler is `TRY` then `body`, with `sandbox` (when given).
fn probe_capsule(home: &Home, name: &str, sandbox: Option<Value>, body: &str) -> String {
    let mut manifest = json!({"name": name, "version": "1"});
    if let Some(sandbox) = sandbox {
        manifest["sandbox"] = sandbox;
    }
    let path = home.write_capsule(name, manifest, Some(&format!("{TRY}{body}")));
    path.to_str().unwrap().to_string()
}

/// `mur run CAPSULE --task TEXT ARGS…` to its end: its output, exit 0 required.
#[track_caller]
fn one_task(home: &Home, capsule: &str, text: &str, args: &[&str]) -> Output {
    let mut full = vec!["run", capsule, "--task", text];
    full.extend_from_slice(args);
    let out = home.mur(&full);
    out.expect_code(0);
    out
}

/// The `label: outcome` lines of an answer, as a map.
fn outcomes(answer: &str) -> std::collections::BTreeMap<String, String> {
    answer
        .lines()
        .filter_map(|line| line.split_once(": "))
        .map(|(label, outcome)| (label.to_string(), outcome.to_string()))
        .collect()
}

#[track_caller]
fn assert_outcomes(answer: &str, expected: &[(&str, &str)]) {
    let found = outcomes(answer);
    for (label, outcome) in expected {
        assert_eq!(
            found.get(*label).map(String::as_str),
            Some(*outcome),
            "{label} in the handler's answer:\n{answer}"
        );
    }
}

/// A serving session of a plain handler capsule (`cat`), whose record and task directory the
/// probes go after.
fn other_session(home: &Home) -> Session {
    let capsule = home.write_capsule(
        "other",
        json!({"name": "other", "version": "1"}),
        Some("#!/bin/sh\ncat\n"),
    );
    let session = home.start(&[capsule.to_str().unwrap()]);
    assert!(home.murmur().join("tasks").join(&session.id).is_dir());
    session
}

/// `mur run …` with a seccomp filter answering ENOSYS to `landlock_create_ruleset`: a kernel
/// without Landlock, as far as mur can tell.
fn without_landlock(mut command: Command) -> Command {
    // SAFETY: the closure makes two prctl calls on a filter that lives on its own stack frame,
    // and allocates nothing (async-signal-safe after fork).
    unsafe {
        command.pre_exec(|| {
            let nr_offset = 0; // offsetof(struct seccomp_data, nr)
            let filter = [
                libc::sock_filter {
                    code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
                    jt: 0,
                    jf: 0,
                    k: nr_offset,
                },
                libc::sock_filter {
                    code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 1,
                    k: 444,
                },
                libc::sock_filter {
                    code: libc::BPF_RET as u16,
                    jt: 0,
                    jf: 0,
                    k: libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
                },
                libc::sock_filter {
                    code: libc::BPF_RET as u16,
                    jt: 0,
                    jf: 0,
                    k: libc::SECCOMP_RET_ALLOW,
                },
            ];
            let program = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr().cast_mut(),
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &raw const program,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
}

/// `mur ps -v`'s output.
fn ps_verbose(home: &Home) -> String {
    let out = home.mur(&["ps", "-v"]);
    out.expect_code(0);
    out.stdout
}

// ---------------------------------------------------------------------------------------------
// Reads
// ---------------------------------------------------------------------------------------------

#[test]
fn a_handler_cannot_read_the_murmur_home_its_tokens_or_another_sessions_task_directory() {
    if !has_landlock(
        "a_handler_cannot_read_the_murmur_home_its_tokens_or_another_sessions_task_directory",
        1,
    ) {
        return;
    }
    let home = Home::new();
    let other = other_session(&home);
    let probe = probe_capsule(&home, "probe", None, READS);
    let out = one_task(
        &home,
        &probe,
        &other.id,
        &["--workdir", home.dir("work").to_str().unwrap()],
    );
    assert_outcomes(
        &out.stdout,
        &[
            ("record", "EACCES"),
            ("home", "EACCES"),
            ("other-record", "EACCES"),
            ("other-tasks", "EACCES"),
        ],
    );
    assert!(
        !out.stderr.contains("sandbox:"),
        "nothing to warn about: {}",
        out.stderr
    );
}

#[test]
fn sandbox_false_runs_the_handler_with_all_of_the_users_access_and_says_so() {
    let home = Home::new();
    let other = other_session(&home);
    let probe = probe_capsule(&home, "probe", Some(json!(false)), READS);
    let mut session = home.start(&[&probe]);
    let task = session.send(None, &other.id, true);
    assert_eq!(state(&task), "completed", "{task}");
    // The very reads the sandbox refuses: this is what each refusal above stands for.
    assert_outcomes(
        &artifact_text(&task),
        &[
            ("record", "allowed"),
            ("home", "allowed"),
            ("other-record", "allowed"),
            ("other-tasks", "allowed"),
        ],
    );
    let said = "sandbox: off (the manifest says \"sandbox\": false)";
    session.stderr_saying(said);
    let ps = ps_verbose(&home);
    let line = format!(
        "unsandboxed {}: off: the manifest sets sandbox to false",
        session.id
    );
    assert!(ps.contains(&line), "{ps}");
    assert!(!ps.contains(&format!("unsandboxed {}", other.id)), "{ps}");
    session.assert_still_serving();
}

// ---------------------------------------------------------------------------------------------
// Writes
// ---------------------------------------------------------------------------------------------

const WRITES: &str = r#"echo "tmpdir=$TMPDIR"
try home-file sh -c 'echo x > "$HOME/x"'
try capsule-dir sh -c 'echo x > "$MUR_CAPSULE_DIR/x"'
try system-tmp sh -c 'echo x > /tmp/mur-sandbox-probe-$$'
try workdir sh -c 'echo x > ./x'
try task-dir sh -c 'echo x > "$MUR_TASK_DIR/x"'
try tmpdir sh -c 'echo x > "$TMPDIR/x" && mktemp >/dev/null'
try devices sh -c 'head -c 4 /dev/urandom > /dev/null && head -c 4 /dev/zero > /dev/null'
"#;

#[test]
fn a_handler_writes_in_its_workdir_task_directory_and_tmpdir_and_nowhere_else() {
    if !has_landlock(
        "a_handler_writes_in_its_workdir_task_directory_and_tmpdir_and_nowhere_else",
        1,
    ) {
        return;
    }
    let home = Home::new();
    let work = home.dir("work");
    let probe = probe_capsule(&home, "probe", None, WRITES);
    let out = one_task(&home, &probe, "go", &["--workdir", work.to_str().unwrap()]);
    assert_outcomes(
        &out.stdout,
        &[
            ("home-file", "EACCES"),
            ("capsule-dir", "EACCES"),
            ("system-tmp", "EACCES"),
            ("workdir", "allowed"),
            ("task-dir", "allowed"),
            ("tmpdir", "allowed"),
            ("devices", "allowed"),
        ],
    );
    assert!(!home.path().join("x").exists() && !home.path().join("probe/x").exists());
    assert_eq!(fs::read_to_string(work.join("x")).unwrap(), "x\n");
    // A private TMPDIR under the session's own directory, gone with it.
    let line = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("tmpdir="))
        .unwrap();
    assert!(
        Path::new(line).starts_with(home.murmur().join("tasks")),
        "TMPDIR={line}"
    );
    assert!(
        !Path::new(line).exists(),
        "TMPDIR {line} outlived its session"
    );
}

/// Every murmur home mur knows is hidden, not only the session's own: a session kept in
/// `$MURMUR_HOME`, whose handler runs in `~`, cannot read the sessions of the default
/// `~/.murmur` (their operator tokens), nor list it.
#[test]
fn a_handler_of_a_session_kept_elsewhere_cannot_read_the_default_home() {
    if !has_landlock(
        "a_handler_of_a_session_kept_elsewhere_cannot_read_the_default_home",
        1,
    ) {
        return;
    }
    let home = Home::new();
    let other = other_session(&home);
    let body = r#"other=$(cat)
try default-record cat "$HOME/.murmur/running/$other.json"
try default-home ls "$HOME/.murmur"
try workdir-file cat ./kept/note
"#;
    let probe = probe_capsule(&home, "probe", None, body);
    std::fs::write(home.dir("kept").join("note"), "mine\n").unwrap();
    let elsewhere = home.dir("elsewhere").join("murmur");
    let mut command = home.command(&["run", &probe, "--task", &other.id]);
    command.env("MURMUR_HOME", &elsewhere);
    let out = run(command, MUR_DEADLINE);
    out.expect_code(0);
    assert_outcomes(
        &out.stdout,
        &[
            ("default-record", "EACCES"),
            ("default-home", "EACCES"),
            ("workdir-file", "allowed"),
        ],
    );
    assert!(
        out.stderr.contains(&format!(
            "the default murmur home {}",
            home.murmur().display()
        )),
        "said at the start: {}",
        out.stderr
    );
}

#[test]
fn a_workdir_holding_the_murmur_home_is_granted_around_it_never_into_it() {
    if !has_landlock(
        "a_workdir_holding_the_murmur_home_is_granted_around_it_never_into_it",
        1,
    ) {
        return;
    }
    let home = Home::new();
    home.dir("project");
    let body = r#"try record cat "$HOME/.murmur/running/$MUR_SESSION_ID.json"
try home ls "$HOME/.murmur"
try subdir sh -c 'echo x > project/x && cat project/x'
try top sh -c 'echo x > ./x'
"#;
    let probe = probe_capsule(&home, "probe", None, body);
    // Run from the home, the workdir by default: it holds ~/.murmur.
    let out = one_task(&home, &probe, "go", &[]);
    assert_outcomes(
        &out.stdout,
        &[
            ("record", "EACCES"),
            ("home", "EACCES"),
            ("subdir", "allowed"),
            ("top", "EACCES"),
        ],
    );
    assert!(
        out.stderr.contains("contains the murmur home"),
        "said at the start: {}",
        out.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// Signals
// ---------------------------------------------------------------------------------------------

#[test]
fn a_handler_cannot_signal_its_session_or_another_and_both_keep_serving() {
    if !has_landlock(
        "a_handler_cannot_signal_its_session_or_another_and_both_keep_serving",
        6,
    ) {
        return;
    }
    let home = Home::new();
    let mut other = other_session(&home);
    // Its subreaper's parent is the session: `mur run` itself.
    let body = r#"other=$(cat)
read -r _ _ _ mur _ < /proc/$PPID/stat
try own-session kill -TERM "$mur"
try other-session kill -TERM "$other"
try own-child sh -c 'sleep 30 & kill -TERM $!'
"#;
    let probe = probe_capsule(&home, "probe", None, body);
    let mut session = home.start(&[&probe, "--workdir", home.dir("work").to_str().unwrap()]);
    let task = session.send(None, &other.pid.to_string(), true);
    assert_eq!(state(&task), "completed", "{task}");
    assert_outcomes(
        &artifact_text(&task),
        &[
            ("own-session", "EPERM"),
            ("other-session", "EPERM"),
            ("own-child", "allowed"),
        ],
    );
    session.assert_still_serving();
    other.assert_still_serving();
}

// ---------------------------------------------------------------------------------------------
// What the manifest declares
// ---------------------------------------------------------------------------------------------

#[test]
fn sandbox_read_and_write_extend_what_a_handler_reaches() {
    if !has_landlock("sandbox_read_and_write_extend_what_a_handler_reaches", 1) {
        return;
    }
    let home = Home::new();
    fs::write(home.dir("data").join("in.txt"), "data\n").unwrap();
    home.dir("out");
    fs::write(home.path().join("secret.txt"), "s\n").unwrap();
    let body = r#"try read cat "$HOME/data/in.txt"
try write sh -c 'echo y > "$HOME/out/y"'
try write-read-only sh -c 'echo y > "$HOME/data/y"'
try undeclared cat "$HOME/secret.txt"
"#;
    let declared = json!({"read": ["~/data"], "write": [home.path().join("out")]});
    let probe = probe_capsule(&home, "probe", Some(declared), body);
    let out = one_task(
        &home,
        &probe,
        "go",
        &["--workdir", home.dir("work").to_str().unwrap()],
    );
    assert_outcomes(
        &out.stdout,
        &[
            ("read", "allowed"),
            ("write", "allowed"),
            ("write-read-only", "EACCES"),
            ("undeclared", "EACCES"),
        ],
    );
    assert_eq!(
        fs::read_to_string(home.path().join("out/y")).unwrap(),
        "y\n"
    );
}

/// Connects to `127.0.0.1:$port` for each port named on stdin: `port-N: allowed` or the error.
const CONNECTS: &str = r#"for port in $(cat); do
try "port-$port" /usr/bin/python3 -c "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 5)" "$port"
done
"#;

#[test]
fn sandbox_connect_allows_those_tcp_ports_only() {
    if !has_landlock_and_python("sandbox_connect_allows_those_tcp_ports_only")
        || !has_landlock("sandbox_connect_allows_those_tcp_ports_only", 4)
    {
        return;
    }
    let home = Home::new();
    // Two doors listening: the embedded echo capsule, twice.
    let (open, closed) = (home.start(&[]), home.start(&[]));
    let port = |session: &Session| session.url.rsplit(':').next().unwrap().to_string();
    let (open, closed) = (port(&open), port(&closed));
    let declared = json!({"connect": [open.parse::<u16>().unwrap()]});
    let probe = probe_capsule(&home, "probe", Some(declared), CONNECTS);
    let text = format!("{open} {closed}");
    let work = home.dir("work");
    let out = one_task(&home, &probe, &text, &["--workdir", work.to_str().unwrap()]);
    let (allowed, refused) = (format!("port-{open}"), format!("port-{closed}"));
    assert_outcomes(&out.stdout, &[(&allowed, "allowed"), (&refused, "EACCES")]);
    // Without the key, connects are left alone.
    let probe = probe_capsule(&home, "free", None, CONNECTS);
    let out = one_task(&home, &probe, &text, &["--workdir", work.to_str().unwrap()]);
    assert_outcomes(&out.stdout, &[(&allowed, "allowed"), (&refused, "allowed")]);
}

#[test]
fn a_declaration_containing_or_inside_the_murmur_home_is_refused_at_the_start() {
    let home = Home::new();
    home.running_dir();
    for (declared, said) in [
        (
            json!({"write": ["~"]}),
            "sandbox.write: ~ contains the murmur home",
        ),
        (
            json!({"read": ["/"]}),
            "sandbox.read: / contains the murmur home",
        ),
        (
            json!({"read": ["~/.murmur/running"]}),
            "sandbox.read: ~/.murmur/running is inside the murmur home",
        ),
    ] {
        let probe = probe_capsule(&home, "probe", Some(declared.clone()), "echo ran\n");
        let said = said.replace("{home}", home.path().to_str().unwrap());
        let out = home.mur(&["run", &probe, "--task", "go"]);
        assert_eq!(out.code(), Some(1), "{declared}: {}", out.stderr);
        assert!(out.stderr.contains(&said), "{declared}: {}", out.stderr);
        assert!(!out.stdout.contains("ran"), "the handler never ran");
    }
    // A path that does not exist names itself too.
    let probe = probe_capsule(
        &home,
        "probe",
        Some(json!({"read": ["/nonexistent-mur"]})),
        "echo ran\n",
    );
    let out = home.mur(&["run", &probe, "--task", "go"]);
    assert_eq!(out.code(), Some(1));
    assert!(
        out.stderr
            .contains("sandbox.read: /nonexistent-mur: No such file"),
        "{}",
        out.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// Without Landlock
// ---------------------------------------------------------------------------------------------

#[test]
fn required_runs_sandboxed_here_and_refuses_to_start_without_landlock() {
    if !has_landlock(
        "required_runs_sandboxed_here_and_refuses_to_start_without_landlock",
        1,
    ) {
        return;
    }
    let home = Home::new();
    let other = other_session(&home);
    let probe = probe_capsule(&home, "probe", Some(json!("required")), READS);
    let work = home.dir("work");
    let out = one_task(
        &home,
        &probe,
        &other.id,
        &["--workdir", work.to_str().unwrap()],
    );
    assert_outcomes(&out.stdout, &[("record", "EACCES"), ("home", "EACCES")]);

    let command = home.command(&[
        "run",
        &probe,
        "--task",
        "go",
        "--workdir",
        work.to_str().unwrap(),
    ]);
    let out = run(without_landlock(command), MUR_DEADLINE);
    assert_eq!(out.code(), Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("the manifest says \"required\", but this kernel has no Landlock; the session does not start"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "no handler ran: {}", out.stdout);
}

#[test]
fn without_landlock_the_session_starts_warns_once_and_ps_v_says_so() {
    let home = Home::new();
    let probe = probe_capsule(
        &home,
        "probe",
        None,
        "try record cat \"$HOME/.murmur/running/$MUR_SESSION_ID.json\"\n",
    );
    let work = home.dir("work");
    let command = home.command(&["run", "--json", &probe, "--workdir", work.to_str().unwrap()]);
    let mut session = Session::spawn(without_landlock(command));
    for _ in 0..2 {
        let task = session.send(None, "go", true);
        // Nothing holds the handler back: the guarantee is gone, as the warning says.
        assert_outcomes(&artifact_text(&task), &[("record", "allowed")]);
    }
    let warning = "sandbox: unavailable (this kernel has no Landlock): handlers run with all of this user's access";
    assert_eq!(
        session.stderr().matches(warning).count(),
        1,
        "{}",
        session.stderr()
    );
    let ps = ps_verbose(&home);
    let line = format!(
        "unsandboxed {}: unavailable: this kernel has no Landlock",
        session.id
    );
    assert!(ps.contains(&line), "{ps}");
    assert_eq!(
        home.record(&session.id)["sandbox"],
        "unavailable: this kernel has no Landlock"
    );
    // Without -v, the table alone.
    assert!(!home.mur(&["ps"]).stdout.contains("unsandboxed"));
    session.assert_still_serving();
}

// ---------------------------------------------------------------------------------------------
// Formations
// ---------------------------------------------------------------------------------------------

/// The member that may call no one: told the entry's session id and door on stdin, it goes after
/// the entry's record (its operator token) and calls its door with a forged token.
const CALLEE: &str = r#"set -- $(cat)
try entry-record cat "$HOME/.murmur/running/$1.json"
try formations ls "$HOME/.murmur/formations"
echo "forged-call: $(/usr/bin/python3 - "$2" <<'EOF'
import sys, urllib.request, urllib.error
body = b'{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}'
request = urllib.request.Request("http://" + sys.argv[1] + "/", body, {"Authorization": "Bearer mur.forged.token", "Content-Type": "application/json"})
try:
    print(urllib.request.urlopen(request, timeout=10).status)
except urllib.error.HTTPError as err:
    print(err.code)
EOF
)"
"#;

#[test]
fn a_formation_member_without_callees_cannot_take_the_entrys_token() {
    if !has_landlock_and_python("a_formation_member_without_callees_cannot_take_the_entrys_token") {
        return;
    }
    let env = FormationFixture::new();
    let lead = "#!/bin/sh\nprintf 'lead: %s\\n' \"$(\"$MUR\" formation call reviewer -)\"\n";
    env.write_member_capsule("lead", &manifest("lead", false, true), Some(lead));
    env.write_member_capsule(
        "reviewer",
        &manifest("reviewer", true, true),
        Some(&format!("{TRY}{CALLEE}")),
    );
    let roster = env.roster(&json!({
        "members": [
            {"name": "lead", "capsule": "lead", "entry": true},
            {"name": "reviewer", "capsule": "reviewer"},
        ],
        "reachability": [{"from": "lead", "to": ["reviewer"]}],
    }));
    let mut launcher = env.launch(&[roster.to_str().unwrap(), "--json"]);
    let ready = launcher.readiness();
    let (entry_id, entry_url) = (ready.session_id("lead"), ready.url("lead"));
    // The reviewer's own operator token (from outside: this test is no handler) asks its door.
    let token = env.record(&ready.session_id("reviewer"))["door_token"]
        .as_str()
        .unwrap()
        .to_string();
    let text = format!("{entry_id} {entry_url}");
    let body = rpc(
        "message/send",
        json!({"message": {"kind": "message", "role": "user", "messageId": "m1",
                            "parts": [{"kind": "text", "text": text}]}}),
    );
    let answer = post(
        &ready.url("reviewer"),
        Some(&format!("Bearer {token}")),
        &body,
    )
    .json();
    let task = &answer["result"];
    assert_eq!(state(task), "completed", "{answer}");
    assert_outcomes(
        &artifact_text(task),
        &[
            ("entry-record", "EACCES"),
            ("formations", "EACCES"),
            ("forged-call", "401"),
        ],
    );
    // The entry member's handler still reaches its callee through its call socket.
    let lead_token = env.record(&entry_id)["door_token"]
        .as_str()
        .unwrap()
        .to_string();
    let body = rpc(
        "message/send",
        json!({"message": {"kind": "message", "role": "user", "messageId": "m2",
                            "parts": [{"kind": "text", "text": format!("{entry_id} {entry_url}")}]}}),
    );
    let answer = post(&entry_url, Some(&format!("Bearer {lead_token}")), &body).json();
    let text = artifact_text(&answer["result"]);
    assert!(
        text.starts_with("lead: ") && text.contains("entry-record: EACCES"),
        "{answer}"
    );
    launcher.signal(libc::SIGTERM);
    launcher.finish(Duration::from_secs(20));
}

// ---------------------------------------------------------------------------------------------
// Programs run unchanged
// ---------------------------------------------------------------------------------------------

#[test]
fn a_python_handler_on_the_system_interpreter_runs_unchanged_in_the_sandbox() {
    if !has_landlock_and_python(
        "a_python_handler_on_the_system_interpreter_runs_unchanged_in_the_sandbox",
    ) {
        return;
    }
    let home = Home::new();
    let dir = home.dir("py");
    write_script(
        &dir.join("handler.py"),
        "import json, os, sys, tempfile\n\
         text = sys.stdin.read().rstrip('\\n')\n\
         message = json.load(open(os.path.join(os.environ['MUR_TASK_DIR'], 'message.json')))\n\
         with tempfile.NamedTemporaryFile('w') as scratch:\n\
         \x20   scratch.write(text)\n\
         print(text.upper(), len(message['parts']), os.path.dirname(scratch.name) == os.environ['TMPDIR'])\n",
    );
    let manifest = json!({"name": "py", "version": "1", "run": [PYTHON, dir.join("handler.py")]});
    fs::write(dir.join("murmur.json"), manifest.to_string()).unwrap();
    let out = one_task(
        &home,
        dir.to_str().unwrap(),
        "hello",
        &["--workdir", home.dir("work").to_str().unwrap()],
    );
    assert_eq!(out.stdout, "HELLO 1 True\n", "{}", out.stderr);
}
