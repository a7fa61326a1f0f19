#!/usr/bin/env python3
"""Talk to a mur door with the official A2A Python SDK (a2a-sdk 1.x), over A2A 1.0, and check it.

    a2a_client_v1.py URL [--text TEXT] [--session-id SES] [--token-stdin]
    a2a_client_v1.py URL --stream [--text TEXT]
    a2a_client_v1.py URL --cancel PID_FILE [--text TEXT]

URL is the door (`127.0.0.1:PORT` as `mur run --json` prints it, or `http://127.0.0.1:PORT/`).
A bearer token, when the door needs one, is read from the first line of stdin (`--token-stdin`)
or from the environment variable MUR_A2A_TOKEN -- never from argv.

The door serves A2A 0.3 and 1.0 at one URL; a2a-sdk 1.x speaks both (its 0.3 side is the
`CompatJsonRpcTransport` fallback). This script holds the SDK to its native 1.0 JSON-RPC
transport: the card's first JSONRPC interface must be `1.0`, the client `ClientFactory` builds
must be the SDK's `JsonRpcTransport` (not the compat one), and on the wire every request must
carry `A2A-Version: 1.0` and every call a 1.0 method name (`SendMessage`, `GetTask`, ...).

What it does, all through the SDK's own client code:
  1. `A2ACardResolver` fetches `/.well-known/agent-card.json` and parses it as the 1.0
     `AgentCard` (protobuf).
  2. A non-streaming JSON-RPC client from `ClientFactory` sends one text message (`SendMessage`);
     the answer must be a TASK_STATE_COMPLETED `Task` whose artifact and status message carry
     the text sent (the default capsule, echo, answers with the task's text).
  3. `GetTask` fetches it back and `ListTasks` lists it; `GetTask` of an unknown id must raise
     the SDK's `TaskNotFoundError` (-32001) and `CancelTask` of the finished task its
     `TaskNotCancelableError` (-32002).
  4. With a token: the public card must declare an http bearer scheme as its security
     requirement and `capabilities.extendedAgentCard`, and no capsule extension; a client
     without credentials must be refused with 401; the authenticated client gets its bearer
     from the SDK's `AuthInterceptor` reading an `InMemoryContextCredentialStore`, and
     `get_extended_agent_card` (`GetExtendedAgentCard`) must return the capsule extension
     naming the session.
  5. The wire, watched through httpx event hooks: every request carries `A2A-Version: 1.0`;
     every JSON-RPC answer is JSON-RPC 2.0 echoing its request's id, in ProtoJSON (no `kind`,
     `TASK_STATE_*`, `SendMessage` answering `{"task": ...}`), every error's `data` an array
     holding a `google.rpc.ErrorInfo`.

With `--stream` it instead sends the text with the SDK's streaming call (a client with
`streaming=True`, still the native `JsonRpcTransport`: `SendStreamingMessage`) and reports every
`StreamResponse` `send_message` yields as it comes (`a2a_common.stream_events`: a line each, at
once, and the first chunk once more on a line of its own); on the wire, `A2A-Version: 1.0` and
every event ProtoJSON (one `StreamResponse` member), JSON-RPC 2.0 echoing the request's id.

With `--cancel PID_FILE` it sends the text with `ClientConfig(polling=True)` (`SendMessage` with
`returnImmediately: true`) to a slow handler that writes its child's pid to PID_FILE, waits until
`GetTask` says TASK_STATE_WORKING, cancels with `cancel_task` (`CancelTask`) and reports the
state the SDK returns, whether that pid is gone the moment the answer came, and the state
`GetTask` reads right after (the Rust test holds these to TASK_STATE_CANCELED).

It prints one JSON line (last; with `--stream` after the event lines): `{"ok": true, ...summary}` or `{"ok": false, "error"|"mismatch": ...}`
(exit 1). The token never appears in its output.
"""

import sys
import uuid

from a2a.client import (
    A2ACardResolver,
    A2AClientError,
    AuthInterceptor,
    ClientCallContext,
    ClientConfig,
    ClientFactory,
    InMemoryContextCredentialStore,
)
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
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
from google.protobuf.json_format import MessageToDict

