//! Interop with the official A2A JavaScript SDK, `@a2a-js/sdk` 0.3.x (A2A 0.3) and 1.x (A2A 1.0):
//! the real `mur run` door, unmodified, is driven by `tests/sdk/a2a_client.mjs` (node), which
//! uses only the SDK's own client code — its default `new ClientFactory().createFromUrl(url)`
//! (for 1.x it must choose the native 1.0 `JsonRpcTransport`), its `Client` calls, and for an
//! authenticated door per-call `serviceParameters` carrying the bearer and `getAgentCard()` for
//! the extended card. On the wire 1.x must send `A2A-Version: 1.0` and 1.0 method names, and get
//! 1.0's ProtoJSON back. Each also streams with `sendMessageStream` (`message/stream`,
//! `SendStreamingMessage`) from a handler that writes in two steps, whose first chunk must reach
//! the SDK while the handler still runs. `cancelTask` on a running task (a handler that sleeps
//! 30 s) must return it canceled, its process tree already gone; and 1.x's `listTasks({})`,
//! which sends `"status":"UNRECOGNIZED"`, must list the caller's tasks.
//!
//! Each SDK lives in its own npm directory, `target/a2a-js03` and `target/a2a-js1`, which
//! `tests/sdk/setup.sh js03|js1` makes on first use (or `MUR_A2A_JS03_DIR` / `MUR_A2A_JS1_DIR`
//! names); without node, npm or the registry each test records itself as skipped and passes.
//! The harness is `tests/sdk/interop.rs`.

use crate::interop;

use interop::{Door, JS1, JS03, interop, interop_cancel, interop_stream};

#[test]
fn a2a_js_0_3_sends_a_task_to_the_embedded_echo_door() {
    interop(
        &JS03,
        Door::Echo,
        "a2a_js_0_3_sends_a_task_to_the_embedded_echo_door",
    );
}

#[test]
fn a2a_js_0_3_authenticates_and_reads_the_extended_card() {
    interop(
        &JS03,
        Door::Authenticated,
        "a2a_js_0_3_authenticates_and_reads_the_extended_card",
    );
}

#[test]
fn a2a_js_1_speaks_a2a_1_0_to_the_embedded_echo_door() {
    interop(
        &JS1,
        Door::Echo,
        "a2a_js_1_speaks_a2a_1_0_to_the_embedded_echo_door",
    );
}

#[test]
fn a2a_js_1_authenticates_over_a2a_1_0_and_reads_the_extended_card() {
    interop(
        &JS1,
        Door::Authenticated,
        "a2a_js_1_authenticates_over_a2a_1_0_and_reads_the_extended_card",
    );
}

#[test]
fn a2a_js_0_3_streams_each_chunk_while_the_handler_still_runs() {
    interop_stream(
        &JS03,
        "a2a_js_0_3_streams_each_chunk_while_the_handler_still_runs",
    );
}

#[test]
fn a2a_js_1_streams_over_a2a_1_0_each_chunk_while_the_handler_still_runs() {
    interop_stream(
        &JS1,
        "a2a_js_1_streams_over_a2a_1_0_each_chunk_while_the_handler_still_runs",
    );
}

#[test]
fn a2a_js_0_3_cancels_a_running_task_and_gets_it_back_canceled() {
    interop_cancel(
        &JS03,
        "a2a_js_0_3_cancels_a_running_task_and_gets_it_back_canceled",
    );
}

#[test]
fn a2a_js_1_cancels_a_running_task_over_a2a_1_0_and_gets_it_back_canceled() {
    interop_cancel(
        &JS1,
        "a2a_js_1_cancels_a_running_task_over_a2a_1_0_and_gets_it_back_canceled",
    );
}
