use super::super::tests::{config, push, task};
use super::*;
use crate::a2a::stream::Event;
use crate::a2a::task::State;

fn status() -> Arc<Event> {
    Arc::new(Event::Status {
        state: State::Working,
        message: None,
        timestamp: 0,
        settled: false,
    })
}

#[test]
fn a_job_takes_at_most_per_job_updates_and_a_failure_waits_its_backoff_in_order() {
    let push = push(&[], 64 << 20);
    let working = task(State::Working);
    let id = working.id.to_string();
    // 192.0.2.1 (TEST-NET-1) is a public address to the rules: checked, never connected to here.
    push.set(
        &id,
        config("c", "http://192.0.2.1/", Generation::V1_0),
        false,
    )
    .unwrap();
    let event = status();
    for _ in 0..PER_JOB + 36 {
        push.publish(&working, &event, 0, &mut Vec::new());
    }
    let mut round = Round::default();
    let grown = round.take_due(&push);
    assert_eq!(grown.jobs, 1);
    assert_eq!(round.jobs[&0].items.len(), PER_JOB, "a job holds {PER_JOB}");
    assert_eq!(push.queue().items.len(), 36, "the rest wait in the queue");
    assert!(grown.recheck.is_none() && grown.until.is_none());
    // Its first exchange fails: it and the 63 behind it go back ahead of the 36, after a backoff.
    let exchange = round.step(&push, 0, None).expect("a first exchange");
    assert_eq!(exchange.addr, "192.0.2.1:80".parse().unwrap());
    assert!(round.step(&push, 0, Some(Err("refused".into()))).is_none());
    assert!(round.going.is_empty(), "the job is done");
    assert!(
        round.jobs.is_empty(),
        "and forgotten: {} jobs held",
        round.jobs.len()
    );
    let queue = push.queue();
    assert_eq!(queue.items.len(), PER_JOB + 36);
    assert_eq!(queue.items[0].attempt, 1);
    assert!(queue.items[0].due > Instant::now() + Duration::from_millis(500));
    drop(queue);
    // Nothing is due now: no job, and a recheck when the retry falls due.
    let mut next = Round::default();
    let grown = next.take_due(&push);
    assert_eq!(grown.jobs, 0, "the later updates wait behind the retry");
    let recheck = grown.recheck.expect("a recheck at the retry");
    assert!(recheck > Instant::now() + Duration::from_millis(500));
    // Winding down, everything is due at once, until the end.
    let _ = push.closing.set(Instant::now() + Duration::from_secs(1));
    let grown = next.take_due(&push);
    assert_eq!(grown.jobs, 1);
    assert!(grown.until.is_some());
    // The first round, its job done, still takes new ones, numbered on from it.
    let grown = round.take_due(&push);
    assert_eq!(grown.jobs, 2, "the round's second job");
    assert_eq!(round.jobs.keys().copied().collect::<Vec<_>>(), [1]);
}
