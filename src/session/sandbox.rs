//! The session's sandbox for its handlers: what each may reach, prepared once at the start, and
//! the Landlock ruleset each task's handler is started in ([`crate::sys::landlock`]).
//!
//! The default allow-list: read and run the system's directories (`SYSTEM`, those present);
//! read `/proc` (another process's entries stay behind ptrace's rules, which Landlock tightens
//! across domains, and mur is not dumpable; docs/sandbox.md says what root still reads there);
//! the device nodes `DEVICES`; read and run the capsule directory and mur's own binary
//! (`$MUR formation call`); everything in the workdir, the task's directory and the session's
//! private `TMPDIR`; and what `sandbox.read`/`write` declare. Never a place that holds a token
//! or a key (`session/hidden.rs`: every murmur home mur knows, a formation member's directory): a
//! declaration containing or inside one is refused, and any other tree containing one — a
//! system directory, the workdir, the capsule directory — is granted entry by entry around it
//! (Landlock grants whole hierarchies, with no exceptions carved out), which the session says at
//! its start for the workdir and capsule directory. Before the first task, a thread entering the
//! very domain a handler gets tries to open each of them (`probe`): one it can open
//! stops the start.
//!
//! The home is always somewhere an unsandboxed handler could read every session's tokens; so a
//! session whose kernel has no Landlock says so (stderr, and its record for `mur ps -v`), and one
//! whose manifest says `"sandbox": false` says so at every start.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::hidden::Place;
use super::taskdir::SessionTasks;
use crate::json::sandbox::{Mode, Sandbox};
#[cfg(target_os = "linux")]
use crate::sys::landlock;
#[cfg(target_os = "linux")]
use linux::build;
#[cfg(target_os = "linux")]
pub use linux::{Domain, Policy};

/// What the session's handlers run in.
struct Setup {
    /// The prepared policy; `None` when handlers run unsandboxed.
    policy: Option<Policy>,
    /// Why handlers run unsandboxed, for the record (`mur ps -v`); `None` when they do not.
    unsandboxed: Option<String>,
}

/// Where the session's handlers run, and what they may reach.
// Read by the Linux build only: elsewhere there is no Landlock, and no policy is built of them.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
struct Places<'a> {
    capsule_dir: &'a Path,
    workdir: &'a Path,
    /// The session's `TMPDIR`, when it has one.
    tmpdir: Option<PathBuf>,
    /// What no handler may reach ([`super::hidden::places`]).
    hidden: Vec<Place>,
}

/// Prepare the sandbox `declared` asks for. The `Err`: a declaration containing or inside a
/// hidden place, or naming nothing, `"required"` on a kernel without Landlock, a ruleset that
/// cannot be made, or one under which a hidden place can be opened — the session does not start.
fn prepare(declared: &Sandbox, places: Places<'_>) -> Result<Setup, String> {
    if declared.mode == Mode::Off {
        crate::cli::warn(
            "run",
            "sandbox: off (the manifest says \"sandbox\": false): handlers run with all of this \
             user's access, the murmur home and every session's tokens included",
        );
        return Ok(unsandboxed("off: the manifest sets sandbox to false"));
    }
    let checked = check_declared(declared, &places.hidden)?;
    let abi = match kernel_abi() {
        Ok(abi) => abi,
        Err(why) if declared.mode == Mode::Required => {
            return Err(format!(
                "sandbox: the manifest says \"required\", but {why}; the session does not start"
            ));
        }
        Err(why) => {
            crate::cli::warn(
                "run",
                &format!(
                    "sandbox: unavailable ({why}): handlers run with all of this user's access, \
                     the murmur home and every session's tokens included"
                ),
            );
            return Ok(unsandboxed(&format!("unavailable: {why}")));
        }
    };
    let policy = build(abi, declared, &places, &checked)?;
    Ok(Setup {
        policy: Some(policy),
        unsandboxed: None,
    })
}

