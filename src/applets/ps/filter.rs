//! `mur ps --filter KEY=VALUE` (and `--capsule`, `--formation`, `--status`, which are filters
//! by other names): which sessions a listing shows, docker's rule.

use super::row::Row;
use crate::cli::{self, Failure};

/// The `--filter` keys, docker's where one fits, each as the option it stands for when there
/// is one: `--capsule X` is `--filter capsule=X`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FilterKey {
    /// An instance's `--name` or a member's name (docker's `name`), or a capsule's as `Capsule`.
    Name,
    /// A capsule's `NAME` or `NAME@VERSION`.
    Capsule,
    /// A session id, whole or by 4+ of its first or last characters (docker's `id`).
    Id,
    Formation,
    Status,
}

const FILTER_KEYS: &[(&str, FilterKey)] = &[
    ("name", FilterKey::Name),
    ("capsule", FilterKey::Capsule),
    ("id", FilterKey::Id),
    ("formation", FilterKey::Formation),
    ("status", FilterKey::Status),
];

/// What completion offers for `--filter`: each key with its `=`.
pub(super) const FILTER_PREFIXES: [&str; 5] = ["name=", "capsule=", "id=", "formation=", "status="];

/// Which sessions are shown: docker's rule, each key's values or-ed (`--filter status=running
/// --filter status=unreachable` is both), different keys and-ed.
#[derive(Default)]
pub(super) struct Filters {
    given: Vec<(FilterKey, String)>,
}

impl Filters {
    pub(super) fn any(&self) -> bool {
        !self.given.is_empty()
    }

    /// Add `key=value`, checked so that a value that can match nothing is a usage error (named
    /// as the user wrote it, `option`), not an empty listing.
    pub(super) fn add(
        &mut self,
        option: &str,
        key: FilterKey,
        value: String,
    ) -> Result<(), Failure> {
        let value = match key {
            FilterKey::Name | FilterKey::Capsule => value,
            FilterKey::Id | FilterKey::Formation => {
                if value.len() < crate::address::MIN_SUFFIX {
                    let what = if key == FilterKey::Id { "ses_" } else { "frm_" };
                    return Err(Failure::Usage(format!(
                        "{option} wants a {what} id or at least {} of its characters, not '{value}'",
                        crate::address::MIN_SUFFIX
                    )));
                }
                value.to_ascii_lowercase()
            }
            FilterKey::Status => {
                if !STATUSES.contains(&value.as_str()) {
                    return Err(Failure::Usage(format!(
                        "{option} wants one of {}, not '{value}'",
                        STATUSES.join(", ")
                    )));
                }
                value
            }
        };
        self.given.push((key, value));
        Ok(())
    }

    /// `--filter KEY=VALUE`.
    pub(super) fn add_filter(&mut self, text: String) -> Result<(), Failure> {
        let known = || {
            FILTER_KEYS
                .iter()
                .map(|(k, _)| *k)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let Some((name, value)) = text.split_once('=') else {
            return Err(Failure::Usage(format!(
                "--filter wants KEY=VALUE (keys: {}), not '{text}'",
                known()
            )));
        };
        let Some((_, key)) = FILTER_KEYS.iter().find(|(k, _)| *k == name) else {
            return Err(Failure::Usage(format!(
                "--filter: unknown key '{name}' (the keys: {}){}",
                known(),
                cli::spec::did_you_mean(name, FILTER_KEYS.iter().map(|(k, _)| *k))
            )));
        };
        self.add(&format!("--filter {name}="), *key, value.to_string())
    }

    /// Whether a filter asks for a state only an ended session is in: `-a` is implied, as
    /// docker's `--filter status=exited` lists stopped containers without it.
    pub(super) fn wants_ended(&self) -> bool {
        self.given.iter().any(|(key, value)| {
            *key == FilterKey::Status && !matches!(value.as_str(), "running" | "unreachable")
        })
    }

    pub(super) fn keep(&self, row: &Row) -> bool {
        let matches = |key: FilterKey, value: &str| {
            let r = row.record();
            let capsule = value == r.capsule_name() || value == r.capsule();
            match key {
                FilterKey::Name => row.name() == Some(value) || capsule,
                FilterKey::Capsule => capsule,
                FilterKey::Id => {
                    let id = r.session_id().as_str().to_ascii_lowercase();
                    id.starts_with(value) || id.ends_with(value)
                }
                FilterKey::Formation => r
                    .formation_id()
                    .is_some_and(|id| id.as_str().ends_with(value)),
                FilterKey::Status => value == row.status(),
            }
        };
        self.given.iter().all(|(key, _)| {
            self.given
                .iter()
                .filter(|(other, _)| other == key)
                .any(|(_, value)| matches(*key, value))
        })
    }
}

/// Every STATUS a session may show: running ones', then ended ones' (`-a`).
pub(super) const STATUSES: &[&str] = &["running", "unreachable", "exited", "killed", "gone"];
