//! Answers that wait: a blocking `message/send`, a cancel of a running task, `murmur.StopSession`
//! — each a poll of what it waits for (the engine's [`Settled`]), with the connection's waker
//! registered there, never a thread parked on it ([`crate::net::server::Deferred`]).

use std::task::{Poll, Waker};

use serde_json::{Value, json};

use super::super::tasks::{Canceled, Settled};
use super::binding::Binding;
use super::{Answered, Door, lookup};
use crate::a2a::error::RpcError;
use crate::a2a::params;
use crate::a2a::task::{State, Task, View};
use crate::a2a::version::Generation;
use crate::net::server::{Deferred, Response};

/// A method's result not known yet: `Pending` with the waker registered where the result will
/// come from, until it is `Ready`.
pub(super) type Later = Box<dyn FnMut(&Waker) -> Poll<Result<Value, RpcError>> + Send>;

/// The answer, framed by the request's binding, once its result is known.
pub(super) struct Answer {
    pub(super) later: Later,
    pub(super) binding: Binding,
    pub(super) shape: Generation,
}

impl Deferred for Answer {
    fn poll(&mut self, waker: &Waker) -> Poll<Response> {
        (self.later)(waker).map(|result| match result {
            Ok(result) => super::json_response(200, &self.binding.result(result)),
            Err(err) => self.binding.error(&err, self.shape),
        })
    }
}

impl Door {
    /// `murmur.StopSession` as the original runtime means it: an account, not a shutdown. Every
    /// live task is canceled (all at once, each answered once its processes are gone) and the
    /// answer names the ones this call moved to `canceled` — so a second call names none. The
    /// session goes on: ending the process is the caller's signal, as the original's `mur stop`
    /// sends right after; a method that ended its own process would race its answer out of it.
    pub(super) fn stop_session(&self) -> Later {
        let live = self.engine.live();
        // Every cancel is asked at once (none waits); the answer once each has settled.
        let mut asks: Vec<(String, Option<Settled>)> = live
            .into_iter()
            .filter_map(|id| match self.engine.cancel(&id, None).ok()? {
                Canceled::Done(task) => (task.state == State::Canceled).then_some((id, None)),
                Canceled::Cancelling(settled) => Some((id, Some(settled))),
            })
            .collect();
        let session = self.session_id.to_string();
        Box::new(move |waker| {
            let mut pending = false;
            asks.retain_mut(|(_, ask)| match ask.as_ref().map(|s| s.poll(waker)) {
                None => true,
                Some(Poll::Pending) => {
                    pending = true;
                    true
                }
                Some(Poll::Ready(task)) => {
                    *ask = None;
                    task.state == State::Canceled
                }
            });
            if pending {
                return Poll::Pending;
            }
            let canceled: Vec<&str> = asks.iter().map(|(id, _)| id.as_str()).collect();
            let account = json!({"session_id": session, "canceled": canceled, "residue": []});
            Poll::Ready(Ok(account))
        })
    }

    /// `tasks/cancel`, `CancelTask`: the task once canceled — at once if it was queued or
    /// waiting for input; once its turn has ended, its processes gone, if it was running.
    pub(super) fn cancel(
        &self,
        params: &Value,
        viewer: Option<&str>,
        generation: Generation,
    ) -> Result<Answered, RpcError> {
        let asked = params::task_ref(params)?;
        let render = move |task: Task| task.render(generation, View::FULL);
        match lookup(self.engine.cancel(&asked.id, viewer), &asked.id, generation)? {
            Canceled::Done(task) => Ok(Answered::Value(render(task))),
            Canceled::Cancelling(settled) => Ok(Answered::Later(Box::new(move |waker| {
                settled.poll(waker).map(|task| Ok(render(task)))
            }))),
        }
    }
}
