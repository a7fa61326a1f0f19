//! The capsule manifest, `murmur.json`: strict, so a typo is an error before anything starts
//! rather than a setting silently ignored.
//!
//! Every refusal names the manifest path, the key and what is allowed.

use std::path::{Path, PathBuf};

use crate::a2a::rpc;
use serde::Deserialize;

/// The largest manifest read.
const MAX_MANIFEST_BYTES: u64 = 256 * 1024;

/// A manifest as written; [`Manifest::load`] checks what serde cannot.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub name: String,
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
}

impl Default for Lifecycle {
    fn default() -> Self {
        Self {
            task_acceptance: Acceptance::Queue,
            concurrency: 1,
            queue_depth: 16,
            task_timeout_secs: 600,
            input_timeout_secs: 3600,
            memory_budget_mib: crate::session::budget::DEFAULT_MIB,
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

/// `network.cors`: each entry an origin as a browser sends it in `Origin` — `http` or `https`,
/// `://`, a host, an optional port, nothing after — listed once. The door compares origins byte
/// for byte, so anything else (a path, a trailing slash, a wildcard) could never match and is
/// refused here rather than silently allowing nothing.
fn check_cors(origins: &[String]) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, origin) in origins.iter().enumerate() {
        if !is_origin(origin) {
            return Err(format!(
                "network.cors[{i}]: '{}' is not an origin (http:// or https://, a lowercase host, an optional :port, nothing after; e.g. https://app.example.com)",
                origin.escape_debug()
            ));
        }
        if !seen.insert(origin) {
            return Err(format!("network.cors[{i}]: '{origin}' is listed twice"));
        }
    }
    Ok(())
}

/// A serialized origin: `http://` or `https://`, then a host of lowercase letters, digits, `-`
/// and `.` (or a bracketed IPv6 address), then an optional `:port` of 1 to 5 digits.
fn is_origin(text: &str) -> bool {
    let Some(rest) = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
    else {
        return false;
    };
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(':') && !port.contains(']') => (host, Some(port)),
        _ => (rest, None),
    };
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => !v6.is_empty() && v6.bytes().all(|b| b.is_ascii_hexdigit() || b == b':'),
        None => {
            !host.is_empty()
                && host.len() <= 253
                && host
                    .bytes()
                    .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.'))
        }
    };
    let port_ok =
        port.is_none_or(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
    host_ok && port_ok
}

/// `^[A-Z_][A-Z0-9_]{0,63}$`: control names, which reach a handler as environment variables.
fn is_valid_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'A'..=b'Z' | b'_'))
        && name.len() <= 64
        && bytes.all(|b| matches!(b, b'A'..=b'Z' | b'0'..=b'9' | b'_'))
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
        let manifest: Manifest =
            serde_json::from_slice(&bytes).map_err(|err| at(err.to_string()))?;
        manifest.check().map_err(at)?;
        // Absolute, so a handler named relative to the manifest is found whatever the
        // workdir it runs in (a relative `./murmur.json` with `--workdir` elsewhere), and
        // `MUR_CAPSULE_DIR` means the same from anywhere. `murmur.json`'s parent is the empty
        // path, which is the current directory.
        let dir = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let handler = resolve_handler(&manifest.run, &dir).map_err(at)?;
        Ok(Loaded {
            sha256: sha256_hex(&bytes),
            manifest,
            path,
            handler,
            dir,
        })
    }

    /// Every rule serde cannot express. The `Err` names the key and what is allowed.
    pub fn check(&self) -> Result<(), String> {
        if !is_valid_name(&self.name) {
            return Err(format!(
                "name: '{}' is not a capsule name (a lowercase letter, then up to 31 of a-z, 0-9, -)",
                self.name.escape_debug()
            ));
        }
        if self.version.is_empty()
            || self.version.len() > 64
            || self.version.chars().any(char::is_control)
        {
            return Err("version: must be 1 to 64 printable characters".into());
        }
        if self.run.is_empty() || self.run[0].is_empty() {
            return Err("run: must name the handler command, e.g. [\"./handler.sh\"]".into());
        }
        if self.run.iter().any(|arg| arg.contains('\0')) {
            return Err("run: an argument holds a NUL byte".into());
        }
        let lifecycle = &self.lifecycle;
        if lifecycle.concurrency == 0 || lifecycle.concurrency > 1024 {
            return Err("lifecycle.concurrency: must be 1 to 1024".into());
        }
        if lifecycle.queue_depth > 65_536 {
            return Err("lifecycle.queue_depth: must be 0 to 65536".into());
        }
        if lifecycle.task_timeout_secs == 0 || lifecycle.task_timeout_secs > 7 * 86_400 {
            return Err("lifecycle.task_timeout_secs: must be 1 to 604800".into());
        }
        if lifecycle.input_timeout_secs == 0 || lifecycle.input_timeout_secs > 7 * 86_400 {
            return Err("lifecycle.input_timeout_secs: must be 1 to 604800".into());
        }
        if !(16..=65_536).contains(&lifecycle.memory_budget_mib) {
            return Err("lifecycle.memory_budget_mib: must be 16 to 65536".into());
        }
        if let Some(auth) = &self.network.authentication {
            let mut seen = std::collections::BTreeSet::new();
            for credential in &auth.credentials {
                let name = &credential.name;
                if name == "operator" {
                    return Err("network.authentication.credentials: 'operator' is reserved for the operator token".into());
                }
                if !is_valid_name(name) {
                    return Err(format!(
                        "network.authentication.credentials: '{}' is not a credential name (a lowercase letter, then up to 31 of a-z, 0-9, -)",
                        name.escape_debug()
                    ));
                }
                if !seen.insert(name) {
                    return Err(format!(
                        "network.authentication.credentials: '{name}' is declared twice"
                    ));
                }
                if let Some(bad) = credential.scopes.iter().find(|s| !rpc::is_scope(s)) {
                    return Err(format!(
                        "network.authentication.credentials: '{name}' has scope '{}', which is not a door method (allowed: {})",
                        bad.escape_debug(),
                        rpc::scope_names().join(", ")
                    ));
                }
            }
        }
        check_cors(&self.network.cors)?;
        if let Some(url) = &self.network.advertise_url {
            check_advertise_url(url).map_err(|why| format!("network.advertise_url: {why}"))?;
        }
        if let Some(control) = &self.control {
            let mut seen = std::collections::BTreeSet::new();
            for (key, names) in [
                ("control.settings", &control.settings),
                ("control.secrets", &control.secrets),
            ] {
                for name in names {
                    if !is_valid_env_name(name) {
                        return Err(format!(
                            "{key}: '{}' is not a control name (A-Z, 0-9 and _, not starting with a digit; it becomes an environment variable)",
                            name.escape_debug()
                        ));
                    }
                    if super::contract::env::RESERVED_PREFIXES
                        .iter()
                        .any(|prefix| name.starts_with(prefix))
                    {
                        return Err(format!(
                            "{key}: '{name}': names starting MUR_ or MURMUR_ are mur's own"
                        ));
                    }
                    if !seen.insert(name) {
                        return Err(format!("{key}: '{name}' is declared twice"));
                    }
                }
            }
        }
        Ok(())
    }
}

