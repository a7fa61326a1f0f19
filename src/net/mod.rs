//! HTTP on std sockets: the blocking client the host tools use to reach a door.

pub mod client;
