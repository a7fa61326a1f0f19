//! The capsule manifest, `murmur.json`: strict, so a typo is an error before anything starts
//! rather than a setting silently ignored.
//!
//! Every refusal names the manifest path, the key and what is allowed.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::shape::{Field, Problems, Shape};
use crate::sys::fs::{find_on_path, is_executable};

mod rules;

/// The largest manifest read.
const MAX_MANIFEST_BYTES: u64 = 256 * 1024;

/// A manifest as written; [`Manifest::load`] checks what serde cannot.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Required (by [`SHAPE`]); serde's default is only for a manifest whose name the shape
    /// check removed, so the other sections are still checked.
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: String,
    /// argv of the handler; relative paths resolve from the manifest's directory.
    #[serde(default)]
    pub run: Vec<String>,
    #[serde(default)]
    pub lifecycle: Lifecycle,
    #[serde(default)]
    pub exports: Exports,
    #[serde(default)]
    pub network: Network,
    #[serde(default)]
    pub control: Option<Control>,
    #[serde(default)]
    pub sandbox: super::sandbox::Sandbox,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Acceptance {
    /// Tasks beyond `concurrency` wait in a queue of `queue_depth`.
    #[default]
    Queue,
    /// One task at a time; another arriving meanwhile is refused.
    Single,
    /// The door takes no tasks.
    None,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Lifecycle {
    pub task_acceptance: Acceptance,
    pub concurrency: u32,
    pub queue_depth: u32,
    pub task_timeout_secs: u64,
    /// How long a task waiting for input (its handler exited 10) waits before it fails.
    pub input_timeout_secs: u64,
    /// The session's one memory budget, in MiB ([`crate::session::budget`]): 16 to 65536.
    pub memory_budget_mib: u64,
    /// Whether a named session's task that was running when the session died is run again at
    /// its next start (queued as new) instead of ending `failed` (`session::journal`).
    pub retry_interrupted: bool,
}

/// The default memory budget ([`crate::session::budget`]): with the door's 1 MiB request bound and its connection bound this keeps
/// every hostile mix the tests and bench try under 256 MiB of resident memory.
pub const DEFAULT_MEMORY_BUDGET_MIB: u64 = 128;

impl Default for Lifecycle {
    fn default() -> Self {
        Self {
            task_acceptance: Acceptance::Queue,
            concurrency: 1,
            queue_depth: 16,
            task_timeout_secs: 600,
            input_timeout_secs: 3600,
            memory_budget_mib: DEFAULT_MEMORY_BUDGET_MIB,
            retry_interrupted: false,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exports {
    #[serde(default)]
    pub peer_tasks: PeerTasks,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerTasks {
    #[serde(default)]
    pub accept: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    #[serde(default)]
    pub authentication: Option<Authentication>,
    /// The browser origins (`https://app.example.com`) allowed to call the door cross-origin.
    /// Empty (the default): the door answers no CORS at all.
    #[serde(default)]
    pub cors: Vec<String>,
    /// The URL the agent card advertises (`--advertise-url` wins over it).
    #[serde(default)]
    pub advertise_url: Option<String>,
    /// Push notifications: off unless declared.
    #[serde(default)]
    pub push: Push,
}

/// `network.push`: `true` (or an object) turns push notifications on; `allow` names the hosts a
/// webhook may reach although they resolve to addresses no webhook reaches otherwise (loopback,
/// private, link-local: [`crate::net::webhook::forbidden`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Push {
    pub on: bool,
    /// Host names or IP addresses as a webhook URL writes them (an IPv6 one without brackets),
    /// compared with the URL's host, case aside.
    pub allow: Vec<String>,
}

impl<'de> Deserialize<'de> for Push {
    /// `true`, `false`, or `{"allow": [host…]}` (on). Its shape was checked by [`SHAPE`] first:
    /// what is refused here only reaches serde from a caller that skipped it.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde_json::Value;
        let refuse = || serde::de::Error::custom("expected true, false or {\"allow\": [host…]}");
        match Value::deserialize(deserializer)? {
            Value::Bool(on) => Ok(Push {
                on,
                allow: Vec::new(),
            }),
            Value::Object(mut rules) => {
                let allow = match rules.remove("allow") {
                    None => Vec::new(),
                    Some(list) => serde_json::from_value(list).map_err(|_| refuse())?,
                };
                match rules.is_empty() {
                    true => Ok(Push { on: true, allow }),
                    false => Err(refuse()),
                }
            }
            _ => Err(refuse()),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Authentication {
    #[serde(default)]
    pub credentials: Vec<Credential>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credential {
    pub name: String,
    pub scopes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Control {
    pub settings: Vec<String>,
    pub secrets: Vec<String>,
}

/// What a manifest's keys hold ([`crate::json::shape`]); the rules on their values are in
/// [`Manifest::rules`]. A section is one [`Field`] here.
pub const SHAPE: Shape = Shape::Object(&[
    Field::required("name", Shape::Text),
    Field::required("version", Shape::Text),
    Field::optional("run", Shape::List(&Shape::Text)),
    Field::optional("lifecycle", LIFECYCLE),
    Field::optional(
        "exports",
        Shape::Object(&[Field::optional(
            "peer_tasks",
            Shape::Object(&[Field::optional("accept", Shape::Flag)]),
        )]),
    ),
    Field::optional("network", NETWORK),
    Field::optional(
        "control",
        Shape::OrNull(&Shape::Object(&[
            Field::optional("settings", Shape::List(&Shape::Text)),
            Field::optional("secrets", Shape::List(&Shape::Text)),
        ])),
    ),
    Field::optional("sandbox", SANDBOX),
]);

/// `sandbox`'s form; what its paths and ports mean is [`super::sandbox`]'s to check.
const SANDBOX: Shape = Shape::Either(&[
    Shape::Flag,
    Shape::Choice(&["required"]),
    Shape::Object(&[
        Field::optional("read", Shape::List(&Shape::Text)),
        Field::optional("write", Shape::List(&Shape::Text)),
        Field::optional("connect", Shape::List(&Shape::Whole(u16::MAX as u64))),
        Field::optional("user", Shape::Text),
    ]),
]);

const U32: u64 = u32::MAX as u64;

const LIFECYCLE: Shape = Shape::Object(&[
    Field::optional(
        "task_acceptance",
        Shape::Choice(&["queue", "single", "none"]),
    ),
    Field::optional("concurrency", Shape::Whole(U32)),
    Field::optional("queue_depth", Shape::Whole(U32)),
    Field::optional("task_timeout_secs", Shape::Whole(u64::MAX)),
    Field::optional("input_timeout_secs", Shape::Whole(u64::MAX)),
    Field::optional("memory_budget_mib", Shape::Whole(u64::MAX)),
    Field::optional("retry_interrupted", Shape::Flag),
]);

const NETWORK: Shape = Shape::Object(&[
    Field::optional(
        "authentication",
        Shape::OrNull(&Shape::Object(&[Field::optional(
            "credentials",
            Shape::List(&Shape::Object(&[
                Field::required("name", Shape::Text),
                Field::required("scopes", Shape::List(&Shape::Text)),
            ])),
        )])),
    ),
    Field::optional("cors", Shape::List(&Shape::Text)),
    Field::optional("advertise_url", Shape::OrNull(&Shape::Text)),
    Field::optional(
        "push",
        Shape::Either(&[
            Shape::Flag,
            Shape::Object(&[Field::optional("allow", Shape::List(&Shape::Text))]),
        ]),
    ),
]);

/// A manifest that passed every check, with its handler resolved to a path that exists.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub manifest: Manifest,
    /// The manifest file.
    pub path: PathBuf,
    /// `run` with `argv[0]` resolved (from the manifest's directory, or `PATH` for a bare name).
    pub handler: Vec<String>,
    /// The manifest's directory, absolute where it can be made so: the handler's
    /// `MUR_CAPSULE_DIR`, since its cwd is the workdir, not where its own files are.
    pub dir: PathBuf,
    /// SHA-256 of the manifest file's bytes, lowercase hex.
    pub sha256: String,
}

/// `^[a-z][a-z0-9-]{0,31}$`: capsule, member and credential names.
pub fn is_valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z'))
        && name.len() <= 32
        && bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
}

/// An advertised URL (`--advertise-url`, `network.advertise_url`): `http://` or `https://`, a
/// host, at most 2,048 printable characters without spaces — it goes into every card as it is,
/// and an SDK follows it, so a typo is refused at start, not found by a client.
pub fn check_advertise_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    let host = rest
        .and_then(|r| r.split(['/', '?', '#']).next())
        .unwrap_or("");
    if rest.is_none()
        || host.is_empty()
        || url.len() > 2048
        || !url.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(format!(
            "'{}' is not a URL a client can follow (http:// or https://, a host, no spaces; e.g. http://203.0.113.7:18080/)",
            url.escape_debug()
        ));
    }
    Ok(())
}

impl Manifest {
    /// Read, parse and check the manifest at `path` (a file, or a directory holding
    /// `murmur.json`). Every `Err` starts with the manifest path.
    pub fn load(path: &Path) -> Result<Loaded, String> {
        let path = if path.is_dir() {
            path.join("murmur.json")
        } else {
            path.to_path_buf()
        };
        let at = |why: String| format!("{}: {why}", path.display());
        let bytes =
            crate::sys::fs::read_small_regular(&path, MAX_MANIFEST_BYTES).map_err(|refusal| {
                at(match refusal {
                    crate::sys::fs::ReadRefusal::Vanished => "no such file".into(),
                    crate::sys::fs::ReadRefusal::Invalid(why)
                    | crate::sys::fs::ReadRefusal::Io(why) => why,
                })
            })?;
        let (manifest, handler, dir) = Self::admit(&bytes, &path).map_err(at)?;
        Ok(Loaded {
            sha256: sha256_hex(&bytes),
            manifest,
            path,
            handler,
            dir,
        })
    }

    /// Parse a manifest's bytes and check its shape and rules: the manifest (with whatever the
    /// shape check removed at its default), unless the document is not even an object, and
    /// every problem found. The `Err` is JSON that does not parse.
    fn read(bytes: &[u8]) -> Result<(Option<Manifest>, Problems), String> {
        let mut value = super::shape::parse(bytes)?;
        let mut problems = Problems::default();
        super::shape::check(&mut value, &SHAPE, "", &mut problems);
        // With the wrong values pruned, serde reads the rest of an object (a missing name or
        // version read as empty, already noted).
        let manifest = value
            .is_object()
            .then(|| serde_json::from_value::<Manifest>(value).ok())
            .flatten();
        if let Some(manifest) = &manifest {
            manifest.rules(&mut problems);
        }
        Ok((manifest, problems))
    }

    /// Parse and check a manifest's bytes, and resolve its handler from the directory of
    /// `path`: the manifest, its handler's argv, and that directory (absolute where it can be
    /// made so). The `Err` lists every problem found, each under its key path.
    fn admit(bytes: &[u8], path: &Path) -> Result<(Manifest, Vec<String>, PathBuf), String> {
        let (manifest, mut problems) = Self::read(bytes)?;
        let Some(manifest) = manifest else {
            problems.into_result()?;
            return Err("does not read as a manifest".into());
        };
        // Absolute, so a handler named relative to the manifest is found whatever the
        // workdir it runs in (a relative `./murmur.json` with `--workdir` elsewhere), and
        // `MUR_CAPSULE_DIR` means the same from anywhere. `murmur.json`'s parent is the empty
        // path, which is the current directory.
        let dir = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let mut handler = Vec::new();
        if !problems.about("run") {
            match resolve_handler(&manifest.run, &dir) {
                Ok(argv) => handler = argv,
                Err(why) => problems.add("run", why),
            }
        }
        problems.into_result()?;
        Ok((manifest, handler, dir))
    }
}

/// argv with argv[0] resolved: a path with a `/` from `dir`, a bare name from `PATH` (its absolute
/// entries only, [`crate::sys::fs::find_on_path`], as the spawn looks). The handler must be an
/// executable regular file.
fn resolve_handler(run: &[String], dir: &Path) -> Result<Vec<String>, String> {
    let program = &run[0];
    let resolved = if program.contains('/') {
        // `components` drops each `.`, so `./h.sh` is shown (and run) as `DIR/h.sh`.
        let path: PathBuf = dir.join(program).components().collect();
        if !is_executable(&path) {
            return Err(not_executable(&path));
        }
        path
    } else {
        std::env::var_os("PATH")
            .and_then(|path| find_on_path(program.as_ref(), &path))
            .ok_or_else(|| not_on_path(program, dir))?
    };
    let mut argv = vec![resolved.to_string_lossy().into_owned()];
    argv.extend(run[1..].iter().cloned());
    Ok(argv)
}

/// Why the handler at `path` cannot run, with the fix when it is one command: a regular file
/// without an execute bit is the common case (an editor or an unzip drops the bit).
fn not_executable(path: &Path) -> String {
    let shown = path.display();
    match std::fs::metadata(path) {
        Err(_) => format!("the handler {shown} does not exist"),
        Ok(meta) if !meta.is_file() => format!("the handler {shown} is not a regular file"),
        Ok(_) => format!("the handler {shown} is not executable; make it so: chmod +x {shown}"),
    }
}

/// The error for a bare `run[0]` found nowhere on PATH. A file of that name beside the
/// manifest is almost always what was meant (`"run": ["handler.sh"]`), so the error says how
/// to name it: a bare name is looked up on PATH only, as a shell would.
fn not_on_path(program: &str, dir: &Path) -> String {
    let mut why = format!("the handler '{program}' is not an executable on PATH");
    let beside = dir.join(program);
    if std::fs::symlink_metadata(&beside).is_ok() {
        why.push_str(&format!(
            "; did you mean ./{program}? (a name without a slash is looked up on PATH; \
             ./{program} is relative to the manifest's directory)"
        ));
        if !is_executable(&beside) {
            why.push_str(&format!(" -- and {}", not_executable(&beside)));
        }
    }
    why
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    crate::id::lower_hex(&sha2::Sha256::digest(bytes))
}

#[cfg(test)]
mod tests;
