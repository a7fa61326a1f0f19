//! `mur`: one small static binary that runs AI-agent capsules as local processes and manages them
//! safely. `main.rs` is the applet table and dispatch; everything else lives here.
//!
//! - [`applets`]: one file per applet (usage, options, main).
//! - [`session`]: one capsule session (`mur run`): its door and lifecycle.
//! - [`formation`]: admission, launch and teardown of a roster; the member channel.
//! - [`running`]: the machine-wide map of running sessions and its three-layer check.
//! - [`address`]: `@N`, full ids and suffixes on the command line.
//! - [`door_client`]: calling a door (card probe, JSON-RPC) from the host tools.
//! - [`a2a`]: the A2A protocol, both generations: methods, messages, tasks, errors, the card.
//! - [`json`]: wire types — the running record, the manifest, the roster, the member channel.
//! - [`methods`]: the door's methods of both generations and the scopes that grant them.
//! - [`net`]: HTTP on std sockets.
//! - [`sys`]: every libc call, behind safe functions.
//! - [`id`], [`secret`], [`time`], [`home`], [`cli`]: small shared pieces.

pub mod a2a;
pub mod address;
pub mod applets;
pub mod b64;
pub mod cli;
pub mod door_client;
pub mod formation;
pub mod home;
pub mod id;
pub mod json;
pub mod methods;
pub mod mounted;
pub mod net;
pub mod process;
pub mod running;
#[cfg(test)]
pub mod scratch;
pub mod secret;
pub mod session;
#[allow(unsafe_code)] // The one module that calls libc (see its doc).
pub mod sys;
pub mod time;
pub mod token;
