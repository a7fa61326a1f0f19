use super::*;
use crate::a2a::message::Part;

/// An engine of the embedded echo capsule, with defaults.
fn echo_engine() -> Arc<Engine> {
    Engine::new(
        Capsule::Echo,
        Lifecycle::default(),
        Vec::new(),
        Arc::new(Vec::new),
        None,
        None,
    )
}

#[test]
fn a_blocking_caller_gets_its_task_even_after_it_was_evicted_from_memory() {
    let engine = echo_engine();
    let first = engine
        .submit("op", None, Message::user_text("first"), false, None)
        .unwrap();
    // The store keeps the newest 1,000 finished tasks: these push the first one out, as
    // a thousand tasks ending while its caller's thread is descheduled would.
    for n in 0..1_000 {
        engine
            .submit("op", None, Message::user_text(&n.to_string()), false, None)
            .unwrap();
    }
    assert!(matches!(
        engine.get(first.id.as_str(), None),
        Err(Lookup::NotFound)
    ));
    let task = first.settled.wait();
    assert_eq!(task.id, first.id);
    assert_eq!(task.state, State::Completed);
    assert_eq!(task.answer, vec![Part::text("first")]);
}

#[test]
fn a_watcher_is_told_each_instant_task_its_start_its_text_and_its_end() {
    use std::task::Poll;
    let engine = echo_engine();
    let watcher = engine.observe();
    let taken = engine
        .submit("op", None, Message::user_text("hi"), false, None)
        .unwrap();
    let waker = crate::session::parking::waker();
    let (mut sights, mut answer) = (Vec::new(), None);
    while let Poll::Ready(Some(sight)) = watcher.poll_next(&waker) {
        assert_eq!(sight.task_id, taken.id.as_str());
        sights.push(sight.event.clone());
        answer = sight.answer.clone();
    }
    assert_eq!(answer.as_deref(), Some("hi"), "the end carries the answer");
    assert!(sights[0].is_none(), "its start first");
    assert!(
        matches!(sights.get(1), Some(Some(e)) if matches!(&**e, crate::a2a::stream::Event::Artifact { parts, .. } if *parts == vec![Part::text("hi")]))
    );
    assert!(
        matches!(sights.last(), Some(Some(e)) if matches!(&**e, crate::a2a::stream::Event::Status { state: State::Completed, .. }))
    );
    engine.begin_shutdown();
    assert!(
        matches!(watcher.poll_next(&waker), Poll::Ready(None)) && !watcher.lost(),
        "the session's end ends the watch, as an end, not a cut"
    );
}
