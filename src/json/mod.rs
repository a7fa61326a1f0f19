//! Wire types: what `mur` reads from and writes to files and sockets, with the rules for refusing
//! a malformed one. (A2A's own shapes live in [`crate::a2a`].)

pub mod channel;
pub mod manifest;
pub mod raw;
pub mod record;
pub mod roster;
pub mod sandbox;
pub mod shape;
pub mod strict;
