#!/usr/bin/env python3
"""Talk to a mur door with the official A2A Python SDK (a2a-sdk 1.x) forced onto its HTTP+JSON
(REST) transport, and check it.

    a2a_rest.py URL [--legacy]

URL is the door (`127.0.0.1:PORT`). The door must run the "asker" handler of tests/it/rest.rs:
it answers with the text it got, except that a first turn whose text is `ask` asks `name?`
(input required), `slow` is answered after a second, and a message saying `parts` is answered with the message it got
(`received.json`, a data part) and a note (`note.txt`, a file part); its manifest must allow
push notifications to 127.0.0.1.

The client comes from the SDK's own `ClientFactory` with `supported_protocol_bindings` holding
only `HTTP+JSON`: it must pick the card's HTTP+JSON interface and build the SDK's native 1.0
`RestTransport` — or, with `--legacy`, given a card whose only HTTP+JSON interface is the 0.3
one, the SDK's `CompatRestTransport`, which speaks 0.3's `/v1` paths and proto JSON. Through it:
send (completed, the text echoed), get, list (1.0 only: 0.3 has no ListTasks), the errors as
the SDK's own types (an unknown task's TaskNotFoundError, a finished task's
TaskNotCancelableError), a streamed send (the task, its events, completed), a multi-turn task
(input required, then completed with the second turn's text), a task waiting for input
canceled, a resubscription to a task still working (sent without waiting: `slow` sleeps a
second) that sees it complete,
a file and a data part sent and got back, and push notifications to a receiver of the
driver's own: a config given with a send, and one created, read, listed and deleted through
the SDK for a task waiting for input (in 0.3 not listed or deleted: the SDK's 0.3 REST
transport cannot), each receiving every update of its task with its token
(1.0: `StreamResponse`s; 0.3: the task). On the wire, watched through httpx's event hooks: no request to `/` (no JSON-RPC),
every A2A call at a REST path of its generation with its `A2A-Version`.

It prints one JSON line: `{"ok": true, ...}` or `{"ok": false, "problems": [...]}` (exit 1).
"""

import asyncio
import base64
import json
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

UNKNOWN_TASK = "tsk_0190f0f0f0f07000800000000000abcd"


def message(text, task_id=None):
    msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        msg.task_id = task_id
    return SendMessageRequest(message=msg)


