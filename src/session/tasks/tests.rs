use super::*;

#[test]
fn a_blocking_caller_gets_its_task_even_after_it_was_evicted_from_memory() {
    let engine = Engine::new(
        Capsule::Echo,
        Lifecycle::default(),
        Vec::new(),
        Arc::new(Vec::new),
        None,
        None,
    );
    let first = engine
        .submit("op", None, Message::user_text("first"), false)
        .unwrap();
    // The store keeps the newest 1,000 finished tasks: these push the first one out, as
    // a thousand tasks ending while its caller's thread is descheduled would.
    for n in 0..1_000 {
        engine
            .submit("op", None, Message::user_text(&n.to_string()), false)
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
