//! Handlers of a session mur runs as root run as the user `sandbox.user` declares (issue 31,
//! item 4): a dynamic uid per session, or a user of the system's database; when it declares
//! none, a dynamic uid keeping root's file access and nothing else of root's; as root only when
//! it declares `"root"`. Each test needs root (a regular user's handlers run as that user) and
//! skips loudly without it.

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};

use common::{
    home::Home,
    session::{artifact_text, state},
    skip::skipped,
};
use serde_json::{Value, json};

/// The uids mur hands out to a root session's handlers (systemd's dynamic range).
const DYNAMIC: std::ops::RangeInclusive<u32> = 61184..=65519;

fn is_root(test: &str) -> bool {
    // SAFETY: geteuid takes nothing and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        skipped(test, "not root: handlers run as the user who runs mur");
    }
    root
}

/// A root process of the test's own holding a secret in its environment: what a handler must not
/// read through `/proc/PID/environ`.
struct Secret(Child);

impl Secret {
    fn start() -> Self {
        let child = Command::new("sleep")
            .arg("60")
            .env("MUR_TEST_SECRET", "s3cret-in-environ")
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Self(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A capsule whose handler prints its uid, its gid and whether it read pid `secret`'s environ.
fn whoami_capsule(home: &Home, name: &str, sandbox: Option<Value>, secret: u32) -> String {
    let mut manifest = json!({"name": name, "version": "1"});
    if let Some(sandbox) = sandbox {
        manifest["sandbox"] = sandbox;
    }
    let script = format!(
        "#!/bin/sh\necho \"uid $(id -u) gid $(id -g) groups $(id -G)\"\n\
         if grep -q s3cret /proc/{secret}/environ 2>/dev/null; then echo environ: read; \
         else echo environ: refused; fi\n\
         echo done > \"$MUR_TASK_DIR/out/left.txt\" && echo task-dir: written\n"
    );
    let path = home.write_capsule(name, manifest, Some(&script));
    path.to_str().unwrap().to_string()
}

/// The uid a handler's answer reports.
fn uid_in(answer: &str) -> u32 {
    let line = answer.lines().find(|l| l.starts_with("uid ")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_root_sessions_handler_runs_as_a_uid_of_its_own_and_cannot_read_a_root_processs_environ() {
    if !is_root("a_root_sessions_handler_runs_as_a_uid_of_its_own") {
        return;
    }
    let home = Home::new();
    let secret = Secret::start();
    let dynamic = Some(json!({"user": "dynamic"}));
    let capsule = whoami_capsule(&home, "who", dynamic, secret.pid());
    let session = home.start(&[&capsule]);
    let task = session.send(None, "who", true);
    assert_eq!(state(&task), "completed", "{task}");
    let answer = artifact_text(&task);
    let uid = uid_in(&answer);
    assert!(DYNAMIC.contains(&uid), "a dynamic uid: {answer}");
    assert!(
        answer.contains(&format!("uid {uid} gid {uid} groups {uid}\n")),
        "its own group and no other: {answer}"
    );
    assert!(answer.contains("environ: refused"), "{answer}");
    assert!(answer.contains("task-dir: written"), "{answer}");
    // `ps -v` and `ps --json` name it.
    let ps = home.mur(&["ps", "-v"]);
    ps.expect_code(0);
    let line = format!("user {}: handlers run as dynamic uid {uid}", session.id);
    assert!(ps.stdout.contains(&line), "{line} in\n{}", ps.stdout);
    let json = home.mur(&["ps", "--json"]).json();
    assert_eq!(
        json["capsules"][0]["handler_user"],
        json!(format!("dynamic uid {uid}")),
        "{json}"
    );
    // The same handler as root, declared, reads it: the refusal above is the uid's doing.
    let as_root = whoami_capsule(&home, "root", Some(json!({"user": "root"})), secret.pid());
    let out = home.mur(&["run", &as_root, "--task", "who"]);
    out.expect_code(0);
    assert_eq!(uid_in(&out.stdout), 0, "{}", out.stdout);
    assert!(out.stdout.contains("environ: read"), "{}", out.stdout);
}

#[test]
fn by_default_a_root_sessions_handler_keeps_roots_file_access_and_nothing_else() {
    if !is_root("by_default_a_root_sessions_handler_keeps_roots_file_access") {
        return;
    }
    let home = Home::new();
    let secret = Secret::start();
    let capsule = whoami_capsule(&home, "who", None, secret.pid());
    // A workdir under a directory only root may enter, and owned by root: as /root is.
    let private = home.path().join("private");
    fs::create_dir(&private).unwrap();
    fs::set_permissions(&private, fs::Permissions::from_mode(0o700)).unwrap();
    let workdir = private.join("work");
    fs::create_dir(&workdir).unwrap();
    fs::set_permissions(&workdir, fs::Permissions::from_mode(0o755)).unwrap();
    let workdir_arg = workdir.to_str().unwrap();
    let session = home.start(&[&capsule, "--workdir", workdir_arg]);
    let task = session.send(None, "who", true);
    assert_eq!(state(&task), "completed", "{task}");
    let answer = artifact_text(&task);
    let uid = uid_in(&answer);
    assert!(DYNAMIC.contains(&uid), "a dynamic uid: {answer}");
    assert!(answer.contains("environ: refused"), "{answer}");
    assert!(answer.contains("task-dir: written"), "{answer}");
    let ps = home.mur(&["ps", "-v"]);
    let line = format!(
        "user {}: handlers run as dynamic uid {uid} (file access as root)",
        session.id
    );
    assert!(ps.stdout.contains(&line), "{line} in\n{}", ps.stdout);
    // A handler that runs its task as a script, in the same root-only workdir: it writes
    // there, holds the two file capabilities alone, and cannot signal a root process.
    let prompt = "echo written > left-in-workdir; grep CapEff /proc/self/status";
    let shell = home.write_capsule(
        "shell",
        json!({"name": "shell", "version": "1", "run": ["sh"]}),
        None,
    );
    let out = home.mur(&[
        "run",
        shell.to_str().unwrap(),
        "--workdir",
        workdir_arg,
        "--task",
        &format!(
            "{prompt}; kill -0 {} 2>/dev/null || echo kill refused",
            secret.pid()
        ),
    ]);
    out.expect_code(0);
    assert!(
        out.stdout
            .contains("CapEff:\t0000000000000006\nkill refused"),
        "only the two file capabilities, and no signal to root's: {}",
        out.stdout
    );
    let left = workdir.join("left-in-workdir");
    assert_eq!(fs::read_to_string(&left).unwrap(), "written\n");
    use std::os::unix::fs::MetadataExt;
    let owner = fs::metadata(&left).unwrap().uid();
    assert!(
        DYNAMIC.contains(&owner),
        "written as the dynamic uid: {owner}"
    );
}

#[test]
fn two_root_sessions_never_share_a_handler_uid_and_their_task_directories_go_with_them() {
    if !is_root("two_root_sessions_never_share_a_handler_uid") {
        return;
    }
    let home = Home::new();
    let secret = Secret::start();
    let capsule = whoami_capsule(&home, "who", Some(json!({"user": "dynamic"})), secret.pid());
    let mut first = home.start(&[&capsule]);
    let second = home.start(&[&capsule]);
    let uids: Vec<u32> = [&first, &second]
        .iter()
        .map(|s| uid_in(&artifact_text(&s.send(None, "who", true))))
        .collect();
    assert_ne!(uids[0], uids[1], "one uid per running session");
    let dir = std::path::Path::new("/run/mur").join(&first.id);
    let meta = fs::metadata(&dir).unwrap();
    assert_eq!(
        meta.permissions().mode() & 0o7777,
        0o711,
        "{}",
        dir.display()
    );
    // SIGKILLed: its task directories stay until `ps` prunes its record.
    first.signal(libc::SIGKILL);
    first.wait_exit(std::time::Duration::from_secs(5));
    assert!(dir.exists());
    home.mur(&["ps"]).expect_code(0);
    assert!(!dir.exists(), "{} pruned with the record", dir.display());
}

#[test]
fn a_workdir_the_handler_user_cannot_reach_stops_the_start_naming_it() {
    if !is_root("a_workdir_the_handler_user_cannot_reach_stops_the_start_naming_it") {
        return;
    }
    let home = Home::new();
    let capsule = home.write_capsule(
        "hidden",
        json!({"name": "hidden", "version": "1", "sandbox": {"user": "dynamic"}}),
        Some("#!/bin/sh\ncat\n"),
    );
    let private = home.path().join("private");
    fs::create_dir(&private).unwrap();
    fs::set_permissions(&private, fs::Permissions::from_mode(0o700)).unwrap();
    let workdir = private.join("work");
    fs::create_dir(&workdir).unwrap();
    let out = home.mur(&[
        "run",
        capsule.to_str().unwrap(),
        "--workdir",
        workdir.to_str().unwrap(),
        "--task",
        "hi",
    ]);
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("cannot reach") && out.stderr.contains(workdir.to_str().unwrap()),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("\"user\": \"root\""), "{}", out.stderr);
    // Declared root, the same start runs.
    let root = home.write_capsule(
        "rooted",
        json!({"name": "rooted", "version": "1", "sandbox": {"user": "root"}}),
        Some("#!/bin/sh\ncat\n"),
    );
    let out = home.mur(&[
        "run",
        root.to_str().unwrap(),
        "--workdir",
        workdir.to_str().unwrap(),
        "--task",
        "hi",
    ]);
    out.expect_code(0);
    assert_eq!(out.stdout, "hi\n");
}

#[test]
fn a_named_user_runs_the_handler_and_an_unknown_one_stops_the_start() {
    if !is_root("a_named_user_runs_the_handler_and_an_unknown_one_stops_the_start") {
        return;
    }
    let home = Home::new();
    let secret = Secret::start();
    let nobody = whoami_capsule(
        &home,
        "nobody",
        Some(json!({"user": "nobody"})),
        secret.pid(),
    );
    let out = home.mur(&["run", &nobody, "--task", "who"]);
    out.expect_code(0);
    assert_eq!(uid_in(&out.stdout), 65534, "{}", out.stdout);
    // A handler named bare is found on PATH, not looked for in the workdir.
    let bare = home.write_capsule(
        "bare",
        json!({"name": "bare", "version": "1", "run": ["sh", "-c", "id -u"],
               "sandbox": {"user": "nobody"}}),
        None,
    );
    let out = home.mur(&["run", bare.to_str().unwrap(), "--task", "who"]);
    out.expect_code(0);
    assert_eq!(out.stdout, "65534\n");
    let unknown = whoami_capsule(
        &home,
        "unknown",
        Some(json!({"user": "no-such-user-mur"})),
        secret.pid(),
    );
    let out = home.mur(&["run", &unknown, "--task", "who"]);
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("there is no user no-such-user-mur"),
        "{}",
        out.stderr
    );
}
