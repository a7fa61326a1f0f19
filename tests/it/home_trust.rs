//! Trust in the murmur home (DESIGN.md §3): no symbolic link is followed for a directory `mur`
//! keeps, and only a home — and records — the effective uid owns and no one else may write are
//! trusted. Self-contained: its helpers are here, not in `tests/common`.
//!
//! The ownership tests need root (to `chown` to another uid); they skip loudly otherwise.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Another uid to own things: `nobody`.
const OTHER_UID: u32 = 65534;
/// The longest any one `mur` command here may take.
const DEADLINE: Duration = Duration::from_secs(30);

/// A temporary directory holding `home/` (the `HOME`) and `outside/` (somewhere links point).
struct Scratch {
    root: PathBuf,
}

impl Scratch {
    fn new(tag: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let root = std::env::temp_dir().join(format!(
            "mur-home-trust-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("home")).unwrap();
        fs::create_dir_all(root.join("outside")).unwrap();
        Self { root }
    }
    fn home(&self) -> PathBuf {
        self.root.join("home")
    }
    fn murmur(&self) -> PathBuf {
        self.home().join(".murmur")
    }
    fn running(&self) -> PathBuf {
        self.murmur().join("running")
    }
    fn outside(&self) -> PathBuf {
        self.root.join("outside")
    }
    /// `~/.murmur/running` as a real directory at `0700`, inside `~/.murmur` at `0700`.
    fn make_running(&self) {
        for dir in [self.murmur(), self.running()] {
            fs::create_dir_all(&dir).unwrap();
            set_mode(&dir, 0o700);
        }
    }
    /// `mur ARGS…` with this `HOME`, from the scratch root, to its end (stdin closed).
    fn mur(&self, args: &[&str]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mur"));
        command
            .args(args)
            .env_clear()
            .env("HOME", self.home())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        wait_bounded(command.spawn().unwrap())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// Wait for `child` at most [`DEADLINE`]; kill it (and fail) past that.
fn wait_bounded(mut child: Child) -> Output {
    let began = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if began.elapsed() > DEADLINE {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("mur did not end within {DEADLINE:?}: {out:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[track_caller]
fn expect_refusal(out: &Output, naming: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "exit status; stderr: {err}");
    for needle in naming {
        assert!(err.contains(needle), "stderr should name {needle:?}: {err}");
    }
}

fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

/// A `ses_` id: `ses_` + a UUIDv7 minted now (48-bit ms, version 7, variant bits).
fn session_id() -> String {
    static N: AtomicU64 = AtomicU64::new(1);
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let n = N.fetch_add(1, Ordering::Relaxed) ^ (u64::from(std::process::id()) << 20);
    format!(
        "ses_{:012x}7{:03x}{:016x}",
        ms & 0xffff_ffff_ffff,
        n & 0xfff,
        (n.wrapping_mul(0x9e37_79b9_7f4a_7c15) & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000
    )
}

/// Field 22 of `/proc/<pid>/stat` (counted after the last `)`), as `mur` reads a start time.
fn start_time(pid: u32) -> String {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    rest.split_whitespace().nth(22 - 3).unwrap().to_string()
}

/// A `sleep 60` of ours, killed and reaped on drop.
struct Sleeper(Child);

impl Sleeper {
    fn new() -> Self {
        Self(Command::new("sleep").arg("60").spawn().unwrap())
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
    fn alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A record naming `sleeper` with its real start time, behind a door nothing listens on; written
/// into `dir` at `mode`. Its path.
fn write_record(dir: &Path, sleeper: &Sleeper, mode: u32) -> PathBuf {
    let id = session_id();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let record = serde_json::json!({
        "session_id": id,
        "url": format!("127.0.0.1:{port}"),
        "pid": sleeper.pid(),
        "process_start": start_time(sleeper.pid()),
        "capsule_name": "echo",
        "capsule_version": "0.1.0",
        "workdir": "/tmp",
        "outlives_launcher": true,
        "started_at": "2026-01-01T00:00:00Z",
    });
    let path = dir.join(format!("{id}.json"));
    fs::write(&path, serde_json::to_vec(&record).unwrap()).unwrap();
    set_mode(&path, mode);
    path
}

/// The outside directory as a decoy: mode `0755`, holding a junk `x.json` a sweep would prune.
fn decoy(dir: &Path) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    set_mode(dir, 0o755);
    let junk = dir.join("x.json");
    fs::write(&junk, "not a record").unwrap();
    junk
}

#[track_caller]
fn assert_decoy_untouched(dir: &Path, junk: &Path) {
    assert!(
        junk.exists(),
        "{} was removed through a link",
        junk.display()
    );
    assert_eq!(
        mode_of(dir),
        0o755,
        "{} was re-moded through a link",
        dir.display()
    );
}

/// Whether this test runs as root: the owner of a directory it just made (files are created
/// with the effective uid).
fn is_root() -> bool {
    let probe = Scratch::new("uid");
    if fs::metadata(&probe.root).unwrap().uid() == 0 {
        return true;
    }
    eprintln!("SKIPPED: this test needs root (to chown to uid {OTHER_UID}); CI runs it as root");
    false
}

/// A minimal capsule for `mur run --task`: its directory.
fn capsule(root: &Path) -> PathBuf {
    let dir = root.join("capsule");
    fs::create_dir_all(&dir).unwrap();
    let handler = dir.join("handler.sh");
    fs::write(&handler, "#!/bin/sh\ncat\n").unwrap();
    set_mode(&handler, 0o755);
    let manifest = serde_json::json!({
        "name": "echo", "version": "1.0.0", "run": ["./handler.sh"],
        "lifecycle": {"task_timeout_secs": 30},
    });
    fs::write(dir.join("murmur.json"), manifest.to_string()).unwrap();
    dir
}

// ---------------------------------------------------------------------------------------------
// Links
// ---------------------------------------------------------------------------------------------

#[test]
fn a_running_dir_that_is_a_link_is_refused_by_ps_stop_and_token_and_its_target_untouched() {
    let s = Scratch::new("running-link");
    fs::create_dir_all(s.murmur()).unwrap();
    set_mode(&s.murmur(), 0o700);
    let target = s.outside().join("target");
    let junk = decoy(&target);
    symlink(&target, s.running()).unwrap();
    let running = s.running().display().to_string();

    for args in [
        &["ps"][..],
        &["ps", "--json"],
        &["stop", "--all"],
        &["token"],
    ] {
        let out = s.mur(args);
        expect_refusal(&out, &[&running, "symbolic link"]);
        assert_eq!(out.stdout, b"", "{args:?}");
        assert_decoy_untouched(&target, &junk);
    }
    assert!(
        fs::symlink_metadata(s.running())
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn a_murmur_home_that_is_a_link_is_refused_and_its_target_untouched() {
    let s = Scratch::new("home-link");
    let target = s.outside().join("murmur");
    fs::create_dir_all(&target).unwrap();
    set_mode(&target, 0o755);
    let running = target.join("running");
    let junk = decoy(&running);
    symlink(&target, s.murmur()).unwrap();
    let murmur = s.murmur().display().to_string();

    for args in [&["ps"][..], &["stop", "--all"], &["token"]] {
        let out = s.mur(args);
        expect_refusal(&out, &[&murmur, "symbolic link"]);
        assert_decoy_untouched(&target, &running.join("x.json"));
        assert_decoy_untouched(&running, &junk);
    }
    let out = s.mur(&["run", capsule(&s.root).to_str().unwrap(), "--task", "hi"]);
    expect_refusal(&out, &[&murmur, "symbolic link"]);
    assert_decoy_untouched(&target, &junk);
    assert_eq!(
        fs::read_dir(&running).unwrap().count(),
        1,
        "no record written through the link"
    );
}

#[test]
fn mur_run_refuses_a_running_dir_that_is_a_link_and_writes_nothing_through_it() {
    let s = Scratch::new("run-link");
    fs::create_dir_all(s.murmur()).unwrap();
    set_mode(&s.murmur(), 0o700);
    let target = s.outside().join("target");
    let junk = decoy(&target);
    symlink(&target, s.running()).unwrap();

    let out = s.mur(&["run", capsule(&s.root).to_str().unwrap(), "--task", "hi"]);
    expect_refusal(&out, &[&s.running().display().to_string(), "symbolic link"]);
    assert_decoy_untouched(&target, &junk);
    assert_eq!(
        fs::read_dir(&target).unwrap().count(),
        1,
        "nothing written through the link"
    );
}

#[test]
fn a_formations_dir_that_is_a_link_is_refused_by_mur_formation() {
    let s = Scratch::new("formations-link");
    fs::create_dir_all(s.murmur()).unwrap();
    set_mode(&s.murmur(), 0o700);
    let target = s.outside().join("formations");
    let junk = decoy(&target);
    // An ended formation of this project in the target: pruning through the link would go there.
    let formations = s.murmur().join("formations");
    symlink(&target, &formations).unwrap();
    capsule(&s.root);
    let roster = s.root.join("roster.json");
    let members =
        serde_json::json!({"members": [{"name": "lead", "capsule": "capsule", "entry": true}]});
    fs::write(&roster, members.to_string()).unwrap();

    let out = s.mur(&["formation", roster.to_str().unwrap(), "--task", "hi"]);
    expect_refusal(&out, &[&formations.display().to_string(), "symbolic link"]);
    assert_decoy_untouched(&target, &junk);
    assert_eq!(
        fs::read_dir(&target).unwrap().count(),
        1,
        "nothing created through the link"
    );
}

// ---------------------------------------------------------------------------------------------
// Ownership
// ---------------------------------------------------------------------------------------------

#[test]
fn a_murmur_home_owned_by_another_uid_is_refused_and_not_remoded() {
    if !is_root() {
        return;
    }
    let s = Scratch::new("home-owner");
    s.make_running();
    let mut sleeper = Sleeper::new();
    let record = write_record(&s.running(), &sleeper, 0o600);
    for dir in [s.murmur(), s.running()] {
        set_mode(&dir, 0o755);
        std::os::unix::fs::chown(&dir, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
    }
    let murmur = s.murmur().display().to_string();
    let owner = format!("uid {OTHER_UID}");
    let fix = format!("chown -R 0 {murmur}");

    for args in [&["ps"][..], &["stop", "--all"], &["token"]] {
        let out = s.mur(args);
        expect_refusal(&out, &[&murmur, &owner, &fix]);
    }
    let out = s.mur(&["run", capsule(&s.root).to_str().unwrap(), "--task", "hi"]);
    expect_refusal(&out, &[&murmur, &owner, &fix]);

    assert_eq!(
        mode_of(&s.murmur()),
        0o755,
        "another uid's home is never re-moded"
    );
    assert_eq!(mode_of(&s.running()), 0o755);
    assert!(record.exists());
    assert!(
        sleeper.alive(),
        "a record in an untrusted home drove a signal"
    );
}

#[test]
fn a_running_dir_owned_by_another_uid_is_refused() {
    if !is_root() {
        return;
    }
    let s = Scratch::new("running-owner");
    s.make_running();
    std::os::unix::fs::chown(s.running(), Some(OTHER_UID), Some(OTHER_UID)).unwrap();
    let running = s.running().display().to_string();
    let out = s.mur(&["ps"]);
    expect_refusal(&out, &[&running, &format!("uid {OTHER_UID}"), "chown -R 0"]);
}

#[test]
fn a_record_another_uid_owns_is_never_signalled_nor_removed() {
    if is_root() {
        untrusted_record_is_left_alone(
            "owner",
            0o600,
            Some(OTHER_UID),
            &format!("owned by uid {OTHER_UID}"),
        );
    }
}

#[test]
fn a_record_others_may_write_is_never_signalled_nor_removed() {
    if is_root() {
        untrusted_record_is_left_alone("writable", 0o666, None, "mode 0666");
    }
}

/// A record in our own home that is not trusted, naming a live process of ours with its real
/// start time: `mur stop --all` must not signal it, nor remove or re-mode the record, and must
/// say why; `ps` and `token` neither list nor use it.
fn untrusted_record_is_left_alone(tag: &str, mode: u32, owner: Option<u32>, why: &str) {
    let s = Scratch::new(tag);
    s.make_running();
    let mut sleeper = Sleeper::new();
    let record = write_record(&s.running(), &sleeper, mode);
    if let Some(uid) = owner {
        std::os::unix::fs::chown(&record, Some(uid), Some(uid)).unwrap();
    }
    let path = record.display().to_string();

    let out = s.mur(&["stop", "--all"]);
    let err = stderr(&out);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        sleeper.alive(),
        "{tag}: an untrusted record drove a signal; {err}"
    );
    assert!(record.exists(), "{tag}: an untrusted record was removed");
    assert_eq!(
        mode_of(&record),
        mode,
        "{tag}: an untrusted record was re-moded"
    );
    assert!(
        err.contains(&path) && err.contains(why),
        "{tag}: stderr: {err}"
    );
    assert!(err.contains("not trusted"), "{tag}: stderr: {err}");

    for args in [&["ps"][..], &["token"]] {
        let out = s.mur(args);
        let err = stderr(&out);
        assert!(
            err.contains(&path) && err.contains(why),
            "{tag} {args:?}: {err}"
        );
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("ses_"),
            "{tag} {args:?}"
        );
    }
    assert!(record.exists() && sleeper.alive(), "{tag}");
}

#[test]
fn a_record_of_ours_readable_by_others_is_remoded_0600() {
    let s = Scratch::new("readable");
    s.make_running();
    let sleeper = Sleeper::new();
    let record = write_record(&s.running(), &sleeper, 0o644);
    let out = s.mur(&["ps"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(
        mode_of(&record),
        0o600,
        "a record of ours at 0644 is re-moded"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("unreachable"));
}

// ---------------------------------------------------------------------------------------------
// MURMUR_HOME
// ---------------------------------------------------------------------------------------------

impl Scratch {
    /// `mur ARGS…` as [`Scratch::mur`], but with exactly the `HOME` and `MURMUR_HOME` given
    /// (`None`: unset).
    fn mur_with(&self, home: Option<&Path>, murmur_home: Option<&Path>, args: &[&str]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mur"));
        command
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(home) = home {
            command.env("HOME", home);
        }
        if let Some(murmur_home) = murmur_home {
            command.env("MURMUR_HOME", murmur_home);
        }
        wait_bounded(command.spawn().unwrap())
    }
}

/// `MURMUR_HOME` at a directory mur did not create — a shared one like `/tmp` (1777), or a
/// private-looking 0750 — is refused by every applet, `run` included, and keeps its mode; one mur
/// creates, and one already 0700, are used.
#[test]
fn a_murmur_home_mur_did_not_create_is_refused_unless_private_and_never_remoded() {
    let s = Scratch::new("shared-home");
    let shared = s.outside();
    let capsule = capsule(&s.root);
    let task = ["run", capsule.to_str().unwrap(), "--task", "hi"];
    for mode in [0o1777, 0o750] {
        set_mode(&shared, mode);
        let said = format!("mode {mode:04o}, not 0700");
        for args in [
            &task[..],
            &["ps"],
            &["stop", "--all"],
            &["token"],
            &["logs", "@1"],
        ] {
            let out = s.mur_with(Some(&s.home()), Some(&shared), args);
            expect_refusal(&out, &["MURMUR_HOME", &shared.display().to_string(), &said]);
            assert_eq!(mode_of(&shared), mode, "{args:?} re-moded MURMUR_HOME");
        }
        assert_eq!(
            fs::read_dir(&shared).unwrap().count(),
            0,
            "nothing is made in a refused home"
        );
    }
    // The fix the refusal names: a directory mur may create inside it.
    let inside = shared.join("mur");
    let out = s.mur_with(Some(&s.home()), Some(&inside), &task);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(mode_of(&inside), 0o700);
    assert_eq!(mode_of(&shared), 0o750);
    // One already private is the user's choice, used as it is.
    set_mode(&shared, 0o700);
    let out = s.mur_with(Some(&s.home()), Some(&shared), &task);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn murmur_home_overrides_home_and_works_with_home_unset() {
    let s = Scratch::new("murmur-home");
    let state = s.root.join("state");
    let cap = capsule(&s.root);
    let cap = cap.to_str().unwrap();
    // HOME unset: a run, a detached session, ps, stop all use MURMUR_HOME.
    let out = s.mur_with(None, Some(&state), &["run", cap, "--task", "hi"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "hi");
    assert_eq!(mode_of(&state), 0o700, "MURMUR_HOME is held at 0700");
    let out = s.mur_with(None, Some(&state), &["run", cap, "-d", "--port", "0"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let ps = s.mur_with(None, Some(&state), &["ps", "-q"]);
    let listed = String::from_utf8_lossy(&ps.stdout).trim().to_string();
    // Another home does not see it: MURMUR_HOME, not HOME, is the home.
    let other = s.mur_with(Some(&s.home()), None, &["ps", "-q"]);
    let stop = s.mur_with(None, Some(&state), &["stop", &id]);
    assert_eq!(
        listed,
        id,
        "ps under MURMUR_HOME lists the session; {}",
        stderr(&ps)
    );
    assert_eq!(String::from_utf8_lossy(&other.stdout).trim(), "");
    assert_eq!(stop.status.code(), Some(0), "stderr: {}", stderr(&stop));
    assert!(state.join("running").is_dir());
    assert!(
        !s.murmur().exists(),
        "nothing is written under $HOME/.murmur"
    );
}

#[test]
fn a_relative_murmur_home_or_no_home_at_all_is_a_clear_error() {
    let s = Scratch::new("murmur-home-bad");
    let out = s.mur_with(Some(&s.home()), Some(Path::new("rel/state")), &["ps"]);
    expect_refusal(&out, &["MURMUR_HOME", "rel/state", "absolute"]);
    assert!(
        !s.root.join("rel").exists(),
        "nothing created at a relative path"
    );
    for home in [None, Some(Path::new("relative-home"))] {
        let out = s.mur_with(home, None, &["ps"]);
        expect_refusal(&out, &["MURMUR_HOME", "HOME "]);
    }
    // `mur run`, in the foreground, detached, with a handler or the embedded echo: the one
    // error, said once, and nothing started.
    let cap = capsule(&s.root);
    let cap = cap.to_str().unwrap();
    for args in [
        &["run", cap, "--task", "hi"][..],
        &["run", "--task", "hi"],
        &["run", cap, "-d", "--port", "0"],
    ] {
        let out = s.mur_with(None, None, args);
        expect_refusal(&out, &["neither MURMUR_HOME nor HOME is set"]);
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: said once, alone: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: {:?}", out.stdout);
    }
}

#[test]
fn a_murmur_home_that_is_a_link_is_refused_like_dot_murmur() {
    let s = Scratch::new("murmur-home-link");
    let link = s.root.join("state-link");
    symlink(s.outside(), &link).unwrap();
    let out = s.mur_with(None, Some(&link), &["ps"]);
    expect_refusal(&out, &["state-link"]);
    assert_eq!(fs::read_dir(s.outside()).unwrap().count(), 0);
}
