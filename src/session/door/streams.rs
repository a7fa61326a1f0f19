//! Open streams per caller: no one caller holds the door's connections with streams.
//!
//! Why: a stream holds its connection (and a worker, while it waits) for as long as its task
//! runs or its reader stays; the door serves 1,024 connections. A caller — one credential, one
//! formation peer, or every unauthenticated client of a public door together — may hold at most
//! [`PER_CALLER`] streams, a quarter of them, so the rest stay for everyone else. The operator
//! is not bounded: it is whom the bound protects.
//!
//! Invariant: `open[key]` is the number of live [`Slot`]s for `key`; a key with none is removed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::super::auth::Caller;

/// Streams one caller may hold open at once.
pub const PER_CALLER: usize = 256;

/// The door's open streams, by caller.
#[derive(Debug, Default)]
pub struct Streams {
    open: Mutex<HashMap<String, usize>>,
}

/// One open stream, counted until dropped.
pub struct Slot {
    streams: Arc<Streams>,
    key: String,
}

impl Streams {
    /// A slot for one more stream of `caller`; `None` when it holds `PER_CALLER` already.
    /// The operator always gets one.
    pub fn take(self: &Arc<Self>, caller: &Caller) -> Option<Slot> {
        let key = match caller {
            Caller::Operator => return Some(self.slot(String::new())),
            Caller::Public => "public".to_string(),
            Caller::Credential { name, .. } => format!("credential {name}"),
            Caller::Member { from, .. } => format!("member {from}"),
        };
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let held = open.entry(key.clone()).or_default();
        if *held >= PER_CALLER {
            return None;
        }
        *held += 1;
        drop(open);
        Some(self.slot(key))
    }

    fn slot(self: &Arc<Self>, key: String) -> Slot {
        Slot {
            streams: self.clone(),
            key,
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.key.is_empty() {
            return;
        }
        let mut open = self.streams.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = open.get_mut(&self.key) {
            *held -= 1;
            if *held == 0 {
                open.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_holds_at_most_its_share_and_the_operator_is_never_refused() {
        let streams = Arc::new(Streams::default());
        let public: Vec<Slot> = (0..PER_CALLER)
            .map(|_| streams.take(&Caller::Public).expect("within the share"))
            .collect();
        assert!(streams.take(&Caller::Public).is_none(), "past the share");
        let peer = Caller::Member {
            from: "reviewer".into(),
            owner: "member reviewer".into(),
        };
        assert!(streams.take(&peer).is_some(), "another caller has its own");
        let operator: Vec<Slot> = (0..PER_CALLER + 1)
            .map(|_| streams.take(&Caller::Operator).expect("the operator"))
            .collect();
        drop(public);
        assert!(streams.take(&Caller::Public).is_some(), "given back");
        drop(operator);
        assert!(streams.open.lock().unwrap().is_empty());
    }
}
