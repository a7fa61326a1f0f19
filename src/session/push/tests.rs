use serde_json::json;

use super::*;
use crate::a2a::task::State;
use crate::id::TaskId;

pub(super) fn push(allow: &[&str], budget: usize) -> Arc<Push> {
    let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
    let door = "127.0.0.1:4000".parse().unwrap();
    // No delivery thread: what is queued stays to be read.
    Push::new(&allow, door, &Budget::new(budget)).unwrap()
}

pub(super) fn config(id: &str, url: &str, generation: Generation) -> Config {
    let params = json!({"taskId": "t", "id": id, "url": url});
    let mut config = crate::a2a::push::set(&params, Generation::V1_0).unwrap().1;
    config.generation = generation;
    config
}

pub(super) fn task(state: State) -> Task {
    Task {
        id: TaskId::mint().unwrap(),
        context_id: "ctx".into(),
        state,
        history: Vec::new(),
        answer: Vec::new(),
        note: None,
        updated: 0,
    }
}

#[test]
fn configs_are_bounded_per_task_replaced_by_id_and_deleted_idempotently() {
    let push = push(&[], 64 << 20);
    for i in 0..MAX_PER_TASK {
        let set = push.set(
            "t",
            config(&i.to_string(), "http://h.example/", Generation::V1_0),
            false,
        );
        assert!(set.is_ok());
    }
    let over = push.set(
        "t",
        config("x", "http://h.example/", Generation::V1_0),
        false,
    );
    assert_eq!(over.unwrap_err(), Refused::PerTask);
    // The same id replaces, even at the bound.
    let again = push.set(
        "t",
        config("0", "http://other.example/", Generation::V1_0),
        false,
    );
    assert_eq!(again.unwrap().url, "http://other.example/");
    assert_eq!(push.list("t").len(), MAX_PER_TASK);
    assert!(push.delete("t", "0"));
    assert!(!push.delete("t", "0"), "deleting again changes nothing");
    assert!(!push.delete("nobody", "0"));
    assert_eq!(push.list("t").len(), MAX_PER_TASK - 1);
    assert_eq!(
        push.registry().held,
        MAX_PER_TASK - 1,
        "the count kept beside"
    );
}

#[test]
fn configs_count_in_the_budget_share_and_are_refused_past_it() {
    // An eighth of 64 KiB: 8 KiB, room for a few configs of ~2.5 KiB.
    let push = push(&[], 64 << 10);
    let url = format!("http://h.example/{}", "p".repeat(1000));
    let mut taken = 0;
    while push
        .set(
            &format!("t{taken}"),
            config("c", &url, Generation::V1_0),
            false,
        )
        .is_ok()
    {
        taken += 1;
        assert!(taken < 100, "never refused");
    }
    assert!(taken >= 1);
    assert!(push.budget.used() <= push.budget.limit());
}

#[test]
fn updates_are_queued_for_each_webhook_in_its_generations_shape() {
    let push = push(&[], 64 << 20);
    let working = task(State::Working);
    let id = working.id.to_string();
    push.set(
        &id,
        config("new", "http://192.0.2.1/", Generation::V1_0),
        false,
    )
    .unwrap();
    push.set(
        &id,
        config("old", "http://192.0.2.2/", Generation::V0_3),
        false,
    )
    .unwrap();
    let status = Arc::new(Event::Status {
        state: State::Working,
        message: None,
        timestamp: 0,
        settled: false,
    });
    let artifact = Arc::new(Event::Artifact {
        parts: Vec::new(),
        append: false,
        last: false,
    });
    let mut wakes = Vec::new();
    push.publish(&working, &artifact, 0, &mut wakes);
    assert_eq!(wakes.len(), 1, "the first update queued wakes the thread");
    push.publish(&working, &status, 0, &mut wakes);
    push.publish(&task(State::Working), &status, 0, &mut wakes);
    assert_eq!(wakes.len(), 1, "until it looks, once is enough");
    push.wake.take();
    push.publish(&working, &status, 0, &mut wakes);
    assert_eq!(
        wakes.len(),
        2,
        "once it has looked, the next update wakes it again"
    );
    let queue = push.queue();
    let shapes: Vec<(&str, &str)> = queue
        .items
        .iter()
        .map(|d| {
            let kind = match *d.event {
                Event::Task(_) => "task",
                Event::Status { .. } => "status",
                Event::Artifact { .. } => "artifact",
            };
            (d.config.id.as_str(), kind)
        })
        .collect();
    // 0.3 gets the task at every update; a task without configs queues nothing.
    assert_eq!(
        shapes,
        [
            ("new", "artifact"),
            ("old", "task"),
            ("new", "status"),
            ("old", "task"),
            ("new", "status"),
            ("old", "task")
        ]
    );
}

