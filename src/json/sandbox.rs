//! The manifest's `sandbox` key: whether, and with what more than the default allow-list, a
//! capsule's handlers run in a Landlock domain ([`crate::session::sandbox`] builds it).
//!
//! `true` (the default) | `false` | `"required"` | {`read`: [path…], `write`: [path…],
//! `connect`: [port…], `user`: name}; a path is absolute or `~/…` (the user's home); `user` is
//! whom handlers run as when mur runs as root (none, the default: a uid of the session's own keeping
//! root's file access; `"dynamic"`: that uid without it; `"root"`; or a user of the system's
//! database — [`crate::session::identity`]). Only the form is checked
//! here; whether a path contains the murmur home is checked where the paths are resolved, at the
//! session's start.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Whether handlers are sandboxed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    /// Where the kernel has Landlock; elsewhere the session starts and warns.
    #[default]
    On,
    /// Never: the session says so at every start.
    Off,
    /// Where the kernel has Landlock; elsewhere the session does not start.
    Required,
}

/// The `sandbox` key, parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sandbox {
    pub mode: Mode,
    /// More hierarchies the handler may read (and run from), as written.
    pub read: Vec<PathBuf>,
    /// More hierarchies the handler may read and write, as written.
    pub write: Vec<PathBuf>,
    /// The TCP ports the handler may connect to: `None` leaves connects alone; `Some` allows those
    /// only (where the kernel's Landlock has ABI ≥ 4).
    pub connect: Option<Vec<u16>>,
    /// Whom handlers run as when mur runs as root, as written: `None` is the default (a dynamic
    /// uid keeping root's file access).
    pub user: Option<String>,
}

impl<'de> Deserialize<'de> for Sandbox {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_value(&value).map_err(serde::de::Error::custom)
    }
}

/// One declared path: its key (`sandbox.read` or `sandbox.write`), as written, and resolved.
pub type Declared<'a> = (&'static str, &'a Path, PathBuf);

const EXPECTED: &str = "expected true, false, \"required\" or {\"read\": [path…], \"write\": \
                        [path…], \"connect\": [port…], \"user\": name}";

impl Sandbox {
    /// The key's value; the `Err` names the key path and what is allowed.
    pub fn from_value(value: &Value) -> Result<Self, String> {
        let mode = match value {
            Value::Bool(true) => Mode::On,
            Value::Bool(false) => Mode::Off,
            Value::String(word) if word == "required" => Mode::Required,
            Value::Object(table) => return Self::from_table(table),
            _ => return Err(format!("sandbox: {EXPECTED}")),
        };
        Ok(Self {
            mode,
            ..Self::default()
        })
    }

    fn from_table(table: &serde_json::Map<String, Value>) -> Result<Self, String> {
        let mut sandbox = Self::default();
        for (key, value) in table {
            match key.as_str() {
                "read" => sandbox.read = paths(key, value)?,
                "write" => sandbox.write = paths(key, value)?,
                "connect" => sandbox.connect = Some(ports(value)?),
                "user" => sandbox.user = Some(user(value)?),
                other => {
                    return Err(format!(
                        "sandbox.{other}: unknown key (allowed: read, write, connect, user)",
                        other = other.escape_debug()
                    ));
                }
            }
        }
        Ok(sandbox)
    }

    /// Each declared path, as written and with `~` put in `home`: `(key, written, path)`, reads
    /// first.
    pub fn declared(&self, home: Option<&Path>) -> Result<Vec<Declared<'_>>, String> {
        let tagged = self.read.iter().map(|p| ("sandbox.read", p));
        let tagged = tagged.chain(self.write.iter().map(|p| ("sandbox.write", p)));
        tagged
            .map(|(key, path)| match path.strip_prefix("~") {
                Ok(rest) => home.map(|home| (key, path.as_path(), home.join(rest))).ok_or_else(|| {
                    format!(
                        "{key}: {} names the home directory, but HOME is not set to an absolute path",
                        path.display()
                    )
                }),
                Err(_) => Ok((key, path.as_path(), path.clone())),
            })
            .collect()
    }
}

