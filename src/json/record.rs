//! The running record: `~/.murmur/running/<session_id>.json`, one per live session.
//!
//! Nine keys are required; `door_token`, `credentials`, `formation_id`, `formation_lifeline`,
//! `formation_launcher`, `spawned_by`, `records_dir` and `sandbox` are written only when they apply, so a
//! standalone session's record carries the nine alone plus `records_dir`. Unknown keys are
//! ignored (a newer runtime may add some); a missing required key, or an id field that is not an
//! id, makes the record unreadable — and an unreadable record is pruned, which is the whole of
//! the compatibility story, because a record is a hint and names nothing that could be checked.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::id::{FormationId, SessionId};
use crate::secret::Secret;

/// The largest record file any reader accepts. A real record is well under 4 KiB.
pub const MAX_RECORD_BYTES: u64 = 1 << 20;

/// Where one running session's door is, and which process holds it.
///
/// `Debug` prints every token as `Secret(<redacted>)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningRecord {
    /// The session the door answers for; layer 3 compares it with the agent card.
    pub session_id: SessionId,
    /// `host:port` of the A2A door.
    pub url: String,
    /// The process holding the door.
    pub pid: u32,
    /// That process's start time, as [`crate::sys::proc::process_start_token`] reads it.
    pub process_start: String,
    pub capsule_name: String,
    pub capsule_version: String,
    /// The session's working directory.
    pub workdir: PathBuf,
    /// `true` when the launching process had no controlling terminal, so the session survives the
    /// window that started it.
    pub outlives_launcher: bool,
    /// RFC 3339, UTC.
    pub started_at: String,
    /// The operator token of an authenticated door: how the host tools call it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub door_token: Option<Secret>,
    /// One token per credential the manifest declares, by name; never the operator's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub credentials: BTreeMap<String, Secret>,
    /// The formation this session is a member of. Groups records; grants nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formation_id: Option<FormationId>,
    /// The session holds a formation lifeline: its launcher ends it by closing it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub formation_lifeline: bool,
    /// The launcher that started this member, as it named itself on the member's channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formation_launcher: Option<ProcessIdentity>,
    /// The session that delegated to this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawned_by: Option<SessionId>,
    /// The session's records directory (its task logs). Newer original runtimes require it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_dir: Option<PathBuf>,
    /// Why the session's handlers run outside a sandbox (`"sandbox": false`, or no Landlock in
    /// the kernel), for `mur ps -v`; absent when they run in one (or there is no handler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
}

/// A process named so that a recycled pid is never mistaken for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessIdentity {
    pub pid: u32,
    pub process_start: String,
}

impl ProcessIdentity {
    /// The calling process; `None` when its own start time cannot be read, because an identity
    /// without one names nothing anyone could verify.
    pub fn of_this_process() -> Option<Self> {
        let pid = std::process::id();
        Some(Self {
            pid,
            process_start: crate::sys::proc::process_start_token(pid)?,
        })
    }
}

