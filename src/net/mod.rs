//! HTTP on std sockets: the door's server, and the blocking client the host tools use to reach a door.

pub mod client;
pub mod server;