class Receiver:
    """A webhook receiver on 127.0.0.1: every POST it gets, as (headers, JSON body), answered
    200."""

    def __init__(self):
        self.posts = []
        self.server = None

    async def start(self):
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/hook"

    async def serve(self, reader, writer):
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                lines = head.split("\r\n")
                headers = {k.strip().lower(): v.strip()
                           for k, _, v in (line.partition(":") for line in lines[1:] if line)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.posts.append((lines[0], headers, json.loads(body)))
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def updates(self, task_id):
        """(token, state or None, the answer's text, whether the update is the whole task) of
        each update delivered for `task_id`: 1.0 posts a `StreamResponse` (an artifact update
        holds one chunk of the answer), 0.3 the task itself."""
        seen = []
        for _, headers, body in self.posts:
            token = headers.get("x-a2a-notification-token")
            update = body.get("statusUpdate") or body.get("artifactUpdate") or body.get("task")
            whole = update is None or "task" in body
            update = update or body
            artifacts = [update["artifact"]] if "artifact" in update else update.get(
                "artifacts", [])
            text = "".join(p["text"] for a in artifacts for p in a.get("parts", []) if "text" in p)
            if (update.get("taskId") or update.get("id")) == task_id:
                seen.append((token, update.get("status", {}).get("state"), text, whole))
        return seen

    async def until_ended(self, task_id, seconds=15):
        """The updates of `task_id` once one says it completed (or what came, at the deadline)."""
        for _ in range(int(seconds / 0.05)):
            if any(s in ("TASK_STATE_COMPLETED", "completed") for _, s, _, _ in
                   self.updates(task_id)):
                break
            await asyncio.sleep(0.05)
        return self.updates(task_id)


def check_pushed(expect, updates, token, answer, label):
    """Every update of one task reached the receiver: each with its config's token, the task
    working, its answer (1.0: the chunks assembled; 0.3: as the last task shows it), and
    completed last."""
    states = [s for _, s, _, _ in updates if s]
    chunks = "".join(t for _, _, t, whole in updates if not whole)
    tasks = [t for _, _, t, whole in updates if whole]
    got = tasks[-1] if tasks and not chunks else chunks
    expect(updates and all(t == token for t, _, _, _ in updates), f"{label}: the token", updates)
    expect(any(s in ("TASK_STATE_WORKING", "working") for s in states), f"{label}: working",
           states)
    expect(got == answer, f"{label}: the answer", got)
    expect(states[-1:] in (["TASK_STATE_COMPLETED"], ["completed"]), f"{label}: completed last",
           states)


def texts(parts):
    return [p.text for p in parts if p.WhichOneof("content") == "text"]


def state(task):
    return TaskState.Name(task.status.state)


def check_stream(expect, events, answer, label):
    """A task's stream: the task first, its chunks assembled to `answer`, completed last."""
    kinds = [e.WhichOneof("payload") for e in events]
    expect(kinds[:1] == ["task"], f"{label}: the task first", kinds)
    got = "".join(t for e in events if e.HasField("artifact_update")
                  for t in texts(e.artifact_update.artifact.parts))
    expect(got == answer, f"{label}: the answer assembled", got)
    last = events[-1] if events else None
    expect(last is not None and last.HasField("status_update") and
           TaskState.Name(last.status_update.status.state) == "TASK_STATE_COMPLETED",
           f"{label}: completed last", kinds)


async def resubscribe(expect, plain, streaming, send):
    """A subscriber to a task still working (sent without waiting) sees the task first, its
    answer and its completion."""
    request = message("slow")
    request.configuration.return_immediately = True
    working = await send(plain, request)
    events = [e async for e in streaming.subscribe(SubscribeToTaskRequest(id=working.id))]
    check_stream(expect, events, "slow", "resubscribe")
    await streaming.close()


async def parts(expect, plain, send, legacy):
    """A file and a data part go in and come back: the handler returns the message it got as
    `received.json` (a data part) and a note (a file part).

    The SDK's 0.3 REST transport puts a file's base64 text in the proto's `bytes` field
    (compat/v0_3/proto_utils.py: `file_with_bytes=file.bytes.encode('utf-8')`, read back with
    `.decode('utf-8')`), so on its wire a file is base64 twice over, where protobuf's JSON — and
    @a2a-js/sdk, and mur — have it once: through it the handler gets the file's base64 text, and
    the SDK decodes mur's file a second time. Both are checked as exactly that."""
    data = struct_pb2.Value()
    data.struct_value.update({"k": [1, 2]})
    msg = message("parts").message
    msg.parts.append(Part(raw=b"\x00\x01bin", filename="bin.dat",
                          media_type="application/octet-stream"))
    msg.parts.append(Part(data=data))
    task = await send(plain, SendMessageRequest(message=msg))
    got = [p for a in task.artifacts for p in a.parts]
    kinds = [p.WhichOneof("content") for p in got]
    expect(state(task) == "TASK_STATE_COMPLETED" and "data" in kinds and "raw" in kinds,
           "parts: a data and a file part back", (state(task), kinds))
    received = next((p.data for p in got if p.WhichOneof("content") == "data"), None)
    sent = MessageToDict(received).get("parts", []) if received is not None else []
    raw = base64.b64encode(b"AAFiaW4=").decode() if legacy else "AAFiaW4="
    expect(any(p.get("filename") == "bin.dat" and p.get("raw") == raw for p in sent)
           and any(p.get("data") == {"k": [1, 2]} for p in sent),
           "parts: the file and the data as the handler got them", sent)
    note = next((p for p in got if p.WhichOneof("content") == "raw"), None)
    back = base64.b64decode("got parts\n") if legacy else b"got parts\n"
    expect(note is not None and note.filename == "note.txt" and note.raw == back,
           "parts: the handler's file", note and (note.filename, note.raw))


async def push(expect, plain, send, client, http, card, legacy):
    """Webhooks: a config given with a send, and one created through the SDK for a task waiting
    for input, read, listed, then deleted; each receives every update of its task."""
    receiver = Receiver()
    url = await receiver.start()
    config = ClientConfig(httpx_client=http, streaming=False,
                          supported_protocol_bindings=[TransportProtocol.HTTP_JSON],
                          push_notification_config=TaskPushNotificationConfig(
                              url=url, token="given-with-the-send"))
    pushing = ClientFactory(config).create(card)
    task = await send(pushing, message("pushed"))
    check_pushed(expect, await receiver.until_ended(task.id), "given-with-the-send", "pushed",
                 "push with a send")
    await pushing.close()

    waiting = await send(plain, message("ask"))
    made = await plain.create_task_push_notification_config(TaskPushNotificationConfig(
        task_id=waiting.id, id="hook-1", url=url, token="set-for-the-task"))
    expect(made.id == "hook-1" and made.url == url, "push: the config set", (made.id, made.url))
    got = await plain.get_task_push_notification_config(
        GetTaskPushNotificationConfigRequest(task_id=waiting.id, id="hook-1"))
    expect(got.url == url, "push: the config read", got.url)
    if not legacy:  # the SDK's 0.3 REST transport has no list ("not supported in v0.3 REST")
        listed = await plain.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=waiting.id))
        expect([c.id for c in listed.configs] == ["hook-1"], "push: the config listed",
               [c.id for c in listed.configs])
    await send(plain, message("Di", waiting.id))
    check_pushed(expect, await receiver.until_ended(waiting.id), "set-for-the-task", "Di",
                 "push to a config set")
    if not legacy:  # nor a delete
        await plain.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=waiting.id, id="hook-1"))
        try:
            gone = await plain.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=waiting.id, id="hook-1"))
            expect(False, "push: the config deleted", gone.url)
        except TaskNotFoundError:
            expect(True, "push: the config deleted")
    others = {t for _, _, b in receiver.posts for t in [json.dumps(b)]
              if task.id not in t and waiting.id not in t}
    expect(not others, "push: no update of another task", len(others))
    receiver.server.close()


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
        check_stream(expect, events, "streamed", "stream")
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

        await resubscribe(expect, plain, client(True), send)
        await parts(expect, plain, send, legacy)
        await push(expect, plain, send, client, http, card, legacy)
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
