//! A streamed answer: server-sent events, each a JSON-RPC answer to the request that asked —
//! a task's events as its feed hands them out, shaped for this reader and counted in the
//! session's budget while they are written, or one answer alone.

use std::sync::Arc;

use serde_json::{Value, json};

use super::super::budget::Charge;
use super::super::feed::{Feed, Next};
use crate::a2a::stream::{Event, Trail};
use crate::a2a::version::Generation;
use crate::net::server::BodyStream;

/// How long a stream may be silent before a comment line keeps it alive.
const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(15);

/// Server-sent events, each a JSON-RPC answer to the request that asked.
pub(super) enum Sse {
    /// A task's events, in the request's generation, the answer's text shaped for this reader
    /// ([`Trail`]: the chunks add up to the stored answer). The charge counts, in the
    /// session's budget, the event this reader is writing now ([`Sse::next`]).
    Feed(Arc<Feed>, Value, Generation, Trail, Charge),
    /// One answer, then the end.
    Once(Option<Value>),
}

/// One server-sent event; parts' data (markers in the tree) are written as their text.
fn event(answer: &Value) -> Vec<u8> {
    let mut bytes = b"data: ".to_vec();
    bytes.extend(crate::json::raw::to_vec(answer));
    bytes.extend_from_slice(b"\n\n");
    bytes
}

impl BodyStream for Sse {
    fn next(&mut self) -> Option<Vec<u8>> {
        let (feed, id, generation, trail, charge) = match self {
            Sse::Once(answer) => return answer.take().map(|answer| event(&answer)),
            Sse::Feed(feed, id, generation, trail, charge) => {
                (feed, id, *generation, trail, charge)
            }
        };
        // The piece written last has gone to the socket: its count goes.
        charge.set(0);
        match feed.next(HEARTBEAT) {
            Next::Event(happened) => {
                // Writing an event costs this reader its own copy, its tree and its bytes: about
                // three times its weight, asked first of the readers' share of the budget. A
                // reader the share has no room for is cut, as one too far behind is: the task
                // goes on, and can be read.
                if !charge.grow(3 * happened.weight()) {
                    feed.close();
                    return None;
                }
                // The event is shared by every reader; this reader's shaping works on its own
                // copy, made only as it is written and gone once it is.
                let happened = trail.shape(Event::clone(&happened));
                let result = happened.render(&feed.task_id, &feed.context_id, generation);
                Some(event(
                    &json!({"jsonrpc": "2.0", "id": id, "result": result}),
                ))
            }
            Next::Idle => Some(b": keep-alive\n\n".to_vec()),
            Next::End => None,
        }
    }
}

impl Drop for Sse {
    /// The reader has gone (or the stream ended): the engine stops feeding it at once.
    fn drop(&mut self) {
        if let Sse::Feed(feed, ..) = self {
            feed.close();
        }
    }
}