from a2a_common import (
    CAPSULE_EXTENSION_URI,
    CREDENTIAL_SESSION,
    UNKNOWN_TASK,
    Checks,
    Mismatch,
    Wire,
    handler_pid,
    main,
    process_left,
    stream_events,
    summary_of,
    until_state,
    watched_http,
)

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
STREAM_RESPONSE = {"task", "message", "statusUpdate", "artifactUpdate"}
METHODS_1_0 = {"SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask",
               "SubscribeToTask", "GetExtendedAgentCard"}


def kinds(value, path="result"):
    """Where a 0.3 `kind` member hides in `value` (1.0 has none)."""
    if isinstance(value, dict):
        found = [f"{path}.kind"] if "kind" in value else []
        for key, inner in value.items():
            found += kinds(inner, f"{path}.{key}")
        return found
    if isinstance(value, list):
        return [k for i, inner in enumerate(value) for k in kinds(inner, f"{path}[{i}]")]
    return []


def states(value):
    """Every `status.state` in `value`."""
    if isinstance(value, dict):
        found = [value["status"]["state"]] if isinstance(value.get("status"), dict) \
            and "state" in value["status"] else []
        return found + [s for inner in value.values() for s in states(inner)]
    if isinstance(value, list):
        return [s for inner in value for s in states(inner)]
    return []


class Wire1(Wire):
    """The wire watch, and 1.0's ProtoJSON shapes in every answer."""

    def check_shapes(self, method, answer, entry):
        if "error" in answer:
            error = answer["error"]
            entry["error"] = error.get("code")
            data = error.get("data")
            if not (isinstance(data, list) and any(isinstance(d, dict) and
                                                   d.get("@type") == ERROR_INFO for d in data)):
                self.problems.append(f"{method}: error {error.get('code')} data is not an array "
                                     f"holding a google.rpc.ErrorInfo: {data!r}")
            return
        result = answer.get("result")
        self.problems += [f"{method}: 0.3 member {k}" for k in kinds(result)]
        self.problems += [f"{method}: state {s!r} is not TASK_STATE_*" for s in states(result)
                          if not str(s).startswith("TASK_STATE_")]
        if method == "SendMessage" and not (isinstance(result, dict) and
                                            set(result) & {"task", "message"}):
            self.problems.append(f"SendMessage: the result is not {{task}} or {{message}}: "
                                 f"{sorted(result) if isinstance(result, dict) else result!r}")
        if method == "SendStreamingMessage" and not (isinstance(result, dict) and
                                                     len(set(result) & STREAM_RESPONSE) == 1):
            self.problems.append(f"SendStreamingMessage: an event is not one StreamResponse "
                                 f"member: {result!r}")


def texts(parts):
    """The text of the text parts among `parts` (protobuf `Part`s)."""
    return [p.text for p in parts if p.WhichOneof("content") == "text"]


def session_of(card):
    for ext in card.capabilities.extensions:
        if ext.uri == CAPSULE_EXTENSION_URI:
            return MessageToDict(ext.params).get("sessionId")
    return None


def check_task(c, task, text, label):
    c.expect(task.status.state == TaskState.TASK_STATE_COMPLETED, f"{label}: the task completed",
             TaskState.Name(task.status.state))
    c.expect(task.id and task.context_id, f"{label}: the task has an id and a contextId")
    artifact_text = [t for a in task.artifacts for t in texts(a.parts)]
    c.expect(artifact_text == [text], f"{label}: the artifact carries the answer", artifact_text)
    status_text = texts(task.status.message.parts)
    c.expect(status_text == [text], f"{label}: the status message carries the answer",
             status_text)
    history = [t for m in task.history for t in texts(m.parts)]
    c.expect(text in history, f"{label}: the history holds the message sent", history)


def text_message(text):
    return SendMessageRequest(message=Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)]))


async def send(client, text, context):
    """`SendMessage`, blocking: exactly one event, the finished task."""
    events = [e async for e in client.send_message(text_message(text), context=context)]
    if len(events) != 1 or not events[0].HasField("task"):
        raise Mismatch(f"SendMessage: one task event (got {[MessageToDict(e) for e in events]})")
    return events[0].task


def check_card(c, card, url, summary):
    jsonrpc = [i for i in card.supported_interfaces if i.protocol_binding == "JSONRPC"]
    summary["card"] = {"name": card.name, "version": card.version,
                       "interfaces": [f"{i.protocol_binding} {i.protocol_version} {i.url}"
                                      for i in card.supported_interfaces]}
    c.expect(jsonrpc and jsonrpc[0].protocol_version == "1.0",
             "card: the first JSONRPC interface is 1.0", summary["card"]["interfaces"])
    c.expect(jsonrpc[0].url.rstrip("/") == url.rstrip("/"), "card: the 1.0 interface is the door",
             jsonrpc[0].url)
    c.expect(len(card.skills) >= 1, "card: at least one skill")