/// argv with argv[0] resolved: a path with a `/` from `dir`, a bare name from `PATH`. The handler
/// must be an executable regular file.
fn resolve_handler(run: &[String], dir: &Path) -> Result<Vec<String>, String> {
    let program = &run[0];
    let resolved = if program.contains('/') {
        let path = dir.join(program);
        executable(&path).then_some(path).ok_or_else(|| {
            format!(
                "run: the handler {} does not exist or is not executable",
                dir.join(program).display()
            )
        })?
    } else {
        std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|d| d.join(program))
            .find(|p| executable(p))
            .ok_or_else(|| not_on_path(program, dir))?
    };
    let mut argv = vec![resolved.to_string_lossy().into_owned()];
    argv.extend(run[1..].iter().cloned());
    Ok(argv)
}

/// The error for a bare `run[0]` found nowhere on PATH. A file of that name beside the
/// manifest is almost always what was meant (`"run": ["handler.sh"]`), so the error says how
/// to name it: a bare name is looked up on PATH only, as a shell would.
fn not_on_path(program: &str, dir: &Path) -> String {
    let mut why = format!("run: the handler '{program}' is not an executable on PATH");
    let beside = dir.join(program);
    if std::fs::symlink_metadata(&beside).is_ok() {
        why.push_str(&format!(
            "; did you mean ./{program}? (a name without a slash is looked up on PATH; \
             ./{program} is relative to the manifest's directory)"
        ));
        if !executable(&beside) {
            why.push_str(&format!(
                " -- and {} is not executable (chmod +x)",
                beside.display()
            ));
        }
    }
    why
}

fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(value: serde_json::Value) -> Result<Manifest, String> {
        let manifest: Manifest = serde_json::from_value(value).map_err(|e| e.to_string())?;
        manifest.check()?;
        Ok(manifest)
    }

    fn minimal() -> serde_json::Value {
        json!({"name": "echo", "version": "0.1.0", "run": ["./handler.sh"]})
    }

    #[test]
    fn a_minimal_manifest_takes_the_defaults() {
        let m = parse(minimal()).unwrap();
        assert_eq!(m.lifecycle, Lifecycle::default());
        assert_eq!(m.lifecycle.queue_depth, 16);
        assert!(!m.exports.peer_tasks.accept);
        assert!(m.network.authentication.is_none() && m.control.is_none());
    }

    #[test]
    fn a_full_manifest_parses() {
        let m = parse(json!({
            "name": "reviewer", "version": "1.2.3", "run": ["python3", "h.py"],
            "lifecycle": {"task_acceptance": "single", "concurrency": 2, "queue_depth": 0, "task_timeout_secs": 5},
            "exports": {"peer_tasks": {"accept": true}},
            "network": {"authentication": {"credentials": [{"name": "reader", "scopes": ["tasks/get"]}]}},
            "control": {"settings": ["MODEL"], "secrets": ["API_KEY"]}
        })).unwrap();
        assert_eq!(m.lifecycle.task_acceptance, Acceptance::Single);
        assert_eq!(
            m.network.authentication.unwrap().credentials[0].scopes,
            ["tasks/get"]
        );
    }

    #[test]
    fn each_bad_manifest_is_refused_naming_the_key() {
        let cases: Vec<(serde_json::Value, &str)> = vec![
            (
                json!({"name": "echo", "version": "1", "run": ["x"], "colour": 1}),
                "colour",
            ),
            (
                json!({"name": "Echo", "version": "1", "run": ["x"]}),
                "name",
            ),
            (json!({"name": "e", "version": "", "run": ["x"]}), "version"),
            (json!({"name": "e", "version": "1", "run": []}), "run"),
            (json!({"name": "e", "version": "1"}), "run"),
            (
                json!({"name": "e", "version": "1", "run": ["x"], "lifecycle": {"concurrency": 0}}),
                "concurrency",
            ),
            (
                json!({"name": "e", "version": "1", "run": ["x"], "lifecycle": {"task_acceptance": "maybe"}}),
                "maybe",
            ),
            (
                json!({"name": "e", "version": "1", "run": ["x"], "lifecycle": {"bogus": 1}}),
                "bogus",
            ),
            (
                json!({"name": "e", "version": "1", "run": ["x"], "lifecycle": {"memory_budget_mib": 8}}),
                "lifecycle.memory_budget_mib",
            ),
            (
                json!({"name": "e", "version": "1", "run": ["x"], "lifecycle": {"memory_budget_mib": 70000}}),
                "memory_budget_mib",
            ),
            (
                json!({"name": "e", "version": "1", "run": ["x"], "network": {"authentication": {"credentials": [{"name": "operator", "scopes": []}]}}}),
                "operator",
            ),
            (
                json!({"name": "e", "version": "1", "run": ["x"], "network": {"authentication": {"credentials": [{"name": "r", "scopes": ["tasks/delete"]}]}}}),
                "tasks/delete",
            ),
            (
                json!({"name": "e", "version": "1", "run": ["x"], "control": {"secrets": ["lower"]}}),
                "control.secrets",
            ),
            (
                json!({"name": "e", "version": "1", "run": ["x"], "network": {"cors": ["https://a.example/"]}}),
                "network.cors[0]",
            ),
            (
                json!({"name": "e", "version": "1", "run": ["x"], "network": {"cors": ["https://a.example", "*"]}}),
                "network.cors[1]",
            ),
            (
                json!({"name": "e", "version": "1", "run": ["x"], "network": {"cors": ["http://a", "http://a"]}}),
                "twice",
            ),
            (
                json!({"name": "e", "version": "1", "run": ["x"], "network": {"cors": "https://a.example"}}),
                "sequence",
            ),
            (
                json!({"name": "e", "version": "1", "run": ["x"], "control": {"settings": ["A"], "secrets": ["A"]}}),
                "twice",
            ),
        ];
        for (value, needle) in cases {
            let err = parse(value.clone()).unwrap_err();
            assert!(err.contains(needle), "{value}: {err}");
        }
    }

    #[test]
    fn cors_origins() {
        for ok in [
            "https://app.example.com",
            "http://localhost:5173",
            "http://127.0.0.1:8080",
            "http://[::1]:3000",
        ] {
            assert!(is_origin(ok), "{ok}");
        }
        for bad in [
            "",
            "*",
            "null",
            "app.example.com",
            "ftp://a.example",
            "https://",
            "https://A.example",
            "https://a.example/",
            "https://a.example/path",
            "https://a.example:",
            "https://a.example:123456",
            "https://a.example:x",
            "https://user@a.example",
            "https://a.example ",
        ] {
            assert!(!is_origin(bad), "{bad}");
        }
    }

    #[test]
    fn names() {
        for ok in ["a", "echo", "a-1", &"a".repeat(32)] {
            assert!(is_valid_name(ok), "{ok}");
        }
        for bad in ["", "1a", "-a", "A", "a_b", "a.b", &"a".repeat(33)] {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn handlers_resolve_from_the_manifest_dir_or_path() {
        assert!(
            resolve_handler(&["sh".into(), "-c".into()], Path::new("/")).unwrap()[0]
                .ends_with("/sh")
        );
        assert!(
            resolve_handler(&["./nope".into()], Path::new("/"))
                .unwrap_err()
                .contains("/nope")
        );
        assert!(
            resolve_handler(&["/etc/passwd".into()], Path::new("/")).is_err(),
            "not executable"
        );
        assert!(resolve_handler(&["no-such-program-xyz".into()], Path::new("/")).is_err());
    }

    #[test]
    fn sha256_of_a_known_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
