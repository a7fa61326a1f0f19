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
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};

use crate::a2a::stream::Event;

/// How far behind a reader may fall, in [`Event::weight`] bytes.
pub const BUFFER: usize = 1 << 20;

/// What a [`Bounded`] queue carries: how much each item weighs against [`BUFFER`], and whether
/// it is the last.
pub trait Item: Clone {
    fn weight(&self) -> usize;
    fn ends(&self) -> bool;
}

impl Item for Arc<Event> {
    fn weight(&self) -> usize {
        Event::weight(self)
    }

    fn ends(&self) -> bool {
        Event::ends(self)
    }
}

/// One reader's bounded queue, and the waker of its reader's last poll that found it empty.
/// What a [`Feed`] and a watcher's feed of the whole session ([`super::watch`]) both are.
///
/// Its lock is a leaf, taken under the engine lock to push: a push never wakes the reader
/// itself — it hands the waker back, for the engine to fire once its lock is released.
pub struct Bounded<T> {
    queue: Mutex<Queue<T>>,
}

struct Queue<T> {
    items: VecDeque<T>,
    weight: usize,
    /// The last item has been pushed.
    closed: bool,
    /// The reader fell [`BUFFER`] behind, or went.
    lost: bool,
    /// Fired on the next push, close or loss, then forgotten.
    waker: Option<Waker>,
}

impl<T> Default for Bounded<T> {
    fn default() -> Self {
        Self {
            queue: Mutex::new(Queue {
                items: VecDeque::new(),
                weight: 0,
                closed: false,
                lost: false,
                waker: None,
            }),
        }
    }
}

impl<T: Item> Bounded<T> {
    fn lock(&self) -> MutexGuard<'_, Queue<T>> {
        // panic = "abort": a poisoned lock cannot be observed half-updated.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue `item` for the reader, putting the reader's waker (if it waits) in `wakes`;
    /// `false` once the queue is over (closed or lost), when the pusher may forget it.
    pub fn push(&self, item: T, wakes: &mut Vec<Waker>) -> bool {
        let mut queue = self.lock();
        if queue.closed || queue.lost {
            return false;
        }
        if queue.weight > BUFFER {
            queue.lost = true;
            queue.items.clear();
            queue.weight = 0;
        } else {
            queue.weight += item.weight();
            queue.closed = item.ends();
            queue.items.push_back(item);
        }
        wakes.extend(queue.waker.take());
        !queue.lost && !queue.closed
    }

    /// Nothing more will come: the reader reads what is queued, then the end. Its waker goes
    /// in `wakes`.
    pub fn finish(&self, wakes: &mut Vec<Waker>) {
        let mut queue = self.lock();
        queue.closed = true;
        wakes.extend(queue.waker.take());
    }

    /// The reader has gone: take nothing more, and let go of what is queued.
    pub fn close(&self) {
        let mut queue = self.lock();
        queue.lost = true;
        queue.items.clear();
        queue.weight = 0;
        queue.waker = None;
    }

    /// Whether the reader lost its queue by falling too far behind (or by going).
    pub fn lost(&self) -> bool {
        self.lock().lost
    }

    /// `Ready(Some)` the next item, `Ready(None)` the queue is over (its last item read, or
    /// lost), `Pending` nothing now: `waker` is stored, replacing the last one, and fired on
    /// the next push, finish or loss.
    pub fn poll_next(&self, waker: &Waker) -> Poll<Option<T>> {
        let mut queue = self.lock();
        if queue.lost {
            return Poll::Ready(None);
        }
        if let Some(item) = queue.items.pop_front() {
            queue.weight -= item.weight();
            return Poll::Ready(Some(item));
        }
        if queue.closed {
            return Poll::Ready(None);
        }
        match &mut queue.waker {
            Some(stored) => stored.clone_from(waker),
            empty => *empty = Some(waker.clone()),
        }
        Poll::Pending
    }
}

/// What a watcher of the whole session is told of one task: that it started (no event), or
/// one of its events — the same shared event its task's readers get.
pub struct Sight {
    pub task_id: String,
    pub context_id: String,
    pub event: Option<Arc<Event>>,
    /// With a completed status: the text of the task's answer as it is kept (the streamed
    /// chunks are the handler's output; the answer may differ, a trailing newline dropped).
    pub answer: Option<String>,
}

impl Item for Arc<Sight> {
    fn weight(&self) -> usize {
        // Its ids and bookkeeping, and the event.
        let answer = self.answer.as_ref().map_or(0, String::len);
        256 + self.event.as_ref().map_or(0, |e| e.weight()) + answer
    }

    /// A watcher's feed ends with the session ([`Bounded::finish`]), never with a task.
    fn ends(&self) -> bool {
        false
    }
}

/// One reader's feed of one task.
pub struct Feed {
    pub task_id: String,
    pub context_id: String,
    queue: Bounded<Arc<Event>>,
}

impl Feed {
    pub fn new(task_id: String, context_id: String) -> Self {
        Self {
            task_id,
            context_id,
            queue: Bounded::default(),
        }
    }

    /// Queue `event` for the reader, its waker put in `wakes` to fire once the engine lock is
    /// released; `false` once the feed is over (closed or lost), when the engine may forget it.
    pub fn push(&self, event: Arc<Event>, wakes: &mut Vec<Waker>) -> bool {
        self.queue.push(event, wakes)
    }

