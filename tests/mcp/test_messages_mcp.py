"""MCP: write_context refuses the messages the contract refuses, and nothing changes."""

from __future__ import annotations

import pytest

from kbserver.services import Services
from tests.api.test_messages import BAD_MESSAGES
from tests.helpers import git_fsck, state
from tests.mcp.clients import error, memory_client, ok

pytestmark = pytest.mark.anyio


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_bad_message_over_mcp(
    services: Services, agent: dict[str, str], kb: str, anyio_backend: str
) -> None:
    before = state(services, kb)
    files = [{"path": "m.md", "mode": "create", "content": "x\n"}]
    async with memory_client(services, "bob") as client:
        for message in BAD_MESSAGES:
            err = error(await client.call_tool("write_context", {"files": files, "message": message}))
            assert err["code"] == "invalid_request", err
        assert state(services, kb) == before
        done = ok(await client.call_tool("write_context", {"files": files, "message": "tab\tok"}))
        assert done["version"] != before[0]
    git_fsck(services.repos.path(kb))
