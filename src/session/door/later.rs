//! Answers that wait: a blocking `message/send`, a cancel of a running task, `murmur.StopSession`
//! — each a poll of what it waits for, with the connection's waker registered there, never a
//! thread parked on it ([`crate::net::server::Deferred`]).

use std::sync::{Arc, Mutex};
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

/// TEMPORARY, until the engine's `Settled` can be polled: `wait` on a thread of its own, whose
/// end wakes the connection.
pub(super) fn on_thread(wait: impl FnOnce() -> Result<Value, RpcError> + Send + 'static) -> Later {
    type Slot = (Option<Result<Value, RpcError>>, Option<Waker>);
    let slot: Arc<Mutex<Slot>> = Arc::default();
    let theirs = slot.clone();
    let spawned = std::thread::Builder::new()
        .name("wait".into())
        .spawn(move || {
            let out = wait();
            let waker = {
                let mut slot = theirs.lock().unwrap_or_else(|p| p.into_inner());
                slot.0 = Some(out);
                slot.1.take()
            };
            if let Some(waker) = waker {
                waker.wake();
            }
        });
    if spawned.is_err() {
        let why = "no thread to wait for the task: try again shortly";
        let mut failed = Some(Err(RpcError::new(crate::a2a::rpc::INTERNAL_ERROR, why)));
        return Box::new(move |_| Poll::Ready(failed.take().unwrap_or(Ok(Value::Null))));
    }
    Box::new(move |waker| {
        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
        match slot.0.take() {
            Some(out) => Poll::Ready(out),
            None => {
                slot.1 = Some(waker.clone());
                Poll::Pending
            }
        }
    })
}