    /// The reader has gone: take nothing more.
    pub fn close(&self) {
        self.queue.close();
    }

    /// `Ready(Some(e))` an event, `Ready(None)` the stream is over (last event read, or the
    /// reader fell too far behind), `Pending` nothing now (`waker` stored; fired on the next
    /// push, or when the feed ends).
    pub fn poll_next(&self, waker: &Waker) -> Poll<Option<Arc<Event>>> {
        self.queue.poll_next(waker)
    }

    /// The next event, waiting for it; `None` once the stream is over: for readers that are
    /// not door workers. Built on [`Feed::poll_next`] with a parking waker.
    pub fn next(&self) -> Option<Arc<Event>> {
        super::parking::block_on(|waker| self.poll_next(waker))
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
        assert!(feed.poll_next(Waker::noop()).is_pending());
        assert!(feed.push(chunk("a"), &mut Vec::new()));
        let done = Arc::new(Event::Status {
            state: State::Completed,
            message: None,
            timestamp: 0,
            settled: true,
        });
        assert!(
            !feed.push(done, &mut Vec::new()),
            "nothing more is taken after the last event"
        );
        assert!(!feed.push(chunk("late"), &mut Vec::new()));
        assert!(matches!(
            feed.poll_next(Waker::noop()),
            Poll::Ready(Some(e)) if matches!(*e, Event::Artifact { .. })
        ));
        assert!(matches!(
            feed.poll_next(Waker::noop()),
            Poll::Ready(Some(e)) if matches!(*e, Event::Status { .. })
        ));
        assert!(matches!(feed.poll_next(Waker::noop()), Poll::Ready(None)));
    }

    #[test]
    fn readers_share_one_copy_of_each_event() {
        let feeds: Vec<Feed> = (0..100)
            .map(|_| Feed::new("t".into(), "c".into()))
            .collect();
        let big = chunk(&"x".repeat(1 << 20));
        for feed in &feeds {
            assert!(feed.push(big.clone(), &mut Vec::new()));
        }
        assert_eq!(
            Arc::strong_count(&big),
            101,
            "one copy, a pointer per reader"
        );
        let Poll::Ready(Some(read)) = feeds[0].poll_next(Waker::noop()) else {
            panic!("an event was queued")
        };
        assert!(Arc::ptr_eq(&read, &big));
    }

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Count(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn woken(count: &Count) -> usize {
        count.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[test]
    fn poll_next_stores_the_latest_waker_and_a_push_hands_it_back_once() {
        let feed = Feed::new("t".into(), "c".into());
        let (first, second) = (Arc::new(Count::default()), Arc::new(Count::default()));
        assert!(feed.poll_next(&Waker::from(first.clone())).is_pending());
        // Polled again with another waker: that one replaces the first.
        assert!(feed.poll_next(&Waker::from(second.clone())).is_pending());
        let mut wakes = Vec::new();
        assert!(feed.push(chunk("a"), &mut wakes));
        assert_eq!(wakes.len(), 1, "the reader's waker, handed back to fire");
        wakes.drain(..).for_each(Waker::wake);
        assert_eq!((woken(&first), woken(&second)), (0, 1));
        // Nobody waits now: a second push hands back no waker.
        assert!(feed.push(chunk("b"), &mut wakes));
        assert!(wakes.is_empty());
        let waker = Waker::from(second.clone());
        assert!(matches!(feed.poll_next(&waker), Poll::Ready(Some(_))));
        assert!(matches!(feed.poll_next(&waker), Poll::Ready(Some(_))));
        assert!(feed.poll_next(&waker).is_pending());
        let done = Arc::new(Event::Status {
            state: State::Completed,
            message: None,
            timestamp: 0,
            settled: true,
        });
        assert!(!feed.push(done, &mut wakes));
        assert_eq!(wakes.len(), 1, "the last event wakes the reader too");
        assert!(matches!(feed.poll_next(&waker), Poll::Ready(Some(_))));
        assert!(matches!(feed.poll_next(&waker), Poll::Ready(None)));
    }

    #[test]
    fn a_blocking_reader_is_woken_by_a_push_from_another_thread() {
        let feed = Arc::new(Feed::new("t".into(), "c".into()));
        let pusher = feed.clone();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let mut wakes = Vec::new();
            pusher.push(chunk("a"), &mut wakes);
            wakes.into_iter().for_each(Waker::wake);
        });
        // A hang guard: the reader waits on a thread of its own, given a minute to be woken.
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = feed.clone();
        std::thread::spawn(move || tx.send(reader.next().is_some()));
        let woken = rx.recv_timeout(std::time::Duration::from_secs(60));
        assert_eq!(woken, Ok(true), "the push never woke the reader");
        thread.join().unwrap();
    }

    #[test]
    fn a_reader_too_far_behind_loses_its_feed() {
        let feed = Feed::new("t".into(), "c".into());
        let big = "x".repeat(64 << 10);
        let mut pushed = 0;
        while feed.push(chunk(&big), &mut Vec::new()) {
            pushed += 1;
            assert!(pushed < 100, "the buffer is bounded");
        }
        assert!(matches!(feed.poll_next(Waker::noop()), Poll::Ready(None)));
    }
}
