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
    // Its first exchange fails: it and the 63 behind it are parked until a backoff has passed.
    let exchange = round.step(&push, 0, None).expect("a first exchange");
    assert_eq!(exchange.addr, "192.0.2.1:80".parse().unwrap());
    assert!(round.step(&push, 0, Some(Err("refused".into()))).is_none());
    assert!(round.going.is_empty(), "the job is done");
    assert!(
        round.jobs.is_empty(),
        "and forgotten: {} jobs held",
        round.jobs.len()
    );
    let parked = &round.parked;
    assert_eq!(parked.len, PER_JOB);
    let first = &parked.by_key.values().next().expect("one webhook parked")[0];
    assert_eq!(first.attempt, 1);
    let at = parked.next().expect("a retry's time");
    assert!(at > Instant::now() + Duration::from_millis(500));
    assert_eq!(push.queue().items.len(), 36, "the later ones still queued");
    // Nothing is due now: no job; the 36 join the parked webhook behind its 64, and a recheck
    // when the retry falls due.
    let grown = round.take_due(&push);
    assert_eq!(grown.jobs, 1, "no job more than the one done");
    assert_eq!(
        round.parked.len,
        PER_JOB + 36,
        "the later updates wait behind the retry"
    );
    assert!(push.queue().items.is_empty(), "taken off the queue");
    assert_eq!(grown.recheck, Some(at));
    // Winding down, everything is due at once, until the end: the 64 first, as one job.
    let _ = push.closing.set(Instant::now() + Duration::from_secs(1));
    let grown = round.take_due(&push);
    assert_eq!(grown.jobs, 2);
    assert!(grown.until.is_some());
    assert_eq!(round.jobs[&1].items[0].attempt, 1, "the failed one leads");
    assert_eq!(round.jobs[&1].items.len(), PER_JOB);
    assert_eq!(
        push.queue().items.len(),
        36,
        "the rest back at the head of the queue"
    );
    // The round, its first job done, numbers its jobs on from it.
    assert_eq!(round.jobs.keys().copied().collect::<Vec<_>>(), [1]);
}
