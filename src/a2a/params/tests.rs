use super::*;
use serde_json::json;

fn field(err: RpcError) -> String {
    err.field.unwrap_or(err.message)
}

#[test]
fn send_reads_each_generations_configuration() {
    let old = json!({"message": {"kind": "message", "messageId": "m", "role": "user",
            "parts": [{"kind": "text", "text": "hi"}]}, "configuration": {"blocking": false, "historyLength": 2}});
    let read = send(old.clone(), Generation::V0_3).unwrap();
    assert!(!read.blocking);
    assert_eq!(read.history_length, Some(2));
    let new = json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
            "configuration": {"returnImmediately": true}});
    assert!(!send(new.clone(), Generation::V1_0).unwrap().blocking);
    let mut push = new.clone();
    push["configuration"]["taskPushNotificationConfig"] = json!({"url": "https://x"});
    assert!(!send(push, Generation::V1_0).unwrap().blocking, "ignored");
    let mut push = old.clone();
    push["configuration"]["pushNotificationConfig"] = json!({"url": "https://x"});
    assert!(send(push, Generation::V0_3).is_ok(), "ignored");
    let mut bad = new.clone();
    bad["configuration"]["historyLength"] = json!("two");
    assert_eq!(
        field(send(bad, Generation::V1_0).unwrap_err()),
        "params.configuration.historyLength"
    );
    assert_eq!(
        field(send(json!({}), Generation::V1_0).unwrap_err()),
        "params.message"
    );
    assert_eq!(
        field(send(json!([]), Generation::V1_0).unwrap_err()),
        "params"
    );
}

#[test]
fn a_status_filter_is_read_by_name_or_number() {
    let read = |status: Value| list(&json!({"status": status})).unwrap().state;
    for (status, want) in [
        (json!("TASK_STATE_WORKING"), StateFilter::Is(State::Working)),
        (json!(2), StateFilter::Is(State::Working)),
        (json!(6), StateFilter::Is(State::InputRequired)),
        (json!("TASK_STATE_UNSPECIFIED"), StateFilter::Any),
        (json!(0), StateFilter::Any),
        (json!("UNRECOGNIZED"), StateFilter::Any),
        (json!(-1), StateFilter::Any),
        (json!(null), StateFilter::Any),
        (json!("TASK_STATE_REJECTED"), StateFilter::Nothing),
        (json!(8), StateFilter::Nothing),
    ] {
        assert_eq!(read(status.clone()), want, "{status}");
    }
    for state in crate::a2a::task::STATES {
        assert_eq!(read(json!(state.number())), StateFilter::Is(state));
    }
    assert!(!StateFilter::Nothing.admits(State::Completed));
    assert!(StateFilter::Any.admits(State::Completed));
}

#[test]
fn task_refs_and_listings_refuse_bad_members() {
    assert_eq!(
        task_ref(&json!({"id": "t", "historyLength": 3}))
            .unwrap()
            .history_length,
        Some(3)
    );
    for (params, want) in [
        (json!({}), "params.id"),
        (json!({"id": ""}), "params.id"),
        (json!({"id": 5}), "params.id"),
        (
            json!({"id": "t", "historyLength": "two"}),
            "params.historyLength",
        ),
        (
            json!({"id": "t", "historyLength": -1}),
            "params.historyLength",
        ),
        (
            json!({"id": "t", "historyLength": 1.5}),
            "params.historyLength",
        ),
        (json!(null), "params"),
    ] {
        assert_eq!(field(task_ref(&params).unwrap_err()), want, "{params}");
    }
    let all = list(&json!(null)).unwrap();
    assert_eq!(
        (all.page_size, all.before, all.include_artifacts),
        (DEFAULT_PAGE, None, false)
    );
    let some = list(
        &json!({"status": "TASK_STATE_COMPLETED", "pageSize": 100, "pageToken": "17",
            "statusTimestampAfter": "2026-01-01T00:00:00Z", "includeArtifacts": true}),
    )
    .unwrap();
    assert_eq!(
        (some.state, some.page_size, some.before),
        (StateFilter::Is(State::Completed), 100, Some(17))
    );
    for (params, want) in [
        (json!({"pageSize": 0}), "params.pageSize"),
        (json!({"pageSize": 101}), "params.pageSize"),
        (json!({"pageToken": "abc"}), "params.pageToken"),
        (json!({"status": "completed"}), "params.status"),
        (json!({"status": 9}), "params.status"),
        (json!({"status": 2.5}), "params.status"),
        (json!({"status": true}), "params.status"),
        (json!({"status": "TASK_STATE_DONE"}), "params.status"),
        (json!({"contextId": 3}), "params.contextId"),
        (
            json!({"statusTimestampAfter": "yesterday"}),
            "params.statusTimestampAfter",
        ),
        (
            json!({"includeArtifacts": "yes"}),
            "params.includeArtifacts",
        ),
    ] {
        assert_eq!(field(list(&params).unwrap_err()), want, "{params}");
    }
}