async def factory_and_card(c, http, url, summary, streaming):
    """The SDK's `ClientFactory` for `http` (it sets its own A2A-Version header, 1.0, on that
    shared httpx client), and the door's card, checked."""
    config = ClientConfig(httpx_client=http, streaming=streaming,
                          supported_protocol_bindings=[TransportProtocol.JSONRPC])
    factory = ClientFactory(config)
    card = await A2ACardResolver(http, url).get_agent_card()
    check_card(c, card, url, summary)
    return factory, card


async def refused_without_credentials(c, factory, card, text):
    """The SDK without credentials is refused with 401, before any task exists."""
    anonymous = factory.create(card)
    try:
        await send(anonymous, text, None)
        raise Mismatch("an unauthenticated SendMessage was accepted")
    except A2AClientError as e:
        status = getattr(getattr(e.__cause__, "response", None), "status_code", None)
        c.expect(status == 401, "no credentials: HTTP 401", f"{type(e).__name__}: {e}")
    await anonymous.close()


async def authenticate(c, factory, card, text, summary):
    """Check the public card of an authenticated door; the SDK's own auth path for `token`."""
    c.expect(card.capabilities.extended_agent_card, "public card: capabilities.extendedAgentCard")
    c.expect(session_of(card) is None, "public card: no capsule extension", session_of(card))
    required = [name for req in card.security_requirements for name in req.schemes]
    c.expect(bool(required), "public card: a security requirement",
             MessageToDict(card).get("securityRequirements"))
    scheme = required[0]
    c.expect(scheme in card.security_schemes and
             card.security_schemes[scheme].HasField("http_auth_security_scheme") and
             card.security_schemes[scheme].http_auth_security_scheme.scheme.lower() == "bearer",
             "public card: the required scheme is http bearer",
             MessageToDict(card).get("securitySchemes"))
    summary["security_scheme"] = scheme
    await refused_without_credentials(c, factory, card, text)


async def errors(c, client, task, context):
    """The A2A error codes reach the SDK as its own error types."""
    try:
        await client.get_task(GetTaskRequest(id=UNKNOWN_TASK), context=context)
        raise Mismatch("GetTask of an unknown task succeeded")
    except TaskNotFoundError:
        c.expect(True, "GetTask unknown: TaskNotFoundError (-32001)")
    try:
        await client.cancel_task(CancelTaskRequest(id=task.id), context=context)
        raise Mismatch("CancelTask of a finished task succeeded")
    except TaskNotCancelableError:
        c.expect(True, "CancelTask finished: TaskNotCancelableError (-32002)")


def check_transport(c, client, summary):
    """The client `ClientFactory` made speaks 1.0 natively."""
    transport = type(client._transport)  # noqa: SLF001  which transport the factory chose
    summary["transport"] = transport.__name__
    c.expect(transport is JsonRpcTransport, "the native 1.0 JsonRpcTransport, not the compat one",
             f"{transport.__module__}.{transport.__name__}")


def check_wire(c, wire, token):
    c.expect(wire.versions == {"1.0"}, "wire: every request carried A2A-Version: 1.0",
             sorted(map(str, wire.versions)))
    methods = {x["method"] for x in wire.exchanges}
    c.expect(methods <= METHODS_1_0, "wire: only 1.0 method names", sorted(map(str, methods)))
    if token is not None:
        wire.check_credentials(c)


