//! One reader's feed of a task's stream events: a bounded queue the engine pushes to and the
//! reader's connection drains.
//!
//! The engine never waits on a reader. A reader that falls [`BUFFER`] bytes behind loses its
//! feed — its queue is dropped and its stream ends — so a slow or stalled reader costs only its
//! own stream, never the task, the door or the other readers. The bound is on what is already
//! waiting: an event of any size is taken while the reader keeps up (a handler's `out/` files
//! may make the last one larger than the buffer), so a feed holds at most the buffer plus one
//! event.
//!
//! Events are shared: the engine makes one [`Arc`] per event and every reader's queue holds a
//! pointer to it, so a hundred readers of a 4 MiB answer hold one copy of it, not a hundred. The
//! bound above counts each event's weight in every queue it sits in (what the reader would have
//! to take), which keeps a stalled reader from pinning events long after the others read them.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::a2a::stream::Event;

/// How far behind a reader may fall, in [`Event::weight`] bytes.
pub const BUFFER: usize = 1 << 20;

/// What a reader gets next.
#[derive(Debug)]
pub enum Next {
    Event(Arc<Event>),
    /// Nothing within the wait: time for a keep-alive comment.
    Idle,
    /// The stream is over: its last event was read, or the reader fell too far behind.
    End,
}

#[derive(Default)]
struct Queue {
    events: VecDeque<Arc<Event>>,
    weight: usize,
    /// The last event has been pushed.
    closed: bool,
    /// The reader fell [`BUFFER`] behind.
    lost: bool,
}

/// One reader's feed of one task.
pub struct Feed {
    pub task_id: String,
    pub context_id: String,
    queue: Mutex<Queue>,
    ready: Condvar,
}

impl Feed {
    pub fn new(task_id: String, context_id: String) -> Self {
        Self {
            task_id,
            context_id,
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue `event` for the reader; `false` once the feed is over (closed or lost), when the
    /// engine may forget it.
    pub fn push(&self, event: Arc<Event>) -> bool {
        let mut queue = self.lock();
        if queue.closed || queue.lost {
            return false;
        }
        if queue.weight > BUFFER {
            queue.lost = true;
            queue.events.clear();
        } else {
            queue.weight += event.weight();
            queue.closed = event.ends();
            queue.events.push_back(event);
        }
        self.ready.notify_all();
        !queue.lost && !queue.closed
    }

    /// The reader has gone: take nothing more.
    pub fn close(&self) {
        let mut queue = self.lock();
        queue.lost = true;
        queue.events.clear();
        queue.weight = 0;
    }

    /// The next event, waiting at most `wait` for one.
    pub fn next(&self, wait: Duration) -> Next {
        let empty = |q: &mut Queue| q.events.is_empty() && !q.closed && !q.lost;
        let mut queue = self.lock();
        if empty(&mut queue) {
            queue = self
                .ready
                .wait_timeout_while(queue, wait, empty)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        if queue.lost {
            return Next::End;
        }
        match queue.events.pop_front() {
            Some(event) => {
                queue.weight -= event.weight();
                Next::Event(event)
            }
            None if queue.closed => Next::End,
            None => Next::Idle,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::message::Part;
    use crate::a2a::task::State;

    fn chunk(text: &str) -> Arc<Event> {
        Arc::new(Event::Artifact {
            parts: vec![Part::text(text)],
            append: true,
            last: false,
        })
    }

    #[test]
    fn events_arrive_in_order_and_the_settled_status_ends_the_feed() {
        let feed = Feed::new("t".into(), "c".into());
        assert!(matches!(feed.next(Duration::from_millis(1)), Next::Idle));
        assert!(feed.push(chunk("a")));
        let done = Arc::new(Event::Status {
            state: State::Completed,
            message: None,
            timestamp: 0,
            settled: true,
        });
        assert!(
            !feed.push(done),
            "nothing more is taken after the last event"
        );
        assert!(!feed.push(chunk("late")));
        assert!(matches!(
            feed.next(Duration::ZERO),
            Next::Event(e) if matches!(*e, Event::Artifact { .. })
        ));
        assert!(matches!(
            feed.next(Duration::ZERO),
            Next::Event(e) if matches!(*e, Event::Status { .. })
        ));
        assert!(matches!(feed.next(Duration::ZERO), Next::End));
    }

    #[test]
    fn readers_share_one_copy_of_each_event() {
        let feeds: Vec<Feed> = (0..100)
            .map(|_| Feed::new("t".into(), "c".into()))
            .collect();
        let big = chunk(&"x".repeat(1 << 20));
        for feed in &feeds {
            assert!(feed.push(big.clone()));
        }
        assert_eq!(
            Arc::strong_count(&big),
            101,
            "one copy, a pointer per reader"
        );
        let Next::Event(read) = feeds[0].next(Duration::ZERO) else {
            panic!("an event was queued")
        };
        assert!(Arc::ptr_eq(&read, &big));
    }

    #[test]
    fn a_reader_too_far_behind_loses_its_feed() {
        let feed = Feed::new("t".into(), "c".into());
        let big = "x".repeat(64 << 10);
        let mut pushed = 0;
        while feed.push(chunk(&big)) {
            pushed += 1;
            assert!(pushed < 100, "the buffer is bounded");
        }
        assert!(matches!(feed.next(Duration::ZERO), Next::End));
    }
}
