#!/usr/bin/env python3
"""Talk to a mur door with the official A2A Python SDK (a2a-sdk 0.3.x) and check every answer.

    a2a_client.py URL [--text TEXT] [--session-id SES] [--token-stdin]
    a2a_client.py URL --stream [--text TEXT]
    a2a_client.py URL --cancel PID_FILE [--text TEXT]

URL is the door (`127.0.0.1:PORT` as `mur run --json` prints it, or `http://127.0.0.1:PORT/`).
A bearer token, when the door needs one, is read from the first line of stdin (`--token-stdin`)
or from the environment variable MUR_A2A_TOKEN -- never from argv.

What it does, all through the SDK's own client code:
  1. `A2ACardResolver` fetches `/.well-known/agent-card.json` and validates it as an `AgentCard`.
  2. A JSON-RPC `Client` from `ClientFactory` (non-streaming, JSONRPC transport) sends one text
     message; the answer must be a completed `Task` whose artifact and status message carry the
     text sent (the default capsule, echo, answers with the task's text).
  3. `tasks/get` fetches that task back; `tasks/get` of an unknown id must be JSON-RPC -32001 and
     `tasks/cancel` of the finished task -32002.
  4. With a token: the public card must declare an http bearer scheme and
     `supportsAuthenticatedExtendedCard`, a client without credentials must be refused with 401,
     and the authenticated client gets its bearer from the SDK's `AuthInterceptor` reading an
     `InMemoryContextCredentialStore`; `Client.get_card` then fetches the authenticated extended
     card (`agent/getAuthenticatedExtendedCard`), which must name the session.
Every JSON-RPC exchange is also watched on the wire (httpx event hooks): the response must be
`application/json` and echo the request's id.

With `--stream` it instead sends the text with the SDK's streaming call (a `Client` with
`streaming=True`: `message/stream`) and reports every event `send_message` yields as it comes
(`a2a_common.stream_events`: a line each, at once, and the first chunk once more on a line of
its own), the answer the SDK's own task manager assembled from the chunks, and each event on the
wire (JSON-RPC 2.0 echoing the request's id; the stream read only as the SDK reads it).

With `--cancel PID_FILE` it sends the text without blocking (`ClientConfig(polling=True)`, so
`message/send` with `blocking: false`) to a slow handler that writes its child's pid to
PID_FILE, waits until `tasks/get` says `working`, cancels the task with `Client.cancel_task`
and reports the state the SDK returns, whether that pid is gone the moment the answer came, and
the state `tasks/get` reads right after (the Rust test holds these to `canceled`).

Prints one JSON summary line on stdout (last; with `--stream` after the event lines); exit 0
only if every check held, 1 otherwise.
"""

import sys

from a2a.client import (
    A2ACardResolver,
    AuthInterceptor,
    ClientCallContext,
    ClientConfig,
    ClientFactory,
    InMemoryContextCredentialStore,
    create_text_message_object,
)
from a2a.client.errors import A2AClientHTTPError, A2AClientJSONRPCError
from a2a.types import (
    HTTPAuthSecurityScheme,
    Message,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskQueryParams,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
    TransportProtocol,
)

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


def texts(parts):
    """The text of the text parts among `parts` (SDK `Part` wrappers)."""
    return [p.root.text for p in parts or [] if isinstance(p.root, TextPart)]


def session_of(card):
    for ext in card.capabilities.extensions or []:
        if ext.uri == CAPSULE_EXTENSION_URI:
            return (ext.params or {}).get("sessionId")
    return None


def check_task(c, task, text, label):
    c.expect(isinstance(task, Task), f"{label}: the result is a Task", type(task).__name__)
    c.expect(task.status.state == TaskState.completed, f"{label}: the task completed",
             task.status.state)
    c.expect(task.id and task.context_id, f"{label}: the task has an id and a contextId")
    artifact_text = [t for a in task.artifacts or [] for t in texts(a.parts)]
    c.expect(artifact_text == [text], f"{label}: the artifact carries the answer", artifact_text)
    status_text = texts(task.status.message.parts) if task.status.message else []
    c.expect(status_text == [text], f"{label}: the status message carries the answer",
             status_text)
    history = [t for m in task.history or [] for t in texts(m.parts)]
    c.expect(text in history, f"{label}: the history holds the message sent", history)