#[test]
fn an_allowed_host_opens_its_addresses_but_never_the_door() {
    let push = push(&["127.0.0.1", "[::1]"], 64 << 20);
    let url = |u: &str| crate::net::webhook::parse(u).unwrap();
    assert!(push.check_literal(&url("http://127.0.0.1:9/")).is_ok());
    assert!(push.check_literal(&url("http://[::1]:9/")).is_ok());
    let door = push
        .check_literal(&url("http://127.0.0.1:4000/"))
        .unwrap_err();
    assert!(door.contains("own door"), "{door}");
    let other = push.check_literal(&url("http://127.0.0.2:9/")).unwrap_err();
    assert!(
        other.contains("loopback") && other.contains("'127.0.0.2'"),
        "{other}"
    );
    assert!(
        push.check_literal(&url("http://localhost:9/")).is_ok(),
        "a name is judged once resolved"
    );
    let resolved = push.target(&url("http://localhost:9/")).unwrap_err();
    assert!(resolved.contains("loopback"), "{resolved}");
    assert_eq!(
        push.target(&url("http://127.0.0.1:9/")).unwrap(),
        "127.0.0.1:9".parse().unwrap()
    );
}

#[test]
fn at_the_bound_the_task_that_ended_longest_ago_gives_way_and_live_ones_never() {
    let push = push(&[], 1 << 30);
    let (first, second) = (task(State::Completed), task(State::Completed));
    let (first_id, second_id) = (first.id.to_string(), second.id.to_string());
    let url = "http://h.example/";
    // `first` is set first, while live; `second` after it, but ends first.
    push.set(&first_id, config("a", url, Generation::V1_0), false)
        .unwrap();
    push.set(&second_id, config("b", url, Generation::V1_0), false)
        .unwrap();
    let end = Arc::new(Event::Status {
        state: State::Completed,
        message: None,
        timestamp: 0,
        settled: true,
    });
    push.publish(&second, &end, 0, &mut Vec::new());
    push.publish(&first, &end, 0, &mut Vec::new());
    for i in 2..MAX_CONFIGS {
        let live = format!("live{}", i / MAX_PER_TASK);
        push.set(&live, config(&i.to_string(), url, Generation::V1_0), false)
            .unwrap();
    }
    let registry = push.registry();
    let counted: usize = registry.tasks.values().map(|h| h.configs.len()).sum();
    assert_eq!((registry.held, counted), (MAX_CONFIGS, MAX_CONFIGS));
    drop(registry);
    push.set("new1", config("n", url, Generation::V1_0), false)
        .unwrap();
    assert!(push.list(&second_id).is_empty(), "ended first: gave way");
    assert_eq!(push.list(&first_id).len(), 1, "ended later: kept");
    push.set("new2", config("n", url, Generation::V1_0), false)
        .unwrap();
    assert!(push.list(&first_id).is_empty());
    let refused = push.set("new3", config("n", url, Generation::V1_0), false);
    assert!(
        matches!(refused, Err(Refused::Full(_))),
        "every holder is live now"
    );
}
