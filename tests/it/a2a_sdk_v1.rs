//! Interop with the official A2A Python SDK 1.x (`a2a-sdk` 1.x) over A2A 1.0: the real `mur run`
//! door, unmodified, is driven by `tests/sdk/a2a_client_v1.py`, which uses only the SDK's own
//! client code — its card resolver, `ClientFactory` (which must choose its native 1.0
//! `JsonRpcTransport`, not the 0.3 compat one), and for an authenticated door its
//! `AuthInterceptor` with an in-memory credential store and `GetExtendedAgentCard`. On the wire
//! every request must carry `A2A-Version: 1.0` and a 1.0 method name, and every answer be 1.0's
//! ProtoJSON. Its streaming client (`SendStreamingMessage`, still the native transport) is run
//! against a handler that writes in two steps, whose first chunk must reach the SDK while the
//! handler still runs. `cancel_task` (`CancelTask`) on a running task (a handler that sleeps
//! 30 s) must return it TASK_STATE_CANCELED, its process tree already gone.
//!
//! The SDK lives in the venv `target/a2a1-venv`, which `tests/sdk/setup.sh py1` makes on first
//! use, or in the Python that `MUR_A2A1_PYTHON` names; without PyPI each test records itself as
//! skipped and passes. The harness is `tests/sdk/interop.rs`.

use crate::interop;

use interop::{Door, PY1, interop, interop_cancel, interop_stream};

#[test]
fn a2a_sdk_1_speaks_a2a_1_0_to_the_embedded_echo_door() {
    interop(
        &PY1,
        Door::Echo,
        "a2a_sdk_1_speaks_a2a_1_0_to_the_embedded_echo_door",
    );
}

#[test]
fn a2a_sdk_1_authenticates_over_a2a_1_0_and_reads_the_extended_card() {
    interop(
        &PY1,
        Door::Authenticated,
        "a2a_sdk_1_authenticates_over_a2a_1_0_and_reads_the_extended_card",
    );
}

#[test]
fn a2a_sdk_1_streams_over_a2a_1_0_each_chunk_while_the_handler_still_runs() {
    interop_stream(
        &PY1,
        "a2a_sdk_1_streams_over_a2a_1_0_each_chunk_while_the_handler_still_runs",
    );
}

#[test]
fn a2a_sdk_1_cancels_a_running_task_over_a2a_1_0_and_gets_it_back_canceled() {
    interop_cancel(
        &PY1,
        "a2a_sdk_1_cancels_a_running_task_over_a2a_1_0_and_gets_it_back_canceled",
    );
}
