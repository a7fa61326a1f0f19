//! The support code every integration test shares: a throwaway `HOME`, running the real `mur`
//! binary under deadlines, polling, processes and `/proc` readers, a raw HTTP/1.1 client, a fake
//! door, records written the way `mur` writes them, `mur run` sessions and `mur formation`
//! launchers.
//!
//! Everything here is scaffolding; the behaviour under test is always the `mur` binary's.

// Shared by many test crates (each tests/*.rs is its own crate), each using a subset.
#![allow(dead_code, unused_imports)]

mod door;
mod formation;
mod home;
mod http;
mod process;
mod records;
mod run;
mod session;
mod stress;
mod tokens;
mod wait;

pub use door::*;
pub use formation::*;
pub use home::*;
pub use http::*;
pub use process::*;
pub use records::*;
pub use run::*;
pub use session::*;
pub use stress::*;
pub use tokens::*;
pub use wait::*;
