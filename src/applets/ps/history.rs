//! A named session's restarts as one history: every session that ran under one `--name` in this
//! home, the running one and the ended ones it keeps, listed together, newest first, each with
//! how many runs of the name came before it.
//!
//! Which run came first is read from the session ids, not from `started_at`: an id begins with
//! its creation time in milliseconds (`crate::id`), so two runs started within one second still
//! order, and an id is what a record cannot lose.

use std::collections::HashMap;

use super::row::Row;
use crate::address::Addressable;
use crate::running::ended::Ended;

/// How many earlier runs of its name each named row has: the ended runs this home keeps whose
/// ids are older. A row without an instance name has none to count (a formation member's
/// name is its roster's, not a run's).
pub(super) struct Restarts(HashMap<String, usize>);

impl Restarts {
    /// Count, for each of `rows`, the runs among `ended` (every ended session kept, whatever the
    /// listing shows) that ran under its name before it.
    pub(super) fn count(rows: &[Row], ended: &[Ended]) -> Self {
        let mut earlier: HashMap<&str, Vec<&str>> = HashMap::new();
        for e in ended {
            if let Some(name) = e.record.name() {
                earlier
                    .entry(name)
                    .or_default()
                    .push(e.record.session_id.hex());
            }
        }
        let counts = rows
            .iter()
            .filter_map(|row| {
                let record = row.record();
                let hex = record.session_id().hex();
                let runs = earlier.get(record.name()?)?;
                Some((
                    hex.to_string(),
                    runs.iter().filter(|run| **run < hex).count(),
                ))
            })
            .collect();
        Self(counts)
    }

    /// `row`'s count, `None` for a row without an instance name.
    pub(super) fn of(&self, row: &Row) -> Option<usize> {
        let record = row.record();
        record.name()?;
        Some(self.0.get(record.session_id().hex()).copied().unwrap_or(0))
    }

    /// Whether any row had a run of its name before it: the table then shows RESTARTS.
    pub(super) fn any(&self) -> bool {
        self.0.values().any(|&n| n > 0)
    }
}

/// `rows` with each name's runs together: where a name first appears (its running session, or
/// its most recently ended run), every later row of that name follows it in its order; rows
/// without a name stay where they are.
pub(super) fn grouped(rows: Vec<Row<'_>>) -> Vec<Row<'_>> {
    let mut out: Vec<Row> = Vec::with_capacity(rows.len());
    let mut rest: Vec<Option<Row>> = rows.into_iter().map(Some).collect();
    for i in 0..rest.len() {
        let Some(row) = rest[i].take() else {
            continue;
        };
        let name = row.record().name().map(str::to_string);
        out.push(row);
        let Some(name) = name else {
            continue;
        };
        for later in rest.iter_mut().skip(i + 1) {
            if later
                .as_ref()
                .is_some_and(|r| r.record().name() == Some(name.as_str()))
            {
                out.extend(later.take());
            }
        }
    }
    out
}