impl RunningRecord {
    /// Parse one record file's bytes; the `Err` says what was wrong with it.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(bytes).map_err(|err| format!("not a running record: {err}"))
    }

    /// The bytes written to the record file.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut body = serde_json::to_vec_pretty(self).expect("a record always serializes");
        body.push(b'\n');
        body
    }

    pub fn identity(&self) -> ProcessIdentity {
        ProcessIdentity {
            pid: self.pid,
            process_start: self.process_start.clone(),
        }
    }

    /// `name@version`.
    pub fn capsule(&self) -> String {
        format!("{}@{}", self.capsule_name, self.capsule_version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn record() -> RunningRecord {
        RunningRecord {
            session_id: SessionId::parse("ses_0199c4e2f1b7712a9d3e4f5061728394").unwrap(),
            url: "127.0.0.1:1".into(),
            pid: 1,
            process_start: "42".into(),
            capsule_name: "demo".into(),
            capsule_version: "0.1.0".into(),
            workdir: "/tmp/demo".into(),
            outlives_launcher: true,
            started_at: "2026-01-01T00:00:00Z".into(),
            door_token: None,
            credentials: BTreeMap::new(),
            formation_id: None,
            formation_lifeline: false,
            formation_launcher: None,
            spawned_by: None,
            records_dir: None,
            sandbox: None,
        }
    }

    fn keys(value: &Value) -> Vec<&str> {
        let mut keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        keys
    }

    #[test]
    fn a_plain_record_has_exactly_the_nine_keys() {
        let value = serde_json::to_value(record()).unwrap();
        assert_eq!(
            keys(&value),
            [
                "capsule_name",
                "capsule_version",
                "outlives_launcher",
                "pid",
                "process_start",
                "session_id",
                "started_at",
                "url",
                "workdir"
            ]
        );
    }

    #[test]
    fn every_optional_key_round_trips_and_is_written_only_when_set() {
        let mut full = record();
        full.door_token = Some(Secret::new("mdt1.operatorsecret.mac".into()));
        full.credentials
            .insert("reader".into(), Secret::new("mdt1.readersecret.mac".into()));
        full.formation_id =
            Some(FormationId::parse("frm_0199c4e2f1b7712a9d3e4f5061728390").unwrap());
        full.formation_lifeline = true;
        full.formation_launcher = Some(ProcessIdentity {
            pid: 4242,
            process_start: "987654".into(),
        });
        full.spawned_by = Some(SessionId::parse("ses_0199c4e2f1b7712a9d3e4f5061728390").unwrap());
        full.records_dir = Some("/tmp/records".into());
        let value = serde_json::to_value(&full).unwrap();
        assert_eq!(value.as_object().unwrap().len(), 16);
        assert_eq!(
            value["credentials"],
            json!({"reader": "mdt1.readersecret.mac"})
        );
        assert_eq!(
            value["formation_launcher"],
            json!({"pid": 4242, "process_start": "987654"})
        );
        assert_eq!(RunningRecord::from_slice(&full.to_bytes()).unwrap(), full);
    }

    #[test]
    fn debug_prints_no_token() {
        let mut with_tokens = record();
        with_tokens.door_token = Some(Secret::new("mdt1.operatorsecret.mac".into()));
        with_tokens.credentials.insert(
            "watcher".into(),
            Secret::new("mdt1.watchersecret.mac".into()),
        );
        let debug = format!("{with_tokens:?}");
        assert!(!debug.contains("secret.mac"), "{debug}");
        assert!(debug.contains("\"watcher\": Secret(<redacted>)"), "{debug}");
    }

    #[test]
    fn a_missing_required_key_makes_the_record_unreadable() {
        for key in [
            "session_id",
            "url",
            "pid",
            "process_start",
            "capsule_name",
            "capsule_version",
            "workdir",
            "outlives_launcher",
            "started_at",
        ] {
            let mut value = serde_json::to_value(record()).unwrap();
            value.as_object_mut().unwrap().remove(key);
            let bytes = serde_json::to_vec(&value).unwrap();
            assert!(RunningRecord::from_slice(&bytes).is_err(), "{key}");
        }
    }

    #[test]
    fn unknown_keys_are_ignored() {
        let mut value = serde_json::to_value(record()).unwrap();
        value["added_by_a_newer_runtime"] = json!({"x": 1});
        let bytes = serde_json::to_vec(&value).unwrap();
        assert_eq!(RunningRecord::from_slice(&bytes).unwrap(), record());
    }

    #[test]
    fn malformed_ids_and_launchers_make_the_record_unreadable() {
        let cases = [
            ("session_id", json!("ses_nothex")),
            ("formation_id", json!("frm_ABC")),
            ("spawned_by", json!(17)),
            ("formation_launcher", json!(4242)),
            ("formation_launcher", json!({"pid": 4242})),
            ("formation_launcher", json!({"process_start": "1"})),
            (
                "formation_launcher",
                json!({"pid": -1, "process_start": "1"}),
            ),
            (
                "formation_launcher",
                json!({"pid": "4242", "process_start": "1"}),
            ),
            ("pid", json!(-5)),
            ("pid", json!(1u64 << 33)),
        ];
        for (key, bad) in cases {
            let mut value = serde_json::to_value(record()).unwrap();
            value[key] = bad.clone();
            let bytes = serde_json::to_vec(&value).unwrap();
            assert!(RunningRecord::from_slice(&bytes).is_err(), "{key}: {bad}");
        }
    }
}