async def run(url, text, token, want_session):
    c = Checks()
    wire = Wire()
    summary = summary_of(url, "0.3", authenticated=token is not None)
    async with watched_http(wire) as http:
        # 1. The public card, through the SDK's resolver (pydantic-validated as an AgentCard).
        card = await A2ACardResolver(http, url).get_agent_card()
        summary["card"] = {"name": card.name, "version": card.version, "url": card.url,
                           "protocolVersion": card.protocol_version,
                           "preferredTransport": card.preferred_transport}
        c.expect(card.protocol_version == "0.3.0", "card: protocolVersion 0.3.0",
                 card.protocol_version)
        c.expect(card.preferred_transport == TransportProtocol.jsonrpc.value,
                 "card: preferredTransport JSONRPC", card.preferred_transport)
        c.expect(card.url.rstrip("/") == url.rstrip("/"), "card: url is the door", card.url)
        c.expect(card.capabilities.streaming is True, "card: streaming true",
                 card.capabilities.streaming)
        c.expect(len(card.skills) >= 1, "card: at least one skill")

        config = ClientConfig(httpx_client=http, streaming=False,
                              supported_transports=[TransportProtocol.jsonrpc])
        factory = ClientFactory(config)
        context = None
        interceptors = []
        if token is not None:
            c.expect(bool(card.supports_authenticated_extended_card),
                     "public card: supportsAuthenticatedExtendedCard")
            c.expect(session_of(card) is None, "public card: no capsule extension",
                     session_of(card))
            schemes = card.security_schemes or {}
            required = [name for req in card.security or [] for name in req]
            c.expect(bool(required), "public card: a security requirement", card.security)
            scheme = required[0]
            c.expect(scheme in schemes and isinstance(schemes[scheme].root, HTTPAuthSecurityScheme)
                     and schemes[scheme].root.scheme.lower() == "bearer",
                     "public card: the required scheme is http bearer",
                     {k: v.root.model_dump(mode="json") for k, v in schemes.items()})
            summary["security_scheme"] = scheme

            # Without credentials the SDK must be refused with 401, before any task exists.
            anonymous = factory.create(card)
            try:
                async for _ in anonymous.send_message(create_text_message_object(content=text)):
                    pass
                raise Mismatch("an unauthenticated message/send was accepted")
            except A2AClientHTTPError as e:
                c.expect(e.status_code == 401, "no credentials: HTTP 401", e.status_code)

            # The bearer goes through the SDK's own auth path: AuthInterceptor asks the
            # credential store for the scheme the card requires, for this call's context.
            store = InMemoryContextCredentialStore()
            await store.set_credentials(CREDENTIAL_SESSION, scheme, token)
            context = ClientCallContext(state={"sessionId": CREDENTIAL_SESSION})
            interceptors = [AuthInterceptor(store)]
        else:
            c.expect(not card.supports_authenticated_extended_card,
                     "public door: no extended card declared")
            c.expect(session_of(card) is not None, "public card: the capsule extension",
                     card.capabilities.extensions)
            if want_session:
                c.expect(session_of(card) == want_session, "public card: names the session",
                         session_of(card))
            summary["session_id"] = session_of(card)

        client = factory.create(card, interceptors=interceptors)

        # 2. message/send, blocking: exactly one event, the finished task.
        events = []
        async for event in client.send_message(create_text_message_object(content=text),
                                               context=context):
            events.append(event)
        c.expect(len(events) == 1, "message/send: one event", len(events))
        event = events[0]
        c.expect(not isinstance(event, Message), "message/send: a task, not a message")
        task, update = event
        c.expect(update is None, "message/send: no update event", update)
        check_task(c, task, text, "message/send")
        answer = texts(task.artifacts[0].parts)[0]
        summary["task"] = {"id": task.id, "contextId": task.context_id,
                           "state": task.status.state.value, "answer": answer}

        # 3. tasks/get: the same task back.
        again = await client.get_task(TaskQueryParams(id=task.id), context=context)
        check_task(c, again, text, "tasks/get")
        c.expect(again.id == task.id and again.context_id == task.context_id,
                 "tasks/get: the same task", (again.id, again.context_id))

        # The A2A error codes reach the SDK as JSON-RPC errors.
        try:
            await client.get_task(TaskQueryParams(id=UNKNOWN_TASK), context=context)
            raise Mismatch("tasks/get of an unknown task succeeded")
        except A2AClientJSONRPCError as e:
            c.expect(e.error.code == -32001, "tasks/get unknown: -32001", e.error.code)
        try:
            await client.cancel_task(TaskIdParams(id=task.id), context=context)
            raise Mismatch("tasks/cancel of a finished task succeeded")
        except A2AClientJSONRPCError as e:
            c.expect(e.error.code == -32002, "tasks/cancel finished: -32002", e.error.code)

        # 4. The authenticated extended card, through Client.get_card.
        if token is not None:
            extended = await client.get_card(context=context)
            sid = session_of(extended)
            c.expect(sid is not None, "extended card: the capsule extension",
                     extended.capabilities.extensions)
            if want_session:
                c.expect(sid == want_session, "extended card: names the session", sid)
            c.expect(extended.url == card.url, "extended card: the same door", extended.url)
            summary["session_id"] = sid
            summary["extended_card"] = True
            wire.check_credentials(c)

        await client.close()

    return wire.finish(c, summary)


