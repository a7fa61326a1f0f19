//! Wire types: what `mur` reads from and writes to files and sockets, with the rules for refusing
//! a malformed one.

pub mod card;
pub mod contract;
pub mod manifest;
pub mod record;
pub mod roster;
pub mod rpc;
pub mod strict;
