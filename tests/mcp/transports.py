"""The SDK client over the two real transports the dialect tests run on: Streamable HTTP and stdio."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

from mcp import Client, StdioServerParameters

from kbserver.services import Services
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN
from tests.helpers import REPO_ROOT
from tests.mcp.clients import http_client

Connect = Callable[[str], AbstractAsyncContextManager[Client]]
"""connect(agent) -> an SDK client session of that agent (opened with the session handshake)."""


def stdio_params(data: Path, agent: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        cwd=str(REPO_ROOT),
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        args=["-m", "kbserver.cli", "mcp", "--agent", agent, "--data", str(data)],
    )


def connector(transport: str, services: Services, data: Path, http_url: str | None) -> Connect:
    """Clients of `transport` ("http" needs `http_url`); tokens are made on the fly for HTTP."""

    @asynccontextmanager
    async def connect(agent: str) -> AsyncIterator[Client]:
        if transport == "stdio":
            async with Client(stdio_params(data, agent), mode="legacy") as client:
                yield client
            return
        assert http_url is not None
        _, token = agents.rotate(services, ADMIN, agent)
        async with http_client(http_url, {"Authorization": f"Bearer {token}"}, mode="legacy") as client:
            yield client

    return connect
