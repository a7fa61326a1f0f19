//! Interop with the official A2A Python SDK (`a2a-sdk` 0.3.x): the real `mur run` door,
//! unmodified, is driven by `tests/sdk/a2a_client.py`, which uses only the SDK's own client code —
//! its card resolver, its JSON-RPC client, and for an authenticated door its `AuthInterceptor`
//! with an in-memory credential store and the authenticated extended card — and its streaming
//! `Client` (`message/stream`) against a handler that writes in two steps, whose first chunk must
//! reach the SDK while the handler still runs. `Client.cancel_task` on a running task (a handler
//! that sleeps 30 s) must return the task `canceled`, its process tree already gone.
//!
//! The SDK lives in the venv `target/a2a-venv`, which `tests/sdk/setup.sh py03` makes on first
//! use, or in the Python that `MUR_A2A_PYTHON` names; without PyPI each test records itself as
//! skipped and passes. `tests/sdk/interop.rs` has the harness (shared with `a2a_sdk_v1.rs`, the
//! 1.x SDK over A2A 1.0, and `a2a_sdk_js.rs`, the JavaScript SDKs).

use crate::interop;

use interop::{Door, PY03, interop, interop_cancel, interop_stream};

#[test]
fn the_sdk_sends_a_task_to_the_embedded_echo_door_and_gets_it_back() {
    interop(
        &PY03,
        Door::Echo,
        "the_sdk_sends_a_task_to_the_embedded_echo_door_and_gets_it_back",
    );
}

#[test]
fn the_sdk_authenticates_with_the_operator_token_and_reads_the_extended_card() {
    interop(
        &PY03,
        Door::Authenticated,
        "the_sdk_authenticates_with_the_operator_token_and_reads_the_extended_card",
    );
}

#[test]
fn the_sdk_streams_each_chunk_while_the_handler_still_runs() {
    interop_stream(
        &PY03,
        "the_sdk_streams_each_chunk_while_the_handler_still_runs",
    );
}

#[test]
fn the_sdk_cancels_a_running_task_and_gets_it_back_canceled() {
    interop_cancel(
        &PY03,
        "the_sdk_cancels_a_running_task_and_gets_it_back_canceled",
    );
}
