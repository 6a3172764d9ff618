"""The README's supersede example, word for word, with the real embedder; and what does not supersede."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kbserver.dialects.supersede import is_update, supersedes
from kbserver.services import Services
from tests.helpers import REPO_ROOT, make_agent
from tests.mcp.clients import memory_client, ok

pytestmark = pytest.mark.anyio

SEARCH = "search_memories_by_semantics"
README = (REPO_ROOT / "README.md").read_text()


def _example() -> tuple[str, str, str]:
    """The two contents and the memory_type of the README's example, as the README writes them."""
    found = re.search(
        r"storing `([^`]+)`\s+and then\s+`([^`]+)` \(both\s+`memory_type: (\w+)`\) answers\s+"
        r'`"superseded": \[the first id\]`',
        README,
    )
    assert found, "the README's supersede example moved or changed"
    return found[1], found[2], found[3]


async def _store(client: Any, content: str, **kw: object) -> dict[str, Any]:
    return ok(await client.call_tool("store_memory", {"content": content, **kw}))


async def test_the_readmes_example_supersedes_and_the_new_memory_is_found(
    services: Services, kb: str
) -> None:
    old_text, new_text, kind = _example()
    make_agent(services, "alice", {kb: "read_write"}, tools=["semantic"])
    async with memory_client(services, "alice") as alice:
        first = await _store(alice, old_text, memory_type=kind)
        assert first["superseded"] == []
        second = await _store(alice, new_text, memory_type=kind)
        assert second["superseded"] == [first["id"]]
        found = ok(await alice.call_tool(SEARCH, {"query": "What does the user like to drink?"}))
        assert [m["id"] for m in found["memories"]] == [second["id"]]
        every = ok(
            await alice.call_tool(
                SEARCH, {"query": "What does the user like to drink?", "include_superseded": True}
            )
        )
        assert {m["id"]: m["superseded_by"] for m in every["memories"]}[first["id"]] == second["id"]


async def test_a_second_fact_another_type_or_another_user_is_not_superseded(
    services: Services, kb: str
) -> None:
    make_agent(services, "alice", {kb: "read_write"}, tools=["semantic"])
    async with memory_client(services, "alice") as alice:
        tea = await _store(alice, "The user prefers tea", memory_type="preference")
        assert (await _store(alice, "The user likes green tea", memory_type="preference"))["superseded"] == []
        assert (await _store(alice, "The user now prefers coffee", memory_type="fact"))["superseded"] == []
        other = await _store(alice, "The user now prefers coffee", memory_type="preference", user_id="bob")
        assert other["superseded"] == []
        unrelated = await _store(alice, "The printer on floor two is now fixed", memory_type="preference")
        assert unrelated["superseded"] == []
        found = ok(await alice.call_tool(SEARCH, {"query": "tea", "limit": 10}))
        assert tea["id"] in {m["id"] for m in found["memories"]}  # still live


def test_the_update_rule() -> None:
    assert is_update("The user now prefers coffee", "The user prefers tea")
    assert is_update("The team now meets on Mondays at 10am", "The team meets on Fridays at 3pm")
    assert is_update("Priya no longer leads the platform team", "Priya leads the platform team")
    assert is_update("用户现在更喜欢咖啡", "用户喜欢喝茶")
    assert not is_update("The user likes green tea", "The user prefers tea")  # no marker: a second fact
    assert not is_update("Bob now has a cat", "The printer on floor two is broken")  # another subject
    assert not is_update(
        "Now the whole release calendar moved to the wiki page of the team", "The user prefers tea"
    )
    assert supersedes("a", "b", 0.95, by_meaning=False)  # the contract's 0.9 holds for any measure
    assert supersedes("The user now prefers coffee", "The user prefers tea", 0.65, by_meaning=True)
    assert not supersedes("The user now prefers coffee", "The user prefers tea", 0.4, by_meaning=True)
    assert not supersedes("The user now prefers coffee", "The user prefers tea", 0.65, by_meaning=False)
