//! The support code every integration test shares, one module per concern. The test crate
//! (`tests/it/main.rs`) takes it once, `#[path = "../common/mod.rs"] mod common;`, and each
//! test module imports by name what it uses, e.g. `use crate::common::home::Home;`:
//!
//! - [`home`]: a throwaway `HOME` ([`home::Home`]) and the paths `mur` keeps under it; writing
//!   capsules and scripts.
//! - [`run`]: running the real `mur` binary under deadlines ([`run::run`], [`run::Output`]).
//! - [`session`]: a `mur run --json` session and its door ([`session::Session`]).
//! - [`formation`]: a `mur formation` test's home and project ([`formation::FormationFixture`])
//!   and its launcher.
//! - [`records`]: running records written the way `mur` writes them; reading `mur ps --json`.
//! - [`process`]: processes and `/proc` readers.
//! - [`alone`]: what a test may not share with the others in the one test process.
//! - [`gate`]: a file a handler waits for, opened when the test says.
//! - [`http`]: a raw HTTP/1.1 client.
//! - [`door`]: a fake door (a tiny responder) and agent cards.
//! - [`tokens`]: finding tokens in bytes and in a process's memory.
//! - [`wait`]: polling until something holds.
//! - [`stress`]: the work scale and a small tmpfs.
//! - [`sse`]: reading a server-sent-events stream event by event.
//! - [`skip`]: how a test that cannot run here says so ([`skip::skipped`]).
//!
//! Everything here is scaffolding; the behaviour under test is always the `mur` binary's.

pub mod alone;
pub mod door;
pub mod formation;
pub mod gate;
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
