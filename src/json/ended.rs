//! The ended record: `~/.murmur/ended/<session_id>.json`, what is kept of a session once it has
//! ended — which capsule it ran, under which names, when, and how it ended — beside its log, for
//! `mur ps -a`, `mur logs` and `mur rm`.
//!
//! Built from the running record field by field ([`EndedRecord::of`]), never by copying it:
//! the running record holds the door's tokens, and an ended record must hold none (nothing is
//! left to drive, and it outlives the session).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::id::{FormationId, SessionId};
use crate::json::record::RunningRecord;

/// How a session ended, as far as anyone could tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum End {
    /// It ended itself and recorded its exit code.
    Exited,
    /// `mur stop` had to SIGKILL it: it wrote no word of its own.
    Killed,
    /// Found gone by a later `mur ps` or `mur stop` (SIGKILLed, or crashed): how is unknown.
    Gone,
}

impl End {
    /// The word for it, as `mur ps` shows it in STATUS and the record spells it.
    pub fn word(self) -> &'static str {
        match self {
            End::Exited => "exited",
            End::Killed => "killed",
            End::Gone => "gone",
        }
    }
}

/// What is kept of one ended session. Never a token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndedRecord {
    pub session_id: SessionId,
    pub capsule_name: String,
    pub capsule_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formation_id: Option<FormationId>,
    pub workdir: PathBuf,
    /// RFC 3339, UTC, as the running record said.
    pub started_at: String,
    /// RFC 3339, UTC: when it ended, or, for [`End::Gone`], when it was found gone.
    pub ended_at: String,
    pub end: End,
    /// The session's exit code, for [`End::Exited`] only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

impl EndedRecord {
    /// What to keep of `running`, ended now as `end` says (with `exit_code` when it exited).
    pub fn of(running: &RunningRecord, end: End, exit_code: Option<i32>) -> Self {
        Self {
            session_id: running.session_id.clone(),
            capsule_name: running.capsule_name.clone(),
            capsule_version: running.capsule_version.clone(),
            name: running.name.clone(),
            member: running.member.clone(),
            formation_id: running.formation_id.clone(),
            workdir: running.workdir.clone(),
            started_at: running.started_at.clone(),
            ended_at: crate::time::format_rfc3339(crate::time::unix_now()),
            end,
            exit_code: exit_code.filter(|_| end == End::Exited),
        }
    }

    /// Parse one ended record file's bytes; the `Err` says what was wrong with it.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(bytes).map_err(|err| format!("not an ended record: {err}"))
    }

    /// The bytes written to the file.
    pub fn to_bytes(&self) -> Vec<u8> {
        super::file_bytes(self)
    }

    /// Seconds from start to end, when both times read.
    pub fn duration_secs(&self) -> Option<i64> {
        let start = crate::time::parse_rfc3339(&self.started_at)?;
        let end = crate::time::parse_rfc3339(&self.ended_at)?;
        Some((end - start).max(0))
    }

    /// `name@version`.
    pub fn capsule(&self) -> String {
        format!("{}@{}", self.capsule_name, self.capsule_version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_record_holds_no_token_and_reads_back() {
        let mut running = RunningRecord::from_slice(
            br#"{"session_id":"ses_0199c4e2f1b7712a9d3e4f5061728394","url":"127.0.0.1:1",
            "pid":1,"process_start":"42","capsule_name":"demo","capsule_version":"1",
            "workdir":"/tmp","outlives_launcher":false,"started_at":"2026-01-01T00:00:00Z",
            "door_token":"mdt1.secret","credentials":{"c":"mdt1.other"}}"#,
        )
        .unwrap();
        running.name = Some("h2".into());
        let ended = EndedRecord::of(&running, End::Gone, Some(3));
        let text = String::from_utf8(ended.to_bytes()).unwrap();
        assert!(!text.contains("mdt1"), "{text}");
        assert_eq!(ended.exit_code, None, "only an exit has a code");
        assert_eq!(EndedRecord::from_slice(text.as_bytes()).unwrap(), ended);
        assert_eq!(ended.name.as_deref(), Some("h2"));
    }
}
