//! One row of `mur ps`: a running session or, with `-a`, an ended one, and what the table says
//! of it that is not simply a record's field.

use crate::address::Addressable;
use crate::json::ended::EndedRecord;
use crate::json::record::RunningRecord;
use crate::running::Kept;
use crate::running::ended::Ended;
use crate::time;

/// One row of the listing: a running session as the sweep found it, or (`-a`) an ended one.
pub(super) enum Row<'a> {
    Running(&'a Kept),
    Ended(&'a Ended),
}

impl Row<'_> {
    /// What `running` reads of a running session's record, or `ended` of an ended one's.
    pub(super) fn get<'r, T>(
        &'r self,
        running: impl FnOnce(&'r RunningRecord) -> T,
        ended: impl FnOnce(&'r EndedRecord) -> T,
    ) -> T {
        match self {
            Row::Running(k) => running(&k.entry.record),
            Row::Ended(e) => ended(&e.record),
        }
    }

    /// What addresses read of either kind: ids, names, capsule.
    pub(super) fn record(&self) -> &dyn Addressable {
        match self {
            Row::Running(k) => &k.entry.record,
            Row::Ended(e) => &e.record,
        }
    }

    pub(super) fn status(&self) -> &'static str {
        match self {
            Row::Running(k) if k.unreachable.is_some() => "unreachable",
            Row::Running(_) => "running",
            Row::Ended(e) => e.record.end.word(),
        }
    }

    /// Its instance name, else its member name.
    pub(super) fn name(&self) -> Option<&str> {
        self.record().name().or(self.record().member())
    }
}

/// How long a running session has run, or an ended one ran.
pub(super) fn uptime_secs(row: &Row, now: i64) -> Option<i64> {
    match row {
        Row::Running(k) => {
            time::parse_rfc3339(&k.entry.record.started_at).map(|start| (now - start).max(0))
        }
        Row::Ended(e) => e.record.duration_secs(),
    }
}

/// The STATUS cell: the state, and for an ended session its exit code and how long ago it
/// ended, as docker's `ps -a` says it.
pub(super) fn status_cell(row: &Row, now: i64) -> String {
    let Row::Ended(e) = row else {
        return row.status().to_string();
    };
    let ago = time::parse_rfc3339(&e.record.ended_at).map_or_else(String::new, |end| {
        format!(" {}", time::format_ago(now - end))
    });
    match e.record.exit_code {
        Some(code) => format!("{} ({code}){ago}", row.status()),
        None => format!("{}{ago}", row.status()),
    }
}

/// `prefix` and the first `digits` of `hex`: an id as the table shows it.
pub(super) fn short(prefix: &str, hex: &str, digits: usize) -> String {
    format!("{prefix}{}", &hex[..digits.min(hex.len())])
}

/// The fewest hex digits an id of the table is shown with: docker's 12.
pub(super) const SHORT_ID: usize = 12;
