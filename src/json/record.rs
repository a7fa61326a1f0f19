//! The running record: `~/.murmur/running/<session_id>.json`, one per live session.
//!
//! Nine keys are required; `door_token`, `credentials`, `formation_id`, `formation_lifeline`,
//! `formation_launcher`, `spawned_by`, `records_dir`, `sandbox` and `handler_user` are written only when they apply, so a
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
    /// Whom the session's handlers run as when not as mur (mur runs as root): `dynamic uid
    /// 61234` or a user's name ([`crate::session`]'s identity), for `mur ps -v`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler_user: Option<String>,
    /// Lines the session dropped because its stderr was not read ([`crate::cli::warn`]), for
    /// `mur ps -v`; the record is written again when the count changes. Absent while none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub log_lines_dropped: u64,
    /// The instance name `mur run --name` gave it: unique among the running sessions of its
    /// home while it runs (`running::names` holds the claim), an address everywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its member name in its formation (`FORMATION/member`, or `member` where one running
    /// session has it): unique within the formation only, so not an instance name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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
        super::file_bytes(self)
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
mod tests;