/// Each path `declared` names, resolved (`~`, links): the `Err` names the key of one that does
/// not exist, or that contains or is inside a `hidden` place.
fn check_declared(
    declared: &Sandbox,
    hidden: &[Place],
) -> Result<Vec<(&'static str, PathBuf)>, String> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let declared_paths = declared.declared(home.as_deref().filter(|h| h.is_absolute()))?;
    let mut checked = Vec::new();
    for (key, written, path) in declared_paths {
        let real = std::fs::canonicalize(&path)
            .map_err(|err| format!("{key}: {}: {err}", written.display()))?;
        for Place { path: place, what } in hidden {
            let (contains, inside) = (
                place.starts_with(&real) || place.starts_with(&path),
                real.starts_with(place),
            );
            if contains || inside {
                let relation = if contains { "contains" } else { "is inside" };
                return Err(format!(
                    "{key}: {} {relation} {what} {}, which no handler may reach (it holds tokens \
                     or keys; Landlock grants whole trees): declare the directories beside it \
                     instead",
                    written.display(),
                    place.display()
                ));
            }
        }
        checked.push((key, real));
    }
    Ok(checked)
}

/// Prepare the sandbox of the handlers run in `workdir` as `declared` asks (a private `TMPDIR` in
/// `tasks`, the session's task directory, when it has one; `formation_dir` hidden with every
/// murmur home): the policy they are started under, or none and why they run unsandboxed. The
/// embedded echo runs no handler and asks for none.
pub fn apply(
    workdir: &Path,
    declared: &Sandbox,
    capsule_dir: Option<&Path>,
    tasks: Option<&SessionTasks>,
    formation_dir: Option<&Path>,
) -> Result<(Option<Arc<Policy>>, Option<String>), String> {
    let tmpdir = match tasks.map(SessionTasks::scratch).transpose() {
        Ok(tmpdir) => tmpdir,
        Err(why) => {
            crate::cli::warn("run", &format!("{why}; handlers get no private TMPDIR"));
            None
        }
    };
    let places = Places {
        capsule_dir: capsule_dir.unwrap_or(workdir),
        workdir,
        tmpdir,
        hidden: super::hidden::places(formation_dir)?,
    };
    let setup = prepare(declared, places)?;
    Ok((setup.policy.map(Arc::new), setup.unsandboxed))
}

fn unsandboxed(why: &str) -> Setup {
    Setup {
        policy: None,
        unsandboxed: Some(why.to_string()),
    }
}

/// The kernel's Landlock ABI, or why there is none.
#[cfg(target_os = "linux")]
fn kernel_abi() -> Result<u32, String> {
    landlock::abi().map_err(|err| match err.raw_os_error() {
        Some(libc::ENOSYS) => "this kernel has no Landlock".to_string(),
        Some(libc::EOPNOTSUPP) => "Landlock is not enabled in this kernel (boot lsm=)".into(),
        _ => format!("Landlock cannot be used: {err}"),
    })
}

