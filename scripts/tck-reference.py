#!/usr/bin/env python3
"""Reference A2A echo server for scripts/tck.sh: the a2a-sdk (PyPI) doing what mur's
embedded echo capsule does, so a TCK failure can be checked against the SDK's own server.

    python3 scripts/tck-reference.py PORT
    TCK_BEARER=TOKEN python3 scripts/tck-reference.py PORT     # an authenticated door

Works with a2a-sdk 0.3.x (serves A2A 0.3) and a2a-sdk 1.x (serves A2A 1.0 and, with its
v0.3 compat switched on, 0.3 at the same URL, as mur's door does). Each task: submitted ->
working -> one artifact holding every part of the message -> completed with an agent message.
Card: streaming true, push notifications false, like mur's echo capsule.

With TCK_BEARER set (never argv), the server is authenticated the way mur's door is with
`network.authentication`: every POST needs `Authorization: Bearer $TCK_BEARER`, else HTTP 401
with `WWW-Authenticate: Bearer realm="echo"` and a JSON-RPC error body (-32030, id null); the
card stays public, declares an http bearer scheme as its security requirement and the
(authenticated) extended card, which the SDK serves (`agent/getAuthenticatedExtendedCard`,
`GetExtendedAgentCard`).
"""

import json
import os

import sys
import uuid

import uvicorn

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 9999
URL = f"http://127.0.0.1:{PORT}/"
BEARER = os.environ.get("TCK_BEARER") or None

try:  # a2a-sdk 1.x
    from a2a.types import a2a_pb2 as _pb  # noqa: F401

    SDK = 1
except ImportError:
    SDK = 0

from a2a.server.agent_execution import AgentExecutor, RequestContext  # noqa: E402
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater  # noqa: E402


if SDK == 1:
    from a2a.helpers import new_task
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.types.a2a_pb2 import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        Message,
        Part,
        Role,
        TaskState,
    )
    from starlette.applications import Starlette

    class Echo(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue) -> None:
            if context.current_task is None:
                await event_queue.enqueue_event(
                    new_task(
                        context.task_id,
                        context.context_id,
                        TaskState.TASK_STATE_SUBMITTED,
                        history=[context.message],
                    )
                )
            up = TaskUpdater(event_queue, context.task_id, context.context_id)
            await up.start_work()
            parts = list(context.message.parts) if context.message else []
            await up.add_artifact(parts, name="answer")
            answer = Message(
                message_id=str(uuid.uuid4()),
                role=Role.ROLE_AGENT,
                parts=parts or [Part(text="")],
                task_id=context.task_id,
                context_id=context.context_id,
            )
            await up.update_status(TaskState.TASK_STATE_COMPLETED, answer)

        async def cancel(self, context: RequestContext, event_queue) -> None:
            up = TaskUpdater(event_queue, context.task_id, context.context_id)
            await up.cancel()

    card = AgentCard(
        name="echo",
        description="a2a-sdk reference echo agent (for the TCK)",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=URL, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=URL, protocol_binding="JSONRPC", protocol_version="0.3"),
        ],
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=False, extended_agent_card=BEARER is not None
        ),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(id="echo", name="echo", description="echoes every part", tags=["echo"])],
    )
    if BEARER is not None:
        from a2a.types.a2a_pb2 import (
            HTTPAuthSecurityScheme,
            SecurityRequirement,
            SecurityScheme,
            StringList,
        )

        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer"))
        )
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    handler = DefaultRequestHandler(
        agent_executor=Echo(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        extended_agent_card=card if BEARER is not None else None,
    )
    app = Starlette(
        routes=create_agent_card_routes(card)
        + create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True)
    )
else:
    from a2a.server.apps import A2AStarletteApplication
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentSkill,
        HTTPAuthSecurityScheme,
        SecurityScheme,
        TaskState,
    )
    from a2a.utils import new_agent_parts_message, new_task

    class Echo(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue) -> None:
            task = context.current_task
            if task is None:
                task = new_task(context.message)
                await event_queue.enqueue_event(task)
            up = TaskUpdater(event_queue, task.id, task.context_id)
            await up.start_work()
            parts = list(context.message.parts) if context.message else []
            await up.add_artifact(parts, name="answer")
            await up.update_status(
                TaskState.completed,
                new_agent_parts_message(parts, task.context_id, task.id),
                final=True,
            )

        async def cancel(self, context: RequestContext, event_queue) -> None:
            task = context.current_task
            up = TaskUpdater(event_queue, task.id, task.context_id)
            await up.cancel()

    card = AgentCard(
        name="echo",
        description="a2a-sdk reference echo agent (for the TCK)",
        version="1.0.0",
        url=URL,
        preferred_transport="JSONRPC",
        protocol_version="0.3.0",
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(id="echo", name="echo", description="echoes every part", tags=["echo"])],
    )
    if BEARER is not None:
        card.security_schemes = {
            "bearer": SecurityScheme(root=HTTPAuthSecurityScheme(type="http", scheme="bearer"))
        }
        card.security = [{"bearer": []}]
        card.supports_authenticated_extended_card = True
    handler = DefaultRequestHandler(agent_executor=Echo(), task_store=InMemoryTaskStore())
    app = A2AStarletteApplication(
        agent_card=card,
        http_handler=handler,
        extended_agent_card=card if BEARER is not None else None,
    ).build()


def bearer_required(inner, token):
    """ASGI middleware: every POST needs `Authorization: Bearer <token>` (the card is public)."""
    want = f"Bearer {token}".encode()

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST":
            got = dict(scope["headers"]).get(b"authorization")
            if got != want:
                body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {
                    "code": -32030, "message": "unauthenticated: a valid bearer token is required"}})
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b'Bearer realm="echo"')]})
                await send({"type": "http.response.body", "body": body.encode()})
                return
        await inner(scope, receive, send)

    return guarded


if BEARER is not None:
    app = bearer_required(app, BEARER)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
