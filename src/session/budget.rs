//! One memory budget for the session, over everything in flight (DESIGN §5): request bodies
//! being read and parsed, live tasks (queued, running, parked waiting for input) with their
//! histories, answers and message files, stream events, and the finished tasks kept for reads.
//!
//! It is a counter, not an allocator: each holder takes a [`Charge`] for what it holds and gives
//! it back when dropped. A *demand* — a request to read, a message to take — asks first
//! ([`Charge::grow`]) and is refused when the budget has no room, so the newest demand is the one
//! turned away, with a clear error; nothing already taken is ever cut for memory. What a task
//! already taken goes on to produce (its answer, bounded by the handler's 4 MiB) is counted
//! without asking ([`Charge::force`]): refusing it would fail a task a client waits on. The
//! finished tasks give way first: a demand that does not fit evicts the oldest of them — but only
//! when that makes it fit, so a demand refused anyway takes nothing from anyone
//! ([`super::store::Store::make_room`], [`super::tasks::Engine::reserve`]).
//!
//! Requests without a valid token at an authenticated door draw on a share of their own, an
//! eighth ([`Budget::guests`], taken by the door), which never evicts: however many
//! such requests arrive, the operator keeps the rest.
//!
//! Stream readers' copies of the events they write draw on a *share* of the budget
//! ([`Budget::share`]): a smaller budget of its own, every byte of it also counted in the
//! session's. However many readers there are and however slowly they read, they hold at most the
//! share, and the rest stays for requests, tasks and reads — a reader never squeezes out a
//! finished task someone is about to read.
//!
//! Invariant: `used` is the sum of every live charge's bytes (a share's charges counted in the
//! share and in its parent alike); a demand is granted only while `used + demand <= limit` in the
//! budget and every budget above it (forced counts may pass the limit; demands then wait for room).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The session's budget.
#[derive(Debug)]
pub struct Budget {
    limit: usize,
    used: AtomicUsize,
    /// The budget this one is a share of: every byte counted here is counted there too.
    parent: Option<Arc<Budget>>,
}

impl Budget {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit,
            used: AtomicUsize::new(0),
            parent: None,
        })
    }

    /// A share of `parent` holding at most `limit` (and never more than `parent` has room for).
    pub fn share(parent: &Arc<Budget>, limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit,
            used: AtomicUsize::new(0),
            parent: Some(parent.clone()),
        })
    }

    /// The share requests without a valid token draw on: [`GUEST_SHARE`] of `parent`.
    pub fn guests(parent: &Arc<Budget>) -> Arc<Self> {
        Self::share(parent, parent.limit / GUEST_SHARE)
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Room for `bytes` more, as a demand would be granted.
    pub fn fits(&self, bytes: usize) -> bool {
        self.fits_if_freed(bytes, 0)
    }

    /// Room for `bytes` more once `freed` bytes counted now are given back: whether giving them
    /// back is worth it at all.
    pub fn fits_if_freed(&self, bytes: usize, freed: usize) -> bool {
        self.used().saturating_sub(freed).saturating_add(bytes) <= self.limit
    }

    /// Take `bytes` here and in every budget above, or nowhere.
    fn try_take(&self, bytes: usize) -> bool {
        let here = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&now| now <= self.limit)
            })
            .is_ok();
        if !here {
            return false;
        }
        let above = self.parent.as_ref().is_none_or(|p| p.try_take(bytes));
        if !above {
            self.used.fetch_sub(bytes, Ordering::AcqRel);
        }
        above
    }

    fn take(&self, bytes: usize) {
        self.used.fetch_add(bytes, Ordering::AcqRel);
        if let Some(parent) = &self.parent {
            parent.take(bytes);
        }
    }

    fn give(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
        if let Some(parent) = &self.parent {
            parent.give(bytes);
        }
    }
}

/// The part of the session's budget requests without a valid token may hold, as a divisor: an
/// eighth. At the default budget (128 MiB) that is 16 MiB, what the door's 1,024 connections
/// would hold each with a token-free request's bookkeeping (16 KiB) in flight, so the share
/// refuses none the server itself would take; at a smaller budget it is the share that bounds
/// them — and seven eighths always stay for the operator, its tasks and its readers.
pub const GUEST_SHARE: usize = 8;

/// What one holder has counted against the budget; given back when dropped.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<Budget>,
    bytes: AtomicUsize,
}

impl Charge {
    /// A charge of nothing yet.
    pub fn new(budget: &Arc<Budget>) -> Self {
        Self {
            budget: budget.clone(),
            bytes: AtomicUsize::new(0),
        }
    }

    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Acquire)
    }

    /// The budget it counts in.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// Ask for `bytes` more: granted only if the budget has room.
    pub fn grow(&self, bytes: usize) -> bool {
        let granted = self.budget.try_take(bytes);
        if granted {
            self.bytes.fetch_add(bytes, Ordering::AcqRel);
        }
        granted
    }

    /// Count `bytes` more without asking: what something already taken produces.
    pub fn force(&self, bytes: usize) {
        self.budget.take(bytes);
        self.bytes.fetch_add(bytes, Ordering::AcqRel);
    }

    /// Count exactly `bytes`, up or down, without asking.
    pub fn set(&self, bytes: usize) {
        let was = self.bytes.swap(bytes, Ordering::AcqRel);
        if bytes > was {
            self.budget.take(bytes - was);
        } else {
            self.budget.give(was - bytes);
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.give(*self.bytes.get_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demands_are_granted_within_the_limit_and_charges_give_back() {
        let budget = Budget::new(100);
        let a = Charge::new(&budget);
        assert!(a.grow(60));
        let b = Charge::new(&budget);
        assert!(!b.grow(50), "the newest demand is refused");
        assert!(b.grow(40));
        b.force(30);
        assert_eq!(
            budget.used(),
            130,
            "what is produced is counted past the limit"
        );
        assert!(!a.grow(1));
        drop(b);
        assert_eq!(budget.used(), 60);
        a.set(10);
        assert_eq!(budget.used(), 10);
        drop(a);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn a_share_holds_at_most_its_limit_and_counts_in_its_parent() {
        let budget = Budget::new(100);
        let share = Budget::share(&budget, 30);
        let reader = Charge::new(&share);
        assert!(reader.grow(20));
        assert_eq!(budget.used(), 20, "a share's bytes count in the parent");
        assert!(!reader.grow(20), "past the share's own limit");
        assert_eq!(
            (share.used(), budget.used()),
            (20, 20),
            "a refusal takes nothing"
        );
        let other = Charge::new(&budget);
        assert!(other.grow(75));
        assert!(!reader.grow(10), "within the share, but the parent is full");
        assert_eq!((share.used(), budget.used()), (20, 95));
        drop(reader);
        assert_eq!((share.used(), budget.used()), (0, 75));
    }
}
