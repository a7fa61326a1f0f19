//! The manifest's rules that serde cannot express, one function per section, each noting every
//! problem it finds under its key path (DESIGN.md §2: a typo is an error before anything starts).
//!
//! A new section is a field of [`Manifest`], a [`Field`](crate::json::shape::Field) in
//! [`SHAPE`](super::SHAPE), and a function here called from [`Manifest::rules`].

use std::collections::BTreeSet;

use super::{Acceptance, Control, Lifecycle, Manifest, Network, is_valid_name};
use crate::json::shape::Problems;
use crate::methods;

impl Manifest {
    /// Note every rule this manifest breaks. A value the shape check removed reads as its
    /// default here, and [`Problems::rule`] drops what that default would be blamed for.
    pub fn rules(&self, problems: &mut Problems) {
        self.identity(problems);
        lifecycle(&self.lifecycle, problems);
        network(&self.network, problems);
        if let Some(control) = &self.control {
            self.control_names(control, problems);
        }
    }

    /// Every rule, as one `Err` listing each problem (see [`Problems::into_result`]).
    pub fn check(&self) -> Result<(), String> {
        let mut problems = Problems::default();
        self.rules(&mut problems);
        problems.into_result()
    }

    /// `name`, `version`, `run`.
    fn identity(&self, problems: &mut Problems) {
        if !is_valid_name(&self.name) {
            problems.rule(
                "name",
                format!(
                    "'{}' is not a capsule name (a lowercase letter, then up to 31 of a-z, 0-9, -)",
                    self.name.escape_debug()
                ),
            );
        }
        if self.version.is_empty()
            || self.version.len() > 64
            || self.version.chars().any(char::is_control)
        {
            problems.rule("version", "must be 1 to 64 printable characters");
        }
        if self.run.is_empty() || self.run[0].is_empty() {
            problems.rule(
                "run",
                "must name the handler command, e.g. [\"./handler.sh\"]",
            );
        }
        if self.run.iter().any(|arg| arg.contains('\0')) {
            problems.rule("run", "an argument holds a NUL byte");
        }
    }

    /// `control.settings` and `control.secrets`: names that become environment variables, each
    /// declared once across both lists.
    fn control_names(&self, control: &Control, problems: &mut Problems) {
        let mut seen = BTreeSet::new();
        for (key, names) in [
            ("control.settings", &control.settings),
            ("control.secrets", &control.secrets),
        ] {
            for name in names {
                if !is_valid_env_name(name) {
                    problems.rule(
                        key,
                        format!(
                            "'{}' is not a control name (A-Z, 0-9 and _, not starting with a digit; it becomes an environment variable)",
                            name.escape_debug()
                        ),
                    );
                } else if crate::json::channel::env::RESERVED_PREFIXES
                    .iter()
                    .any(|prefix| name.starts_with(prefix))
                {
                    problems.rule(
                        key,
                        format!("'{name}': names starting MUR_ or MURMUR_ are mur's own"),
                    );
                } else if !seen.insert(name) {
                    problems.rule(key, format!("'{name}' is declared twice"));
                }
            }
        }
    }
}

/// `lifecycle`: each bound in range; a retry only where tasks are taken.
fn lifecycle(lifecycle: &Lifecycle, problems: &mut Problems) {
    if lifecycle.retry_interrupted && lifecycle.task_acceptance == Acceptance::None {
        problems.rule(
            "lifecycle.retry_interrupted",
            "a capsule that takes no tasks (task_acceptance: none) has none to retry",
        );
    }
    let week = 7 * 86_400;
    let bounds: [(&str, u64, u64, u64); 5] = [
        ("concurrency", lifecycle.concurrency.into(), 1, 1024),
        ("queue_depth", lifecycle.queue_depth.into(), 0, 65_536),
        ("task_timeout_secs", lifecycle.task_timeout_secs, 1, week),
        ("input_timeout_secs", lifecycle.input_timeout_secs, 1, week),
        ("memory_budget_mib", lifecycle.memory_budget_mib, 16, 65_536),
    ];
    for (key, value, low, high) in bounds {
        if !(low..=high).contains(&value) {
            problems.rule(
                &format!("lifecycle.{key}"),
                format!("must be {low} to {high}, not {value}"),
            );
        }
    }
}

/// `network`: credentials, CORS origins, the advertised URL, the push allow-list.
fn network(network: &Network, problems: &mut Problems) {
    if let Some(auth) = &network.authentication {
        let key = "network.authentication.credentials";
        let mut seen = BTreeSet::new();
        for credential in &auth.credentials {
            let name = &credential.name;
            if name == "operator" {
                problems.rule(key, "'operator' is reserved for the operator token");
            } else if !is_valid_name(name) {
                problems.rule(
                    key,
                    format!(
                        "'{}' is not a credential name (a lowercase letter, then up to 31 of a-z, 0-9, -)",
                        name.escape_debug()
                    ),
                );
            } else if !seen.insert(name) {
                problems.rule(key, format!("'{name}' is declared twice"));
            }
            if let Some(bad) = credential.scopes.iter().find(|s| !methods::is_scope(s)) {
                problems.rule(
                    key,
                    format!(
                        "'{}' has scope '{}', which is not a door method (allowed: {})",
                        name.escape_debug(),
                        bad.escape_debug(),
                        methods::scope_names().join(", ")
                    ),
                );
            }
        }
    }
    cors(&network.cors, problems);
    if let Some(url) = &network.advertise_url
        && let Err(why) = super::check_advertise_url(url)
    {
        problems.rule("network.advertise_url", why);
    }
    push_allow(&network.push.allow, problems);
}

/// `network.push.allow`: each entry a host as a webhook URL names it — an IP address or a name,
/// no scheme, port or wildcard — listed once. The door compares a URL's host with these (case
/// aside), so anything else could never match and is refused rather than opening nothing.
fn push_allow(hosts: &[String], problems: &mut Problems) {
    let mut seen = BTreeSet::new();
    for (i, host) in hosts.iter().enumerate() {
        let key = format!("network.push.allow[{i}]");
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if let Err(why) = crate::net::webhook::check_host(bare) {
            problems.rule(
                &key,
                format!("{why} (a host alone, e.g. hooks.example.com or 127.0.0.1)"),
            );
        } else if !seen.insert(bare.to_ascii_lowercase()) {
            problems.rule(&key, format!("'{bare}' is listed twice"));
        }
    }
}

/// `network.cors`: each entry an origin as a browser sends it in `Origin` — `http` or `https`,
/// `://`, a host, an optional port, nothing after — listed once. The door compares origins byte
/// for byte, so anything else (a path, a trailing slash, a wildcard) could never match and is
/// refused here rather than silently allowing nothing.
fn cors(origins: &[String], problems: &mut Problems) {
    let mut seen = BTreeSet::new();
    for (i, origin) in origins.iter().enumerate() {
        let key = format!("network.cors[{i}]");
        if !is_origin(origin) {
            problems.rule(
                &key,
                format!(
                    "'{}' is not an origin (http:// or https://, a lowercase host, an optional :port, nothing after; e.g. https://app.example.com)",
                    origin.escape_debug()
                ),
            );
        } else if !seen.insert(origin) {
            problems.rule(&key, format!("'{origin}' is listed twice"));
        }
    }
}

/// A serialized origin: `http://` or `https://`, then a host of lowercase letters, digits, `-`
/// and `.` (or a bracketed IPv6 address), then an optional `:port` of 1 to 5 digits.
pub(super) fn is_origin(text: &str) -> bool {
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
