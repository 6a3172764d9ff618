"""MCP: write_context's idempotency_key answers a repeat with the first result and writes nothing."""

from __future__ import annotations

import pytest

from kbserver.services import Services
from tests.helpers import git_fsck, state
from tests.mcp.clients import error, memory_client, ok

pytestmark = pytest.mark.anyio


async def test_write_context_with_an_idempotency_key(
    services: Services, agent: dict[str, str], kb: str
) -> None:
    create = [{"path": "log.md", "mode": "create", "content": "first\n"}]
    append = [{"path": "log.md", "mode": "append", "content": "again\n"}]
    async with memory_client(services, "bob") as client:
        ok(await client.call_tool("write_context", {"files": create}))
        first = ok(await client.call_tool("write_context", {"files": append, "idempotency_key": "k-1"}))
        before = state(services, kb)
        repeat = ok(await client.call_tool("write_context", {"files": append, "idempotency_key": "k-1"}))
        assert repeat == first and state(services, kb) == before
        other = [{"path": "log.md", "mode": "append", "content": "different\n"}]
        err = error(await client.call_tool("write_context", {"files": other, "idempotency_key": "k-1"}))
        assert err["code"] == "invalid_request" and state(services, kb) == before
        content = ok(await client.call_tool("read_context_file", {"path": "log.md"}))["content"]
        assert content == "first\nagain\n"
    git_fsck(services.repos.path(kb))
