"""Query embedding under load, over real HTTP: long queries from one agent do not starve another's
search, the queries of a client that went away are dropped, and SIGTERM ends a full queue soon."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.context import Options
from kbserver.vectors import MAX_QUERY_CHARS, QueryCache
from kbserver.wiring import open_services
from tests.helpers import LiveServer, make_agent
from tests.mcp.clients import http_client, memory_client, ok

pytestmark = pytest.mark.anyio

SEARCH = "search_memories_by_semantics"


def _long_query(i: int, size: int = 4000) -> str:
    """A query of `size` characters whose start differs per i (each is its own embedding)."""
    head = f"question number {i} about the deployment calendar and who is on call"
    return (head + " " + "and the release notes of the platform team " * (size // 40))[:size]


def _embedder(services: Services) -> QueryCache:
    assert services.vectors is not None, "these tests need the bundled embedder"
    cache = services.vectors.embedder
    assert isinstance(cache, QueryCache)
    return cache


async def _setup(call: Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]) -> None:
    await call("alice", "store_memory", {"content": "The platform team deploys on Tuesdays.", "kb": "one"})
    await call("bob", "store_memory", {"content": "Priya is on call this week.", "kb": "two"})


async def test_a_burst_of_long_queries_does_not_starve_another_agents_search(
    services: Services, http_url: str
) -> None:
    kbs.create(services, ADMIN, "one", "Alice's KB")
    kbs.create(services, ADMIN, "two", "Bob's KB")
    alice = make_agent(services, "alice", {"one": "read_write"}, tools=["semantic"])
    bob = make_agent(services, "bob", {"two": "read_write"}, tools=["semantic"])
    heads = {"alice": alice, "bob": bob}

    async def call(agent: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        async with http_client(http_url, heads[agent]) as client:
            return ok(await client.call_tool(tool, args))

    await _setup(call)
    finished: list[str] = []
    first_done = anyio.Event()

    async def alice_asks(i: int) -> None:
        await call("alice", SEARCH, {"query": _long_query(i), "kb": "one"})
        finished.append(f"alice{i}")
        first_done.set()

    async def bob_asks() -> None:
        found = await call("bob", SEARCH, {"query": "who is on call", "kb": "two"})
        assert [m["content"] for m in found["memories"]] == ["Priya is on call this week."]
        finished.append("bob")

    with anyio.fail_after(600):
        async with anyio.create_task_group() as tg:
            for i in range(12):
                tg.start_soon(alice_asks, i)
            await first_done.wait()  # Alice's other eleven are queued or on their way
            tg.start_soon(bob_asks)
    after_bob = len(finished) - 1 - finished.index("bob")
    assert after_bob >= 6, finished  # Bob waited for one or two of Alice's, not for all eleven


async def test_the_queries_of_a_client_that_left_are_dropped(services: Services, http_url: str) -> None:
    kbs.create(services, ADMIN, "one", "Alice's KB")
    alice = make_agent(services, "alice", {"one": "read_write"}, tools=["semantic"])
    async with http_client(http_url, alice) as client:
        ok(await client.call_tool("store_memory", {"content": "Deploys happen on Tuesdays.", "kb": "one"}))
    cache = _embedder(services)
    made = cache.misses
    first_done = anyio.Event()

    async def asks(i: int) -> None:
        async with http_client(http_url, alice) as client:
            await client.call_tool(SEARCH, {"query": _long_query(100 + i), "kb": "one"})
            first_done.set()

    with anyio.fail_after(300):
        async with anyio.create_task_group() as tg:
            for i in range(16):
                tg.start_soon(asks, i)
            await first_done.wait()
            tg.cancel_scope.cancel()  # the client hangs up on the other fifteen
        for _ in range(3000):  # bounded: until the server has nothing left to embed
            if not cache._jobs:
                break
            await anyio.sleep(0.05)
    assert not cache._jobs
    assert cache.dropped >= 5, (cache.dropped, cache.misses - made)
    assert cache.misses - made <= 16 - 5  # those dropped were never embedded


def test_sigterm_with_a_full_queue_exits_within_seconds(tmp_path: Path) -> None:
    data = tmp_path / "data"
    prepared = open_services(data, Options())
    try:
        kbs.create(prepared, ADMIN, "one", "Alice's KB")
        head = make_agent(prepared, "alice", {"one": "read_write"}, tools=["semantic"])
    finally:
        prepared.close()
    server = LiveServer(data).start()
    try:
        outcomes: list[str] = []

        async def main() -> None:
            async with http_client(server.url, head) as client:
                ok(await client.call_tool("store_memory", {"content": "Deploys on Tuesdays.", "kb": "one"}))
            first_done = anyio.Event()

            async def asks(i: int) -> None:
                try:
                    async with http_client(server.url, head) as client:
                        result = await client.call_tool(SEARCH, {"query": _long_query(200 + i), "kb": "one"})
                    text = result.content[0].text  # type: ignore[union-attr]
                    outcomes.append("error:" + text.split(":", 1)[0] if result.is_error else "ok")
                except Exception as exc:  # a connection the exiting server closed
                    outcomes.append(f"gone:{type(exc).__name__}")
                first_done.set()

            with anyio.fail_after(300):
                async with anyio.create_task_group() as tg:
                    for i in range(40):
                        tg.start_soon(asks, i)
                    await first_done.wait()
                    proc = server.proc
                    assert proc is not None
                    proc.send_signal(signal.SIGTERM)
                    try:  # generous: a few seconds on an idle machine, while the calls still wait
                        codes.append(await anyio.to_thread.run_sync(lambda: proc.wait(timeout=30)))
                    except subprocess.TimeoutExpired:
                        tg.cancel_scope.cancel()

        codes: list[int] = []
        anyio.run(main)
        if not codes:
            pytest.fail("the server still ran 30 s after SIGTERM with its query queue full")
        log = server.log.read_text(errors="replace")[-2000:]
        assert codes[0] in (0, -signal.SIGTERM), log  # uvicorn re-raises the signal once it is done
        assert len(outcomes) == 40
        assert outcomes.count("ok") < 40 // 2, outcomes  # the queued ones were refused, not embedded
        assert "error:unavailable" in outcomes, outcomes
    finally:
        server.stop()


async def test_the_tools_say_how_much_of_a_query_is_embedded(services: Services, kb: str) -> None:
    make_agent(services, "alice", {kb: "read_write"}, tools=["semantic", "memory"])
    async with memory_client(services, "alice") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for name, argument in [(SEARCH, "query"), ("recall_related", "query"), ("memory_search", "search")]:
        described = tools[name].input_schema["properties"][argument]["description"]
        assert f"first {MAX_QUERY_CHARS} characters" in described, (name, described)
