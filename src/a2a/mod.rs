//! A2A, both generations, at one door: 0.3 and 1.0 differ in method names, shapes and error
//! forms, never in what a task is. Everything generation-specific lives here, so the session's
//! door and engine deal in one model.
//!
//! - [`version`]: the `A2A-Version` header and the [`version::Generation`] it picks.
//! - [`rpc`]: error codes; method names, ops and scopes re-exported from [`crate::methods`].
//! - [`quote`]: client text quoted back in a refusal.
//! - [`message`]: messages and parts, validated as read, rendered in either shape.
//! - [`params`]: each method's `params`, read and checked.
//! - [`push`]: push-notification configs, read and shown in either shape.
//! - [`stream`]: the events of a task's stream, in either generation's shape.
//! - [`task`]: task states and the task as either generation shows it.
//! - [`error`]: a JSON-RPC error in either generation's shape.
//! - [`card`]: the one agent card that serves both generations.
//! - [`rest`]: the HTTP+JSON binding's paths, and 0.3's proto JSON.

pub mod card;
pub mod error;
pub(crate) mod fields;
pub mod message;
pub mod params;
pub mod push;
pub mod quote;
pub mod rest;
pub mod rpc;
pub mod stream;
pub mod task;
pub mod version;
