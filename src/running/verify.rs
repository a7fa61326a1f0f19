//! Layers 1 to 3 of a record's check: its process (alive, started when recorded, one that could
//! be a session) and its door (answering as that session), for every record at once on one
//! event loop; and which door probes are still in flight, for `mur ps`'s notice.

use crate::door_client::{self, Probe};
use crate::json::record::RunningRecord;
use crate::net::multi;
use crate::process::{self, NotSignallable};

/// What all three layers say about a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// The recorded process holds the pid and its door answers as the recorded session.
    Live,
    /// The process is there (or could not be checked), but its door did not answer as the session.
    /// The record is kept; the string says why.
    Unreachable(String),
    /// The recorded process is gone; the record may be pruned.
    Gone(String),
}

/// Layers 1 and 2 alone: local and cheap, no network. `None` means the process is the recorded
/// one, one that could be a session, and only the door probe can say more. Whether mur may
/// signal it is not asked: pid 1 of a container, or the session whose handler runs this `mur`,
/// is a live session, though `mur stop` only asks it at its door.
pub fn process_liveness(record: &RunningRecord) -> Option<Liveness> {
    let identified = process::identify(record.pid, &record.process_start)
        .and_then(|()| process::could_be_a_session(record.pid).map_err(NotSignallable::Refused));
    match identified {
        Ok(()) => None,
        Err(NotSignallable::Gone(why)) => Some(Liveness::Gone(why)),
        Err(NotSignallable::Refused(why)) => Some(Liveness::Unreachable(why)),
    }
}

/// All three layers, door probe included (blocking, bounded by the probe's deadlines).
pub fn verify(record: &RunningRecord) -> Liveness {
    verify_all(&[record], &InFlight::default())
        .pop()
        .unwrap_or_else(|| Liveness::Unreachable("the probe could not run".into()))
}

/// [`verify`] for every record at once, answers in the same order.
///
/// Each record is a `Check` on one event loop ([`multi::run`]): layers 1 and 2 when its turn to
/// start comes, its door probe right after if they pass. Probes run all at once, as many as
/// descriptors allow, and the next records' local checks are made while the doors of the first
/// answer, so the whole takes about as long as the slowest probe rather than the sum of them.
/// `in_flight` holds, meanwhile, the probes not yet answered.
pub fn verify_all(records: &[&RunningRecord], in_flight: &InFlight) -> Vec<Liveness> {
    let mut checks: Vec<Check> = records.iter().map(|record| Check::new(record)).collect();
    multi::run(checks.len(), door_client::PROBE, |i, answer| {
        let next = checks[i].step(answer);
        let record = checks[i].record;
        in_flight.set(
            i,
            next.is_some().then(|| {
                format!(
                    "{} (pid {}) at {}",
                    record.session_id, record.pid, record.url
                )
            }),
        );
        next
    });
    checks.into_iter().map(Check::liveness).collect()
}

/// The door probes a sweep is waiting on, each as `ses_… (pid N) at HOST:PORT`: read from
/// another thread by a caller that says on a terminal what it waits for (`mur ps`), since a
/// door that never answers (a SIGSTOPped session) holds the listing for seconds.
#[derive(Default)]
pub struct InFlight(std::sync::Mutex<std::collections::BTreeMap<usize, String>>);

impl InFlight {
    fn set(&self, job: usize, probe: Option<String>) {
        let mut probes = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match probe {
            Some(probe) => probes.insert(job, probe),
            None => probes.remove(&job),
        };
    }

    /// The probes not yet answered, in record order.
    pub fn waiting(&self) -> Vec<String> {
        let probes = self.0.lock().unwrap_or_else(|p| p.into_inner());
        probes.values().cloned().collect()
    }
}

/// One record's three layers, as a conversation [`multi::run`] drives.
struct Check<'a> {
    record: &'a RunningRecord,
    /// What layers 1 and 2 settled, when they did.
    local: Option<Liveness>,
    probe: Probe<'a>,
}

impl<'a> Check<'a> {
    fn new(record: &'a RunningRecord) -> Self {
        Self {
            record,
            local: None,
            probe: Probe::new(&record.url, record.door_token.as_ref()),
        }
    }

    /// Layers 1 and 2 first (`answer` is `None` when the check starts); when they leave the
    /// question open, the probe's next exchange.
    fn step(&mut self, answer: Option<multi::Answer>) -> Option<multi::Exchange> {
        if answer.is_none() {
            self.local = process_liveness(self.record);
            if self.local.is_some() {
                return None;
            }
        }
        self.probe.step(answer)
    }

    /// The verdict: layers 1 and 2's, or layer 3's from what the door said.
    fn liveness(self) -> Liveness {
        if let Some(local) = self.local {
            return local;
        }
        match self.probe.said() {
            Ok(id) if id == self.record.session_id.as_str() => Liveness::Live,
            Ok(other) => Liveness::Unreachable(format!(
                "the door at {} answers for session {}",
                self.record.url,
                other.escape_debug()
            )),
            Err(why) => Liveness::Unreachable(why),
        }
    }
}