fn paths(key: &str, value: &Value) -> Result<Vec<PathBuf>, String> {
    let Value::Array(items) = value else {
        return Err(format!("sandbox.{key}: expected a list of paths"));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item.as_str() {
            Some(text)
                if (text.starts_with('/') || text == "~" || text.starts_with("~/"))
                    && !text.contains('\0') =>
            {
                Ok(PathBuf::from(text))
            }
            Some(text) => Err(format!(
                "sandbox.{key}[{i}]: '{}' is neither absolute nor ~/…; write the full path",
                text.escape_debug()
            )),
            None => Err(format!("sandbox.{key}[{i}]: expected a path (a string)")),
        })
        .collect()
}

/// A user's name as the system's tools accept one (letters, digits, `_`, `-`, a trailing `$`;
/// not starting with a digit or `-`; at most 32 bytes), or `"dynamic"` or `"root"`.
fn user(value: &Value) -> Result<String, String> {
    let name = value.as_str().ok_or(
        "sandbox.user: expected a user's name (a string): \"dynamic\", \"root\" or a user",
    )?;
    let body = name.strip_suffix('$').unwrap_or(name);
    let valid = !body.is_empty()
        && name.len() <= 32
        && !body.starts_with(|c: char| c.is_ascii_digit() || c == '-')
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    match valid {
        true => Ok(name.to_string()),
        false => Err(format!(
            "sandbox.user: '{}' is not a user's name (letters, digits, _ and -, not starting \
             with a digit)",
            name.escape_debug()
        )),
    }
}

fn ports(value: &Value) -> Result<Vec<u16>, String> {
    let Value::Array(items) = value else {
        return Err("sandbox.connect: expected a list of TCP ports".into());
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            item.as_u64()
                .and_then(|n| u16::try_from(n).ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("sandbox.connect[{i}]: {item} is not a port (1 to 65535)"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_form_parses() {
        let parse = |v: Value| Sandbox::from_value(&v).unwrap();
        assert_eq!(parse(json!(true)), Sandbox::default());
        assert_eq!(parse(json!(false)).mode, Mode::Off);
        assert_eq!(parse(json!("required")).mode, Mode::Required);
        let table =
            parse(json!({"read": ["/srv/data", "~/models"], "write": ["~"], "connect": [443]}));
        assert_eq!(table.mode, Mode::On);
        assert_eq!(table.user, None);
        assert_eq!(
            parse(json!({"user": "nobody"})).user.as_deref(),
            Some("nobody")
        );
        assert_eq!(
            parse(json!({"user": "svc-a$"})).user.as_deref(),
            Some("svc-a$")
        );
        assert_eq!(table.connect, Some(vec![443]));
        let declared = table.declared(Some(Path::new("/home/u"))).unwrap();
        let resolved: Vec<_> = declared.iter().map(|(k, _, p)| (*k, p.as_path())).collect();
        assert_eq!(
            resolved,
            [
                ("sandbox.read", Path::new("/srv/data")),
                ("sandbox.read", Path::new("/home/u/models")),
                ("sandbox.write", Path::new("/home/u")),
            ]
        );
        assert_eq!(declared[1].1, Path::new("~/models"));
        assert!(table.declared(None).unwrap_err().contains("HOME"));
    }

    #[test]
    fn each_bad_form_is_refused_naming_the_key() {
        for (value, said) in [
            (json!("yes"), "sandbox: expected true"),
            (json!(1), "sandbox: expected"),
            (json!({"reed": []}), "sandbox.reed: unknown key"),
            (json!({"read": "/x"}), "sandbox.read: expected a list"),
            (
                json!({"write": ["data"]}),
                "sandbox.write[0]: 'data' is neither",
            ),
            (json!({"write": ["~root/x"]}), "sandbox.write[0]: '~root/x'"),
            (json!({"read": [1]}), "sandbox.read[0]: expected a path"),
            (
                json!({"connect": [0]}),
                "sandbox.connect[0]: 0 is not a port",
            ),
            (json!({"connect": [70000]}), "sandbox.connect[0]: 70000"),
            (json!({"connect": 443}), "sandbox.connect: expected a list"),
            (json!({"user": 0}), "sandbox.user: expected a user's name"),
            (json!({"user": ""}), "sandbox.user: '' is not"),
            (json!({"user": "1x"}), "sandbox.user: '1x' is not"),
            (json!({"user": "a/b"}), "sandbox.user: 'a/b' is not"),
            (json!({"user": "a\0"}), "sandbox.user: 'a\\0' is not"),
        ] {
            let err = Sandbox::from_value(&value).unwrap_err();
            assert!(err.starts_with(said), "{value}: {err}");
        }
    }
}
