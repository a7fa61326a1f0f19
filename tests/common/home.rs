//! A throwaway `HOME` (and the paths `mur` keeps under it), removed on drop.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::records::write_private;
use super::run::{MUR_DEADLINE, Output, PATIENT_DEADLINE, mur_command, run};
use super::session::Session;

/// A fresh, empty, canonical directory under the system temp dir, named `PREFIX-…`.
pub fn fresh_dir(prefix: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let path = std::env::temp_dir().join(format!(
        "{prefix}-{}-{}-{nanos:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    fs::create_dir(&path).expect("create a temporary directory");
    // Canonical, so it compares equal to the paths `mur` canonicalizes (workdirs).
    fs::canonicalize(&path).unwrap()
}

/// A fresh directory used as `HOME` (and as the parent of capsules and workdirs); removed (with
/// everything in it) on drop.
pub struct Home {
    path: PathBuf,
    /// How long [`Home::mur`] lets one command run before the test calls it hung.
    deadline: Duration,
}

impl Default for Home {
    fn default() -> Self {
        Self::new()
    }
}

impl Home {
    /// A home whose `mur` commands run under [`MUR_DEADLINE`].
    pub fn new() -> Self {
        Self {
            path: fresh_dir("mur-test"),
            deadline: MUR_DEADLINE,
        }
    }

    /// A home whose `mur` commands run under the longer [`PATIENT_DEADLINE`].
    pub fn patient() -> Self {
        Self {
            path: fresh_dir("mur-test"),
            deadline: PATIENT_DEADLINE,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `$HOME/.murmur`.
    pub fn murmur(&self) -> PathBuf {
        self.path.join(".murmur")
    }

    /// `$HOME/.murmur/running`.
    pub fn running(&self) -> PathBuf {
        self.murmur().join("running")
    }

    /// `$HOME/.murmur/running`, created at `0700` (with `~/.murmur`) as `mur run` would.
    pub fn running_dir(&self) -> PathBuf {
        for dir in [self.murmur(), self.running()] {
            if !dir.exists() {
                fs::create_dir(&dir).unwrap();
            }
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        }
        self.running()
    }

    /// `$HOME/.murmur/running/<session_id>.json`.
    pub fn record_path(&self, session_id: &str) -> PathBuf {
        self.running().join(format!("{session_id}.json"))
    }

    /// `$HOME/.murmur/running/<session_id>.control`.
    pub fn control_path(&self, session_id: &str) -> PathBuf {
        self.running().join(format!("{session_id}.control"))
    }

    /// The running record of `session_id`, parsed.
    pub fn record(&self, session_id: &str) -> Value {
        let bytes = fs::read(self.record_path(session_id)).expect("read the running record");
        serde_json::from_slice(&bytes).expect("the running record is JSON")
    }

    /// Write `record` as `<session_id>.json` (directory `0700`, file `0600`).
    pub fn write_record(&self, record: &Value) -> PathBuf {
        let id = record["session_id"]
            .as_str()
            .expect("a record has a session_id");
        let path = self.running_dir().join(format!("{id}.json"));
        write_private(&path, &serde_json::to_vec_pretty(record).unwrap());
        path
    }

    /// Write `token` as `<session_id>.control` (`0600`).
    pub fn write_control(&self, session_id: &str, token: &str) -> PathBuf {
        let path = self.running_dir().join(format!("{session_id}.control"));
        write_private(&path, token.as_bytes());
        path
    }

    /// The names in `~/.murmur/running` (none when it does not exist), sorted.
    pub fn running_entries(&self) -> Vec<String> {
        list_dir(&self.running())
    }

    /// A new empty directory under the home.
    pub fn dir(&self, name: &str) -> PathBuf {
        let dir = self.path.join(name);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A `mur ARGS…` command with this `HOME` and a minimal environment, run from the home
    /// directory (see [`mur_command`]).
    pub fn command(&self, args: &[&str]) -> Command {
        mur_command(&self.path, &self.path, args)
    }

    /// Run `mur ARGS…` to its end (stdin closed) under this home's deadline.
    #[track_caller]
    pub fn mur(&self, args: &[&str]) -> Output {
        run(self.command(args), self.deadline)
    }

    /// Write a capsule: `<home>/<name>/murmur.json` from `manifest` (with `"run": ["./handler.sh"]`
    /// added when it has no `run`) and, when `script` is given, `handler.sh` (mode 0755). The
    /// manifest's path.
    pub fn write_capsule(&self, name: &str, mut manifest: Value, script: Option<&str>) -> PathBuf {
        let dir = self.dir(name);
        if manifest.get("run").is_none() {
            manifest["run"] = json!(["./handler.sh"]);
        }
        if let Some(script) = script {
            write_script(&dir.join("handler.sh"), script);
        }
        let path = dir.join("murmur.json");
        fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
        path
    }

    /// `mur run --json ARGS…`, past its readiness line.
    pub fn start(&self, args: &[&str]) -> Session {
        let mut full = vec!["run", "--json"];
        full.extend_from_slice(args);
        Session::spawn(self.command(&full))
    }

    /// `mur token ARGS…`: the one token it prints.
    pub fn token(&self, args: &[&str]) -> String {
        let out = self.mur(&[&["token"][..], args].concat());
        out.expect_code(0);
        let token = out
            .stdout
            .strip_suffix('\n')
            .expect("a token and a newline");
        assert!(
            !token.is_empty() && !token.contains(char::is_whitespace),
            "one token: {:?}",
            out.stdout
        );
        token.to_string()
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        // Make sure nothing the test re-moded keeps the removal out.
        for dir in [self.murmur(), self.running()] {
            if fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
                let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o700));
            }
        }
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// The names of every entry in `dir` (none when it does not exist), sorted.
pub fn list_dir(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|list| {
            list.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Write an executable (`0755`) script.
pub fn write_script(path: &Path, script: &str) {
    fs::write(path, script).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// The permission bits of `path` (not following a final link).
pub fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path)
        .unwrap_or_else(|err| panic!("{}: {err}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// The repository's root (what `examples/`, `install.sh` and `tests/sdk/` are under).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}
