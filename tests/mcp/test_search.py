"""search_context: a natural-language question under a folder prefix (Whoosh's quality trap)."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from kbserver.services import Services
from tests.mcp.clients import memory_client, ok
from tests.search_seed import seed

pytestmark = pytest.mark.anyio


async def test_question_under_a_prefix(services: Services, client: TestClient, agent: dict[str, str]) -> None:
    files = {
        f"{'notes' if i % 2 else 'other'}/n{i}.md": f"the user said hello {i} " + "tea " * (i % 4)
        for i in range(40)
    }
    seed(client, "notes", agent, files)
    async with memory_client(services, "bob") as mcp:
        for limit in (1, 3, 10):
            found = ok(
                await mcp.call_tool(
                    "search_context",
                    {"query": "What did the user say about tea?", "prefix": "notes/", "limit": limit},
                )
            )
            paths = [h["path"] for h in found["hits"]]
            assert len(paths) == limit and all(p.startswith("notes/") for p in paths)
