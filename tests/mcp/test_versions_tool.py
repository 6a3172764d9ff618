"""list_context_versions and read_context_file's `version`: agents check who wrote what, and when."""

from __future__ import annotations

import pytest

from kbserver.services import Services
from tests.helpers import make_agent
from tests.mcp.clients import error, memory_client, ok

pytestmark = pytest.mark.anyio


async def test_history_and_reading_an_old_version(services: Services, agent: dict[str, str]) -> None:
    make_agent(services, "eve", {"notes": "read_write"})
    async with memory_client(services, "eve") as eve:
        first = ok(
            await eve.call_tool(
                "write_context", {"files": [{"path": "a.md", "mode": "create", "content": "right\n"}]}
            )
        )
        second = ok(
            await eve.call_tool(
                "write_context",
                {"files": [{"path": "a.md", "mode": "overwrite", "content": "wrong\n"}], "message": "tidy"},
            )
        )
        ok(
            await eve.call_tool(
                "write_context", {"files": [{"path": "b.md", "mode": "create", "content": "b"}]}
            )
        )
    async with memory_client(services, "bob") as bob:
        listing = ok(await bob.call_tool("list_context_versions", {}))
        assert listing["kb"] == "notes" and len(listing["versions"]) == 4  # with the KB's first version
        newest = listing["versions"][0]
        assert set(newest) == {"version", "author", "kind", "message", "time", "paths"}
        assert newest["author"] == "agent:eve" and newest["kind"] == "agent_write"
        assert newest["paths"] == ["b.md"] and listing["versions"][-1]["kind"] == "create"
        history = ok(await bob.call_tool("list_context_versions", {"path": "a.md", "limit": 1}))
        assert [v["version"] for v in history["versions"]] == [second["version"]]
        assert history["versions"][0]["message"] == "tidy"
        old = ok(await bob.call_tool("read_context_file", {"path": "a.md", "version": first["version"]}))
        assert old["content"] == "right\n" and old["version"] == first["version"]
        now = ok(await bob.call_tool("read_context_file", {"path": "a.md"}))
        assert now["content"] == "wrong\n"
        for name, args, code in (
            ("read_context_file", {"path": "a.md", "version": "abc"}, "invalid_request"),
            ("read_context_file", {"path": "a.md", "version": "0" * 40}, "not_found"),
            ("read_context_file", {"path": "b.md", "version": first["version"]}, "not_found"),
            ("list_context_versions", {"limit": 0}, "invalid_request"),
            ("list_context_versions", {"limit": 201}, "invalid_request"),
            ("list_context_versions", {"path": "../x"}, "invalid_request"),
            ("list_context_versions", {"kb": "other"}, "not_found"),
        ):
            assert error(await bob.call_tool(name, args))["code"] == code, (name, args)