#[cfg(not(target_os = "linux"))]
fn kernel_abi() -> Result<u32, String> {
    Err("there is no Landlock on this system".into())
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::OsString;
    use std::io;
    use std::path::{Path, PathBuf};

    use super::{Place, Places};
    use crate::json::sandbox::Sandbox;
    use crate::sys::landlock::{self, Held, Ruleset};

    /// What a handler's domain is made of: a ruleset, entered between its clone and exec.
    pub type Domain = Ruleset;

    /// The system's directories a handler reads and runs programs from, where present.
    const SYSTEM: &[&str] = &[
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
    ];
    /// The device nodes a program expects to open, where present.
    const DEVICES: &[&str] = &[
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/random",
        "/dev/urandom",
        "/dev/tty",
    ];

    /// The rules every handler of the session gets, held open.
    pub struct Policy {
        abi: u32,
        rules: Vec<(Held, u64)>,
        connect: Option<Vec<u16>>,
        /// The private `TMPDIR`, when the session has a task directory to hold it.
        tmpdir: Option<PathBuf>,
    }

    impl std::fmt::Debug for Policy {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Policy")
                .field("abi", &self.abi)
                .field("tmpdir", &self.tmpdir)
                .finish_non_exhaustive()
        }
    }

    /// Every rule of the default allow-list and the declarations, held open; one ruleset made of
    /// them at once, so a rule the kernel refuses stops the start, not each task.
    pub(super) fn build(
        abi: u32,
        declared: &Sandbox,
        places: &Places<'_>,
        checked: &[(&str, PathBuf)],
    ) -> Result<Policy, String> {
        let hidden = &places.hidden;
        let proc = landlock::READ_FILE | landlock::READ_DIR;
        let defaults = SYSTEM
            .iter()
            .map(|p| (PathBuf::from(p), landlock::READ_EXEC))
            .chain(std::iter::once((PathBuf::from("/proc"), proc)))
            .chain(DEVICES.iter().map(|p| (PathBuf::from(p), landlock::ALL)))
            .chain(std::env::current_exe().map(|exe| (exe, landlock::READ_EXEC)));
        let mut rules = Vec::new();
        // Where present and openable (a default that cannot be held is skipped), and once: a
        // link into a tree already granted as much (`/bin` to `/usr/bin`) is no rule of its
        // own, since every rule costs each task's ruleset and domain a little.
        let mut granted: Vec<(PathBuf, u64)> = Vec::new();
        for (path, access) in defaults {
            let real = std::fs::canonicalize(&path).unwrap_or(path);
            if granted
                .iter()
                .any(|(tree, has)| real.starts_with(tree) && has & access == access)
            {
                continue;
            }
            let _ = grant(&mut rules, &real, access, hidden);
            granted.push((real, access));
        }
        let mut wanted: Vec<(PathBuf, u64)> = places
            .tmpdir
            .iter()
            .map(|t| (t.clone(), landlock::ALL))
            .collect();
        for (key, path) in checked {
            let access = match *key {
                "sandbox.read" => landlock::READ_EXEC,
                _ => landlock::ALL,
            };
            wanted.push((path.clone(), access));
        }
        for (path, access) in wanted {
            grant(&mut rules, &path, access, hidden)
                .map_err(|err| format!("sandbox: cannot allow {}: {err}", path.display()))?;
        }
        for (what, path, access) in [
            ("capsule directory", places.capsule_dir, landlock::READ_EXEC),
            ("workdir", places.workdir, landlock::ALL),
        ] {
            let inside: Vec<String> = hidden
                .iter()
                .filter(|place| place.path.starts_with(path))
                .map(|place| format!("{} {}", place.what, place.path.display()))
                .collect();
            if !inside.is_empty() {
                crate::cli::warn(
                    "run",
                    &format!(
                        "sandbox: the {what} {} contains {}: handlers may use what is in it but \
                         not list it or add to it directly (a {what} elsewhere gives them all of \
                         it)",
                        path.display(),
                        inside.join(" and "),
                    ),
                );
            }
            grant(&mut rules, path, access, hidden).map_err(|err| {
                format!("sandbox: cannot allow the {what} {}: {err}", path.display())
            })?;
        }
        let policy = Policy {
            abi,
            rules,
            connect: declared.connect.clone().filter(|_| abi >= 4),
            tmpdir: places.tmpdir.clone(),
        };
        if declared.connect.is_some() && abi < 4 {
            crate::cli::warn(
                "run",
                &format!(
                    "sandbox: sandbox.connect is not enforced (Landlock ABI {abi}; ports need 4)"
                ),
            );
        }
        let ruleset = policy
            .ruleset(None)
            .map_err(|err| format!("sandbox: the Landlock ruleset cannot be made: {err}"))?;
        match probe(&ruleset, hidden) {
            Ok(None) => {}
            Ok(Some(open)) => {
                return Err(format!(
                    "sandbox: a handler could open {} {}, which holds tokens or keys; the \
                     session does not start (report this: mur grants no tree that contains it)",
                    open.what,
                    open.path.display()
                ));
            }
            Err(err) => {
                return Err(format!(
                    "sandbox: the handlers' domain cannot be entered ({err}); the session does \
                     not start"
                ));
            }
        }
        Ok(policy)
    }

    /// Hold `path` for `access`; a path containing a `hidden` place is granted entry by entry
    /// around it (the entries on the way to it recursively, links there never followed), the
    /// place never.
    fn grant(
        rules: &mut Vec<(Held, u64)>,
        path: &Path,
        access: u64,
        hidden: &[Place],
    ) -> io::Result<()> {
        let holds = |tree: &Path| hidden.iter().any(|place| place.path.starts_with(tree));
        if !holds(path) {
            rules.extend(Held::open(path, true)?.map(|held| (held, access)));
            return Ok(());
        }
        if hidden.iter().any(|place| place.path == path) {
            return Ok(());
        }
        for entry in std::fs::read_dir(path)? {
            let child = entry?.path();
            if holds(&child) {
                grant(rules, &child, access, hidden)?;
            } else {
                rules.extend(Held::open(&child, false)?.map(|held| (held, access)));
            }
        }
        Ok(())
    }

    /// The first of `hidden` a handler in a domain of `ruleset` can open, tried for real
    /// ([`landlock::first_open`]). `Ok(None)` is the kernel's own word that the rules hide them
    /// all, whatever `grant` got wrong; the `Err`, that the domain cannot be entered (so no
    /// handler could start in it either).
    fn probe(ruleset: &Ruleset, hidden: &[Place]) -> io::Result<Option<Place>> {
        let paths: Vec<&Path> = hidden.iter().map(|place| place.path.as_path()).collect();
        let first = landlock::first_open(ruleset, &paths)?;
        Ok(first.map(|at| hidden[at].clone()))
    }

    impl Policy {
        /// The variables every handler gets besides the session's: its private `TMPDIR`.
        pub fn env(&self) -> Vec<(String, OsString)> {
            self.tmpdir
                .iter()
                .map(|dir| ("TMPDIR".to_string(), dir.clone().into()))
                .collect()
        }

        /// A ruleset of the session's rules and `task_dir` (read-write), for one handler's domain.
        pub fn ruleset(&self, task_dir: Option<&Path>) -> io::Result<Ruleset> {
            let ruleset = Ruleset::new(self.abi, self.connect.is_some())?;
            for (held, access) in &self.rules {
                ruleset.allow(held, *access)?;
            }
            if let Some(held) = task_dir.map(|dir| Held::open(dir, false)).transpose()? {
                held.into_iter()
                    .try_for_each(|held| ruleset.allow(&held, landlock::ALL))?;
            }
            for &port in self.connect.iter().flatten() {
                ruleset.allow_port(port)?;
            }
            Ok(ruleset)
        }
    }
}

/// No Landlock here: no policy is ever made.
#[cfg(not(target_os = "linux"))]
#[derive(Debug)]
pub enum Policy {}

/// No Landlock here: no domain is ever made.
#[cfg(not(target_os = "linux"))]
pub enum Domain {}

#[cfg(not(target_os = "linux"))]
impl Policy {
    pub fn env(&self) -> Vec<(String, std::ffi::OsString)> {
        match *self {}
    }

    pub fn ruleset(&self, _task_dir: Option<&Path>) -> std::io::Result<Domain> {
        match *self {}
    }
}

#[cfg(not(target_os = "linux"))]
impl Domain {
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        match *self {}
    }
}

#[cfg(not(target_os = "linux"))]
fn build(
    _abi: u32,
    _declared: &Sandbox,
    _places: &Places<'_>,
    _checked: &[(&str, PathBuf)],
) -> Result<Policy, String> {
    Err("there is no Landlock on this system".into())
}
