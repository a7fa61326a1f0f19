//! The support code every integration test shares, one module per concern. A test file takes it
//! with `#[allow(dead_code)] mod common;` and imports by name what it uses, e.g.
//! `use common::home::Home;`:
//!
//! - [`home`]: a throwaway `HOME` ([`home::Home`]) and the paths `mur` keeps under it; writing
//!   capsules and scripts.
//! - [`run`]: running the real `mur` binary under deadlines ([`run::run`], [`run::Output`]).
//! - [`session`]: a `mur run --json` session and its door ([`session::Session`]).
//! - [`formation`]: a `mur formation` test's home and project ([`formation::FormationFixture`])
//!   and its launcher.
//! - [`records`]: running records written the way `mur` writes them; reading `mur ps --json`.
//! - [`process`]: processes and `/proc` readers.
//! - [`http`]: a raw HTTP/1.1 client.
//! - [`door`]: a fake door (a tiny responder) and agent cards.
//! - [`tokens`]: finding tokens in bytes and in a process's memory.
//! - [`wait`]: polling until something holds.
//! - [`stress`]: the work scale and a small tmpfs.
//! - [`sse`]: reading a server-sent-events stream event by event.
//! - [`skip`]: how a test that cannot run here says so ([`skip::skipped`]).
//!
//! Everything here is scaffolding; the behaviour under test is always the `mur` binary's.
//!
//! Each tests/*.rs is its own crate and uses a subset of these helpers, so the helpers it does not
//! use would be dead code there: that is why each test file puts `#[allow(dead_code)]` on its
//! `mod common;` (and only that: an unused import is still a warning, and CI denies warnings).

pub mod door;
pub mod formation;
pub mod home;
pub mod http;
pub mod process;
pub mod records;
pub mod run;
pub mod session;
pub mod skip;
pub mod sse;
pub mod stress;
pub mod tokens;
pub mod wait;
