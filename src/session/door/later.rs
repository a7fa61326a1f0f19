//! Answers that wait: a blocking `message/send`, a cancel of a running task, `murmur.StopSession`
//! — each a poll of what it waits for, with the connection's waker registered there, never a
//! thread parked on it ([`crate::net::server::Deferred`]).

use std::task::{Poll, Waker};

use serde_json::{Value, json};

use crate::a2a::error::RpcError;
use crate::a2a::version::Generation;
use crate::net::server::{Deferred, Response};

/// A method's result not known yet: `Pending` with the waker registered where the result will
/// come from, until it is `Ready`.
pub(super) type Later = Box<dyn FnMut(&Waker) -> Poll<Result<Value, RpcError>> + Send>;

/// A JSON-RPC answer to request `id` once its result is known.
pub(super) struct Answer {
    pub(super) later: Later,
    pub(super) id: Value,
    pub(super) shape: Generation,
}

impl Deferred for Answer {
    fn poll(&mut self, waker: &Waker) -> Poll<Response> {
        (self.later)(waker).map(|result| {
            let answer = match result {
                Ok(result) => json!({"jsonrpc": "2.0", "id": self.id, "result": result}),
                Err(err) => err.answer(self.id.clone(), self.shape),
            };
            super::json_response(200, &answer)
        })
    }
}
