//! A streamed answer: server-sent events, each framed by the request's binding (a JSON-RPC
//! answer to the request that asked, or HTTP+JSON's bare object) — a task's events as its feed
//! hands them out, shaped for this reader and counted in the
//! session's budget while they are written, or one answer alone.
//!
//! Polled by the door's server ([`BodyStream`]): nothing here waits. An empty feed stores the
//! connection's waker and the feed fires it on its next event; the server polls again at least
//! every `STREAM_TICK`, which is when a silent stream's heartbeat is due.

use std::sync::Arc;
use std::task::{Poll, Waker};

use serde_json::Value;

use super::super::budget::Charge;
use super::super::feed::Feed;
use super::binding::Binding;
use crate::a2a::stream::{Event, Heartbeat, Trail};
use crate::a2a::version::Generation;
use crate::net::server::BodyStream;

/// Server-sent events, each framed as the request's binding frames an answer.
pub(super) enum Sse {
    Feed(Box<FeedStream>),
    /// One answer, then the end.
    Once(Option<Value>),
}

/// A task's events, in the request's generation, the answer's text shaped for this reader
/// ([`Trail`]: the chunks add up to the stored answer).
pub(super) struct FeedStream {
    feed: Arc<Feed>,
    binding: Binding,
    generation: Generation,
    trail: Trail,
    /// Counts, in the session's budget, the event this reader is writing now.
    charge: Charge,
    /// When a piece was last handed out, for the heartbeat.
    heartbeat: Heartbeat,
}

impl Sse {
    pub(super) fn feed(
        feed: Arc<Feed>,
        binding: Binding,
        generation: Generation,
        trail: Trail,
        charge: Charge,
    ) -> Self {
        Sse::Feed(Box::new(FeedStream {
            feed,
            binding,
            generation,
            trail,
            charge,
            heartbeat: Heartbeat::default(),
        }))
    }
}

/// One server-sent event; parts' data (markers in the tree) are written as their text.
fn event(answer: &Value) -> Vec<u8> {
    let mut bytes = b"data: ".to_vec();
    bytes.extend(crate::json::raw::to_vec(answer));
    bytes.extend_from_slice(b"\n\n");
    bytes
}

impl BodyStream for Sse {
    fn poll_next(&mut self, waker: &Waker) -> Poll<Option<Vec<u8>>> {
        let stream = match self {
            Sse::Once(answer) => return Poll::Ready(answer.take().map(|answer| event(&answer))),
            Sse::Feed(stream) => stream,
        };
        // The piece written last has gone to the socket (the server polls for the next only
        // then): its count goes.
        stream.charge.set(0);
        let happened = match stream.feed.poll_next(waker) {
            Poll::Ready(Some(happened)) => happened,
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {
                return match stream.heartbeat.due() {
                    Some(beat) => Poll::Ready(Some(beat)),
                    None => Poll::Pending,
                };
            }
        };
        // Writing an event costs this reader its own copy, its tree and its bytes: about three
        // times its weight, asked first of the readers' share of the budget. A reader the share
        // has no room for is cut, as one too far behind is: the task goes on, and can be read.
        if !stream.charge.grow(3 * happened.weight()) {
            stream.feed.close();
            return Poll::Ready(None);
        }
        // The event is shared by every reader; this reader's shaping works on its own copy,
        // made only as it is written and gone once it is.
        let happened = stream.trail.shape(Event::clone(&happened));
        let (feed, generation) = (&stream.feed, stream.generation);
        let result = happened.render(&feed.task_id, &feed.context_id, generation);
        stream.heartbeat.wrote();
        Poll::Ready(Some(event(&stream.binding.result(result))))
    }
}

impl Drop for Sse {
    /// The reader has gone (or the stream ended): the engine stops feeding it at once.
    fn drop(&mut self) {
        if let Sse::Feed(stream) = self {
            stream.feed.close();
        }
    }
}
