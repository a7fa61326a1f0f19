#!/usr/bin/env python3
"""Talk to a mur door with the official A2A Python SDK (a2a-sdk 0.3.x) and check every answer.

    a2a_client.py URL [--text TEXT] [--session-id SES] [--token-stdin]

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

Prints one JSON summary line on stdout; exit 0 only if every check held, 1 otherwise.
"""

import argparse
import asyncio
import json
import os
import sys
import traceback
from importlib.metadata import version as dist_version

import httpx

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
    TaskIdParams,
    TaskQueryParams,
    TaskState,
    TextPart,
    TransportProtocol,
)

CAPSULE_EXTENSION_URI = "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1"
CREDENTIAL_SESSION = "mur-sdk-interop"


class Mismatch(Exception):
    """A check that did not hold."""


class Checks:
    def __init__(self):
        self.passed = []

    def expect(self, condition, what, got=None):
        if not condition:
            raise Mismatch(f"{what} (got {got!r})" if got is not None else what)
        self.passed.append(what)


class Wire:
    """httpx event hooks: every JSON-RPC response must be JSON and carry its request's id."""

    def __init__(self):
        self.exchanges = []
        self.problems = []

    async def on_response(self, response):
        request = response.request
        if request.method != "POST":
            return
        await response.aread()
        try:
            sent = json.loads(request.content)
        except ValueError:
            sent = {}
        entry = {
            "method": sent.get("method"),
            "status": response.status_code,
            "authorization": "authorization" in request.headers,
        }
        self.exchanges.append(entry)
        if response.status_code != 200:
            entry["www_authenticate"] = response.headers.get("www-authenticate")
            return
        ctype = response.headers.get("content-type", "")
        if not ctype.startswith("application/json"):
            self.problems.append(f"{sent.get('method')}: content-type {ctype!r}")
        try:
            answer = json.loads(response.content)
        except ValueError:
            self.problems.append(f"{sent.get('method')}: the body is not JSON")
            return
        if answer.get("jsonrpc") != "2.0":
            self.problems.append(f"{sent.get('method')}: jsonrpc is {answer.get('jsonrpc')!r}")
        if answer.get("id") != sent.get("id"):
            self.problems.append(
                f"{sent.get('method')}: id {answer.get('id')!r} for request id {sent.get('id')!r}"
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
    summary = {"sdk": f"a2a-sdk {dist_version('a2a-sdk')}", "url": url,
               "authenticated": token is not None}
    hooks = {"response": [wire.on_response]}
    async with httpx.AsyncClient(timeout=30.0, event_hooks=hooks) as http:
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
        c.expect(card.capabilities.streaming is False, "card: streaming false",
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
            await client.get_task(TaskQueryParams(id="tsk_00000000000000000000000000000000"),
                                  context=context)
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
            posts = [x for x in wire.exchanges if x["status"] == 200]
            c.expect(posts and all(x["authorization"] for x in posts),
                     "every accepted request carried the SDK's Authorization header", posts)
            refused = [x for x in wire.exchanges if x["status"] == 401]
            c.expect(refused and all((x.get("www_authenticate") or "").startswith("Bearer")
                                     for x in refused),
                     "the 401 names the Bearer scheme", refused)

        await client.close()

    c.expect(not wire.problems, "wire: JSON answers echoing each request id", wire.problems)
    summary["rpc_calls"] = [f"{x['method']}:{x['status']}" for x in wire.exchanges]
    summary["checks"] = len(c.passed)
    return summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("url", help="the door: host:port or http://host:port/")
    parser.add_argument("--text", default="hello from the a2a-sdk")
    parser.add_argument("--session-id", help="the session the card must name")
    parser.add_argument("--token-stdin", action="store_true",
                        help="read the bearer token from the first line of stdin")
    args = parser.parse_args()

    url = args.url if "://" in args.url else f"http://{args.url}"
    url = url.rstrip("/") + "/"
    token = None
    if args.token_stdin:
        token = sys.stdin.readline().strip()
    elif os.environ.get("MUR_A2A_TOKEN"):
        token = os.environ["MUR_A2A_TOKEN"].strip()
    if token == "":
        print(json.dumps({"ok": False, "error": "an empty token"}))
        return 1

    try:
        summary = asyncio.run(run(url, args.text, token, args.session_id))
    except Mismatch as e:
        print(json.dumps({"ok": False, "mismatch": str(e)}))
        return 1
    except Exception as e:  # an SDK error is a failed interop, reported, never a crash
        traceback.print_exc(file=sys.stderr)
        print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}))
        return 1
    summary["ok"] = True
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
