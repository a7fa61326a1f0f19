//! Formations: a roster of capsules launched as one all-or-nothing unit, every member tied to the
//! launcher by a lifeline so none outlives it.

pub mod admission;
pub mod dirs;
pub mod kube;
pub mod launch;
pub mod material;
pub mod members;
pub mod readiness;
