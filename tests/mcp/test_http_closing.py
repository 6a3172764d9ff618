"""A client that closes its MCP session while a notification of it is in flight logs no error.

Found by the outside check of issue 12: an SDK client that opens a session and leaves at once (to
read the instructions, say) sends `notifications/initialized` and then DELETE. The SDK answers the
notification 202 before it hands it to the session; when the DELETE wins, the hand-over finds the
session's stream closed, the SDK logs an ERROR with a traceback and tries to answer 500 after its
202, which raised "response already started" in the server and logged a 500 that no client saw
(about one session in three to forty on a busy 2-core machine).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest
from starlette.types import Message, Receive, Scope, Send

from kbserver.mcp.http import _ClosingSessionNoise, _ContractErrors
from kbserver.services import Services
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN
from tests.helpers import make_agent
from tests.mcp.clients import http_client

pytestmark = pytest.mark.anyio


async def test_sessions_closed_at_once_log_no_error(
    services: Services, kb: str, http_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    make_agent(services, "bob", {kb: "read_write"}, tools=["memory"])
    _, token = agents.rotate(services, ADMIN, "bob")
    caplog.set_level(logging.INFO)
    for _ in range(30):
        async with http_client(http_url, {"Authorization": f"Bearer {token}"}, mode="legacy") as client:
            assert client.instructions
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [(r.name, r.getMessage()) for r in errors]


async def test_a_second_answer_to_one_request_is_dropped() -> None:
    """The SDK's path, replayed: 202 sent, then the hand-over fails, a 500 is tried, the error re-raised."""

    async def sdk(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        await send({"type": "http.response.start", "status": 500, "headers": []})
        await send({"type": "http.response.body", "body": b"Error handling POST request"})
        raise anyio.ClosedResourceError

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    await _ContractErrors(sdk)({"type": "http", "headers": []}, receive, send)
    assert [m.get("status") for m in sent] == [202, None] and sent[1]["body"] == b""

    async def fails_first(scope: Scope, receive: Receive, send: Send) -> None:
        raise anyio.ClosedResourceError

    with pytest.raises(anyio.ClosedResourceError):  # nothing answered yet: a real failure, not hidden
        await _ContractErrors(fails_first)({"type": "http", "headers": []}, receive, send)


def test_the_sdks_error_line_for_a_closing_session_becomes_info() -> None:
    def record(exc: BaseException, msg: str = "Error handling POST request") -> logging.LogRecord:
        info: Any = (type(exc), exc, None)
        return logging.LogRecord("mcp.server.streamable_http", logging.ERROR, __file__, 1, msg, (), info)

    quiet = record(anyio.ClosedResourceError())
    assert _ClosingSessionNoise().filter(quiet)
    assert quiet.levelno == logging.INFO and quiet.exc_info is None and "closing" in quiet.getMessage()
    for other in (record(ValueError("boom")), record(anyio.ClosedResourceError(), "something else")):
        assert _ClosingSessionNoise().filter(other)
        assert other.levelno == logging.ERROR and other.exc_info is not None