def event_of(event):
    """One event `send_message` yields while streaming, as `stream_events` reports it."""
    if isinstance(event, Message):
        return "message", {"text": "".join(texts(event.parts))}
    task, update = event
    if update is None:
        return "task", {"state": task.status.state.value, "id": task.id}
    if isinstance(update, TaskStatusUpdateEvent):
        return "status", {"state": update.status.state.value, "final": update.final}
    if isinstance(update, TaskArtifactUpdateEvent):
        return "artifact", {"text": "".join(texts(update.artifact.parts)),
                            "append": bool(update.append), "last": bool(update.last_chunk)}
    return type(update).__name__, {}


async def stream(url, text, _token, _want_session):
    """`--stream`: `message/stream` through the SDK's streaming `Client`."""
    c = Checks()
    wire = Wire()
    summary = summary_of(url, "0.3", mode="stream")
    async with watched_http(wire) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        summary["card"] = {"name": card.name, "version": card.version, "url": card.url}
        c.expect(card.capabilities.streaming is True, "card: streaming true",
                 card.capabilities.streaming)
        config = ClientConfig(httpx_client=http, streaming=True,
                              supported_transports=[TransportProtocol.jsonrpc])
        client = ClientFactory(config).create(card)
        tasks = []

        def seen(event):
            if not isinstance(event, Message):
                tasks.append(event[0])
            return event_of(event)

        message = create_text_message_object(content=text)
        summary["events"] = await stream_events(client.send_message(message), seen)
        # What the SDK's ClientTaskManager made of the chunks (append after the first).
        if tasks:
            summary["sdk_answer"] = "".join(t for a in tasks[-1].artifacts or []
                                            for t in texts(a.parts))
        await client.close()
    return wire.finish(c, summary)


async def cancel(url, text, pid_file):
    """`--cancel`: a running task canceled through `Client.cancel_task`."""
    c = Checks()
    wire = Wire()
    summary = summary_of(url, "0.3", mode="cancel")
    async with watched_http(wire) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        summary["card"] = {"name": card.name, "version": card.version, "url": card.url}
        config = ClientConfig(httpx_client=http, streaming=False, polling=True,
                              supported_transports=[TransportProtocol.jsonrpc])
        client = ClientFactory(config).create(card)
        events = [e async for e in client.send_message(create_text_message_object(content=text))]
        c.expect(len(events) == 1 and not isinstance(events[0], Message),
                 "message/send, not blocking: one task", events)
        task = events[0][0]
        pid = await handler_pid(pid_file)

        async def state():
            got = await client.get_task(TaskQueryParams(id=task.id))
            return got.status.state.value

        running = await until_state(state, TaskState.working.value)
        canceled = await client.cancel_task(TaskIdParams(id=task.id))
        left = process_left(pid)
        c.expect(isinstance(canceled, Task) and canceled.id == task.id,
                 "tasks/cancel: the task back", canceled)
        summary["cancel"] = {"id": task.id, "sent": task.status.state.value, "running": running,
                             "returned": canceled.status.state.value,
                             "handler_left": left, "after": await state()}
        await client.close()
    return wire.finish(c, summary)


if __name__ == "__main__":
    sys.exit(main(__doc__, run, stream, cancel))
