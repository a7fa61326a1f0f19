#!/usr/bin/env python3
"""Talk to a mur door with the official A2A Python SDK (a2a-sdk 1.x) forced onto its HTTP+JSON
(REST) transport, and check it.

    a2a_rest.py URL [--legacy]

URL is the door (`127.0.0.1:PORT`). The door must run the "asker" handler of tests/it/rest.rs:
it answers with the text it got, except that a first turn whose text is `ask` asks `name?`
(input required).

The client comes from the SDK's own `ClientFactory` with `supported_protocol_bindings` holding
only `HTTP+JSON`: it must pick the card's HTTP+JSON interface and build the SDK's native 1.0
`RestTransport` — or, with `--legacy`, given a card whose only HTTP+JSON interface is the 0.3
one, the SDK's `CompatRestTransport`, which speaks 0.3's `/v1` paths and proto JSON. Through it:
send (completed, the text echoed), get, list (1.0 only: 0.3 has no ListTasks), the errors as
the SDK's own types (an unknown task's TaskNotFoundError, a finished task's
TaskNotCancelableError), a streamed send (the task, its events, completed), a multi-turn task
(input required, then completed with the second turn's text), and a task waiting for input
canceled. On the wire, watched through httpx's event hooks: no request to `/` (no JSON-RPC),
every A2A call at a REST path of its generation with its `A2A-Version`.

It prints one JSON line: `{"ok": true, ...}` or `{"ok": false, "problems": [...]}` (exit 1).
"""

import asyncio
import json
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

UNKNOWN_TASK = "tsk_0190f0f0f0f07000800000000000abcd"


def message(text, task_id=None):
    msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        msg.task_id = task_id
    return SendMessageRequest(message=msg)


def texts(parts):
    return [p.text for p in parts if p.WhichOneof("content") == "text"]


def state(task):
    return TaskState.Name(task.status.state)


async def run(url, legacy):
    problems, done = [], []

    def expect(ok, what, got=None):
        (done if ok else problems).append(what if ok else f"{what}: {got!r}")

    wire = []

    async def seen(request):
        wire.append((request.method, request.url.path, request.headers.get("a2a-version")))

    async with httpx.AsyncClient(timeout=30, event_hooks={"request": [seen]}) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        rest = [i for i in card.supported_interfaces if i.protocol_binding == "HTTP+JSON"]
        expect([i.protocol_version for i in rest] == ["1.0", "0.3"],
               "card: HTTP+JSON 1.0 and 0.3", [str(i) for i in rest])
        if legacy:
            keep = [i for i in card.supported_interfaces
                    if i.protocol_binding != "HTTP+JSON" or i.protocol_version == "0.3"]
            del card.supported_interfaces[:]
            card.supported_interfaces.extend(keep)

        def client(streaming):
            config = ClientConfig(httpx_client=http, streaming=streaming,
                                  supported_protocol_bindings=[TransportProtocol.HTTP_JSON])
            return ClientFactory(config).create(card)

        plain = client(False)
        transport = type(plain._transport).__name__  # noqa: SLF001  which one the factory chose
        want = "CompatRestTransport" if legacy else "RestTransport"
        expect(transport == want, f"transport: {want}", transport)

        async def send(c, request):
            events = [e async for e in c.send_message(request)]
            if len(events) != 1 or not events[0].HasField("task"):
                raise AssertionError(f"one task event, got {len(events)}")
            return events[0].task

        task = await send(plain, message("hello"))
        expect(state(task) == "TASK_STATE_COMPLETED", "send: completed", state(task))
        answer = [t for a in task.artifacts for t in texts(a.parts)]
        expect(answer == ["hello"], "send: the answer", answer)
        got = await plain.get_task(GetTaskRequest(id=task.id))
        expect(got.id == task.id and state(got) == "TASK_STATE_COMPLETED", "get: the task",
               (got.id, state(got)))
        if not legacy:
            listed = await plain.list_tasks(ListTasksRequest())
            expect(task.id in [t.id for t in listed.tasks], "list: the task", len(listed.tasks))
        try:
            await plain.get_task(GetTaskRequest(id=UNKNOWN_TASK))
            expect(False, "get unknown: TaskNotFoundError", "succeeded")
        except TaskNotFoundError:
            expect(True, "get unknown: TaskNotFoundError")
        try:
            await plain.cancel_task(CancelTaskRequest(id=task.id))
            expect(False, "cancel finished: TaskNotCancelableError", "succeeded")
        except TaskNotCancelableError:
            expect(True, "cancel finished: TaskNotCancelableError")

        streaming = client(True)
        events = [e async for e in streaming.send_message(message("streamed"))]
        kinds = [e.WhichOneof("payload") for e in events]
        expect(kinds[:1] == ["task"], "stream: the task first", kinds)
        streamed = "".join(t for e in events if e.HasField("artifact_update")
                           for t in texts(e.artifact_update.artifact.parts))
        expect(streamed == "streamed", "stream: the answer assembled", streamed)
        last = events[-1] if events else None
        expect(last is not None and last.HasField("status_update") and
               TaskState.Name(last.status_update.status.state) == "TASK_STATE_COMPLETED",
               "stream: completed last", kinds)
        await streaming.close()

        asked = await send(plain, message("ask"))
        expect(state(asked) == "TASK_STATE_INPUT_REQUIRED", "multi-turn: input required",
               state(asked))
        expect(texts(asked.status.message.parts) == ["name?"], "multi-turn: the question",
               texts(asked.status.message.parts))
        answered = await send(plain, message("Ada", asked.id))
        expect(answered.id == asked.id and state(answered) == "TASK_STATE_COMPLETED",
               "multi-turn: the same task completed", (answered.id, state(answered)))
        answer = [t for a in answered.artifacts for t in texts(a.parts)]
        expect(answer == ["Ada"], "multi-turn: the second turn's answer", answer)

        waiting = await send(plain, message("ask"))
        canceled = await plain.cancel_task(CancelTaskRequest(id=waiting.id))
        expect(state(canceled) == "TASK_STATE_CANCELED", "cancel: canceled", state(canceled))
        await plain.close()

    a2a = [(m, p, v) for m, p, v in wire if not p.startswith("/.well-known/")]
    expect(a2a and all(p != "/" for _, p, _ in a2a), "wire: no JSON-RPC", a2a[:3])
    prefixed = all(p.startswith("/v1/") for _, p, _ in a2a)
    expect(prefixed if legacy else not any(p.startswith("/v1/") for _, p, _ in a2a),
           "wire: the generation's paths", sorted({p for _, p, _ in a2a}))
    versions = {v for _, _, v in a2a}
    expect(versions <= ({None, "0.3"} if legacy else {"1.0"}), "wire: A2A-Version", versions)
    summary = {"ok": not problems, "transport": transport, "checked": len(done),
               "requests": len(a2a)}
    if problems:
        summary["problems"] = problems
    return summary


if __name__ == "__main__":
    args = sys.argv[1:]
    where = next(a for a in args if not a.startswith("--"))
    door = where if where.startswith("http") else f"http://{where}/"
    try:
        result = asyncio.run(run(door, "--legacy" in args))
    except Exception as e:  # noqa: BLE001  reported, not raised: the Rust test reads the line
        result = {"ok": False, "problems": [f"{type(e).__name__}: {e}"]}
    print(json.dumps(result))
    sys.exit(0 if result["ok"] else 1)