async def run(url, text, token, want_session):
    c = Checks()
    wire = Wire1()
    summary = summary_of(url, "1.0", authenticated=token is not None)
    async with watched_http(wire) as http:
        factory, card = await factory_and_card(c, http, url, summary, streaming=False)
        context = None
        interceptors = []
        if token is not None:
            await authenticate(c, factory, card, text, summary)
            store = InMemoryContextCredentialStore()
            await store.set_credentials(CREDENTIAL_SESSION, summary["security_scheme"], token)
            context = ClientCallContext(state={"sessionId": CREDENTIAL_SESSION})
            interceptors = [AuthInterceptor(store)]
        else:
            c.expect(not card.capabilities.extended_agent_card,
                     "public door: no extended card declared")
            c.expect(session_of(card) == want_session if want_session else session_of(card),
                     "public card: the capsule extension names the session", session_of(card))
            summary["session_id"] = session_of(card)

        client = factory.create(card, interceptors=interceptors)
        check_transport(c, client, summary)

        task = await send(client, text, context)
        check_task(c, task, text, "SendMessage")
        summary["task"] = {"id": task.id, "contextId": task.context_id,
                           "state": TaskState.Name(task.status.state),
                           "answer": texts(task.artifacts[0].parts)[0]}
        again = await client.get_task(GetTaskRequest(id=task.id), context=context)
        check_task(c, again, text, "GetTask")
        c.expect((again.id, again.context_id) == (task.id, task.context_id),
                 "GetTask: the same task", (again.id, again.context_id))
        listed = await client.list_tasks(ListTasksRequest(), context=context)
        c.expect(task.id in [t.id for t in listed.tasks], "ListTasks: the task is listed",
                 [t.id for t in listed.tasks])
        await errors(c, client, task, context)

        if token is not None:
            extended = await client.get_extended_agent_card(GetExtendedAgentCardRequest(),
                                                            context=context)
            sid = session_of(extended)
            c.expect(sid == want_session if want_session else sid,
                     "extended card: the capsule extension names the session", sid)
            summary["session_id"] = sid
            c.expect(any(x["method"] == "GetExtendedAgentCard" and x["status"] == 200
                         for x in wire.exchanges), "extended card: fetched by GetExtendedAgentCard")
            summary["extended_card"] = True
        await client.close()

    check_wire(c, wire, token)
    return wire.finish(c, summary)


def event_of(event):
    """One `StreamResponse` of the stream, as `stream_events` reports it."""
    which = event.WhichOneof("payload")
    if which == "task":
        return "task", {"state": TaskState.Name(event.task.status.state), "id": event.task.id}
    if which == "status_update":
        return "status", {"state": TaskState.Name(event.status_update.status.state)}
    if which == "artifact_update":
        update = event.artifact_update
        return "artifact", {"text": "".join(texts(update.artifact.parts)),
                            "append": update.append, "last": update.last_chunk}
    if which == "message":
        return "message", {"text": "".join(texts(event.message.parts))}
    return str(which), {}


async def stream(url, text, _token, _want_session):
    """`--stream`: `SendStreamingMessage` through the SDK's streaming client."""
    c = Checks()
    wire = Wire1()
    summary = summary_of(url, "1.0", mode="stream")
    async with watched_http(wire) as http:
        factory, card = await factory_and_card(c, http, url, summary, streaming=True)
        c.expect(card.capabilities.streaming, "card: capabilities.streaming")
        client = factory.create(card)
        check_transport(c, client, summary)
        summary["events"] = await stream_events(client.send_message(text_message(text)),
                                                event_of)
        await client.close()
    check_wire(c, wire, None)
    return wire.finish(c, summary)


async def cancel(url, text, pid_file):
    """`--cancel`: a running task canceled through `cancel_task` (`CancelTask`)."""
    c = Checks()
    wire = Wire1()
    summary = summary_of(url, "1.0", mode="cancel")
    async with watched_http(wire) as http:
        config = ClientConfig(httpx_client=http, streaming=False, polling=True,
                              supported_protocol_bindings=[TransportProtocol.JSONRPC])
        factory = ClientFactory(config)
        card = await A2ACardResolver(http, url).get_agent_card()
        check_card(c, card, url, summary)
        client = factory.create(card)
        check_transport(c, client, summary)
        task = await send(client, text, None)
        pid = await handler_pid(pid_file)

        async def state():
            got = await client.get_task(GetTaskRequest(id=task.id))
            return TaskState.Name(got.status.state)

        running = await until_state(state, "TASK_STATE_WORKING")
        canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
        left = process_left(pid)
        c.expect(canceled.id == task.id, "CancelTask: the task back", MessageToDict(canceled))
        summary["cancel"] = {"id": task.id, "sent": TaskState.Name(task.status.state),
                             "running": running, "returned": TaskState.Name(canceled.status.state),
                             "handler_left": left, "after": await state()}
        await client.close()
    check_wire(c, wire, None)
    return wire.finish(c, summary)


if __name__ == "__main__":
    sys.exit(main(__doc__, run, stream, cancel))
