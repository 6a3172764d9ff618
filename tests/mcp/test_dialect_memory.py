"""The `memory` tool set through the SDK client (Streamable HTTP and stdio): facts, scopes, filters,
history, look-alikes, waiting for search, and hybrid search in English, Chinese and across them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kbserver.config import Settings
from kbserver.services import Services
from kbserver.services.access.auth import ADMIN
from kbserver.services.reviewing import versions
from tests.helpers import git_fsck, make_agent, state
from tests.mcp.clients import error, memory_client, ok
from tests.mcp.transports import Connect, connector

pytestmark = pytest.mark.anyio

FACTS = [
    ("The user drinks coffee black, never with sugar or milk.", "preference"),
    ("Bob has a golden retriever called Biscuit who is afraid of thunder.", "family"),
    ("Production deploys happen on Tuesdays after the 10 am stand-up.", "work"),
    ("每周五下午三点开团队周会，地点在三楼会议室。", "work"),
    ("The team offsite next spring will be in Paris, near the Louvre.", "work"),
]


@pytest.fixture
def team(services: Services, kb: str) -> None:
    make_agent(services, "alice", {kb: "read_write"}, tools=["context", "memory"])
    make_agent(services, "bob", {kb: "read_write"}, tools=["memory"])


@pytest.fixture(params=["http", "stdio"])
def connect(
    request: pytest.FixtureRequest, settings: Settings, services: Services, http_url: str, team: None
) -> Iterator[Connect]:
    yield connector(request.param, services, settings.data, http_url)


def _front(services: Services, memory_id: str) -> tuple[dict[str, Any], str]:
    repo = services.repos.repo("notes")
    data = repo.view(repo.head()).read(f"memories/{memory_id}.md")
    assert data is not None
    text = data.decode()
    _, front, body = text.split("---\n", 2)
    return yaml.safe_load(front), body.strip()


async def _wait(client: Any, task: str) -> None:
    assert ok(await client.call_tool("memory_task_wait", {"taskId": task, "timeout": 60}))["status"] == "done"


async def test_add_search_update_delete_over_both_transports(connect: Connect, services: Services) -> None:
    async with connect("alice") as alice:
        names = {t.name for t in (await alice.list_tools()).tools}
        assert {"memory_add", "memory_search", "memory_update", "memory_delete", "memory_task_wait"} <= names
        ids = []
        for content, category in FACTS:
            added = ok(await alice.call_tool("memory_add", {"content": content, "category": category}))
            ids.append(added["id"])
        await _wait(alice, added["taskId"])

        front, body = _front(services, ids[0])
        assert body == FACTS[0][0] and front["id"] == ids[0] and front["category"] == "preference"
        assert front["createdAt"] == front["updatedAt"] and front["createdAt"].endswith("Z")
        history = versions.listing(services, ADMIN, "notes", path=f"memories/{ids[0]}.md").versions
        assert len(history) == 1
        assert history[0].author == "agent:alice" and history[0].message.startswith(f"memory: add {ids[0]}")

        # a paraphrase with no shared word, a Chinese question, and one across languages
        for query, expected in [
            ("how does she take her coffee", ids[0]),
            ("what pet does Bob own", ids[1]),
            ("什么时候开周会", ids[3]),
            ("when is the weekly team meeting", ids[3]),
        ]:
            found = ok(await alice.call_tool("memory_search", {"search": query, "mode": "semantic"}))
            assert found["memories"][0]["id"] == expected, (query, found)
            assert "unembedded" not in found
            fused = ok(await alice.call_tool("memory_search", {"search": query, "limit": 3}))
            assert expected in [m["id"] for m in fused["memories"]], (query, fused)

        updated = ok(
            await alice.call_tool(
                "memory_update", {"id": ids[0], "content": "The user now drinks oat-milk flat whites."}
            )
        )
        assert updated["id"] == ids[0] and updated["taskId"] != added["taskId"]
        front, body = _front(services, ids[0])
        assert body == "The user now drinks oat-milk flat whites."
        assert front["metadata"]["history"][0]["value"] == FACTS[0][0]

        head_before_reads = services.repos.repo("notes").head()
        ok(await alice.call_tool("memory_search", {"search": "coffee"}))
        assert services.repos.repo("notes").head() == head_before_reads  # reading makes no version

        deleted = ok(await alice.call_tool("memory_delete", {"id": ids[1]}))
        assert deleted == {"id": ids[1], "deleted": True, "taskId": deleted["taskId"]}
        await _wait(alice, deleted["taskId"])
        found = ok(await alice.call_tool("memory_search", {"search": "golden retriever", "mode": "keyword"}))
        assert ids[1] not in [m["id"] for m in found["memories"]]
    git_fsck(services.repos.path("notes"))


async def test_scoped_memories_are_invisible_to_other_agents(services: Services, team: None) -> None:
    async with memory_client(services, "alice") as alice, memory_client(services, "bob") as bob:
        private = ok(
            await alice.call_tool(
                "memory_add", {"content": "Alice's locker code is in her notebook", "agentId": "alice"}
            )
        )
        shared = ok(await alice.call_tool("memory_add", {"content": "The locker room is on floor two"}))
        await _wait(alice, shared["taskId"])
        mine = ok(await alice.call_tool("memory_search", {"search": "locker", "mode": "keyword"}))
        assert {m["id"] for m in mine["memories"]} == {private["id"], shared["id"]}
        theirs = ok(await bob.call_tool("memory_search", {"search": "locker"}))
        assert [m["id"] for m in theirs["memories"]] == [shared["id"]] and theirs["total"] == 1
        assert (
            ok(await bob.call_tool("memory_search", {"search": "locker", "agentId": "alice"}))["total"] == 0
        )

        before = state(services, "notes")
        for tool, args in [
            ("memory_update", {"id": private["id"], "content": "hijacked"}),
            ("memory_delete", {"id": private["id"]}),
        ]:
            assert error(await bob.call_tool(tool, args))["code"] == "not_found"
        err = error(await bob.call_tool("memory_add", {"content": "spoof", "agentId": "alice"}))
        assert err["code"] == "forbidden"
        assert state(services, "notes") == before


async def test_filters_combine_with_the_search(services: Services, team: None) -> None:
    async with memory_client(services, "alice") as alice:
        a = ok(
            await alice.call_tool(
                "memory_add",
                {"content": "Deploy freeze over the holidays", "category": "work", "sessionId": "s1"},
            )
        )
        b = ok(
            await alice.call_tool(
                "memory_add", {"content": "Deploy the blog on Sunday", "category": "home", "sessionId": "s2"}
            )
        )
        await _wait(alice, b["taskId"])
        for args, expected in [
            ({"search": "deploy"}, {a["id"], b["id"]}),
            ({"search": "deploy", "category": "work"}, {a["id"]}),
            ({"search": "deploy", "sessionId": "s2"}, {b["id"]}),
            ({"search": "deploy", "category": "work", "sessionId": "s2"}, set()),
            (
                {
                    "search": "deploy",
                    "startTime": "2000-01-01T00:00:00Z",
                    "endTime": "2999-01-01T00:00:00+02:00",
                },
                {a["id"], b["id"]},
            ),
            ({"search": "deploy", "endTime": "2000-01-01T00:00:00Z"}, set()),
            ({"search": "", "category": "home"}, {b["id"]}),
        ]:
            for mode in ("hybrid", "keyword", "semantic"):
                found = ok(await alice.call_tool("memory_search", {**args, "mode": mode}))
                got = {m["id"] for m in found["memories"]}
                if mode == "keyword" or not args["search"]:
                    assert got == expected, (args, mode)
                else:
                    assert got <= expected | {a["id"], b["id"]} and (expected <= got or not expected)
                assert found["total"] >= len(got)
        paged = [
            ok(await alice.call_tool("memory_search", {"search": "deploy", "limit": 1, "offset": i}))
            for i in (0, 1, 2)
        ]
        assert [len(p["memories"]) for p in paged] == [1, 1, 0] and {p["total"] for p in paged} == {2}
        assert {p["memories"][0]["id"] for p in paged[:2]} == {a["id"], b["id"]}


async def test_hybrid_weighs_how_much_of_the_question_a_memory_holds(services: Services, team: None) -> None:
    """One common word shared with the question ("last week") must not outrank the answer written in
    the other language; a pasted identifier that only the words find must come first."""
    facts = [
        "上周三夜间同步失败，原因是磁盘空间不足。",
        "Elena was on holiday in Greece last week.",
        "Sam moved to a new flat last week and is still unpacking.",
        "Lily had a cold last week and stayed home from school.",
        "INC-4471 was the checkout outage; pgbouncer capped the connection pool at 20.",
        "The checkout page got a new design in spring.",
    ]
    async with memory_client(services, "alice") as alice:
        ids = []
        for content in facts:
            added = ok(await alice.call_tool("memory_add", {"content": content}))
            ids.append(added["id"])
        await _wait(alice, added["taskId"])
        for query, expected in [
            ("Why did the nightly data sync fail last week?", ids[0]),
            ("INC-4471", ids[4]),
        ]:
            found = ok(await alice.call_tool("memory_search", {"search": query, "limit": 3}))
            assert found["memories"][0]["id"] == expected, (query, found)


async def test_similar_memories_are_reported_on_add(services: Services, team: None) -> None:
    async with memory_client(services, "alice") as alice:
        first = ok(await alice.call_tool("memory_add", {"content": "Lily is allergic to peanuts"}))
        assert first["similar"] == []
        again = ok(await alice.call_tool("memory_add", {"content": "lily is allergic to peanuts!"}))
        assert [s["id"] for s in again["similar"]] == [first["id"]] and again["similar"][0]["score"] == 1.0
        other = ok(await alice.call_tool("memory_add", {"content": "The printer on floor two is broken"}))
        assert other["similar"] == []


async def test_history_is_kept_whatever_metadata_is_passed(services: Services, team: None) -> None:
    async with memory_client(services, "alice") as alice:
        added = ok(await alice.call_tool("memory_add", {"content": "v1", "metadata": {"source": "chat"}}))
        ok(
            await alice.call_tool(
                "memory_update", {"id": added["id"], "content": "v2", "metadata": {"source": "email"}}
            )
        )
        ok(await alice.call_tool("memory_update", {"id": added["id"], "content": "v3", "tags": ["x"]}))
        ok(
            await alice.call_tool("memory_update", {"id": added["id"], "content": "v3", "category": "c"})
        )  # same content
        front, body = _front(services, added["id"])
        assert body == "v3" and front["tags"] == ["x"] and front["category"] == "c"
        assert front["metadata"]["source"] == "email"
        assert [h["value"] for h in front["metadata"]["history"]] == ["v2", "v1"]  # newest first


async def test_task_wait_is_pending_while_search_lags_then_done(services: Services, team: None) -> None:
    async with memory_client(services, "alice") as alice:
        services.follower.stop()  # nothing follows main: the index and vectors fall behind
        try:
            added = ok(await alice.call_tool("memory_add", {"content": "A fact written while search lags"}))
            waited = ok(
                await alice.call_tool("memory_task_wait", {"taskId": added["taskId"], "timeout": 0.3})
            )
            assert waited == {"taskId": added["taskId"], "status": "pending"}
        finally:
            services.follower.start()
        await _wait(alice, added["taskId"])
        unknown = error(await alice.call_tool("memory_task_wait", {"taskId": "0" * 40, "timeout": 0}))
        assert unknown["code"] == "not_found"
        malformed = error(
            await alice.call_tool("memory_task_wait", {"taskId": "not-a-version", "timeout": 0})
        )
        assert malformed["code"] == "invalid_request"


async def test_bad_input_is_refused_and_changes_nothing(services: Services, team: None) -> None:
    async with memory_client(services, "alice") as alice:
        added = ok(await alice.call_tool("memory_add", {"content": "something"}))
        before = state(services, "notes")
        secret = (
            "-----BEGIN RSA PRIVATE KEY-----\n"
            "MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgwMbRvI0MBZhpF\n"
            "-----END RSA PRIVATE KEY-----"
        )
        for tool, args, code in [
            ("memory_add", {"content": "   "}, "invalid_request"),
            ("memory_add", {"content": secret}, "secret_detected"),
            ("memory_update", {"id": "0123456789abcdef", "content": "x"}, "not_found"),
            ("memory_update", {"id": "../../README", "content": "x"}, "not_found"),
            ("memory_update", {"id": added["id"], "content": ""}, "invalid_request"),
            ("memory_delete", {"id": "nope"}, "not_found"),
            ("memory_search", {"search": "x", "mode": "fuzzy"}, "invalid_request"),
            ("memory_search", {"search": "x", "startTime": "yesterday"}, "invalid_request"),
            ("memory_search", {"search": "x", "endTime": "2026-12-01T10:00:00"}, "invalid_request"),
            ("memory_add", {"content": "x", "kb": "elsewhere"}, "not_found"),
        ]:
            assert error(await alice.call_tool(tool, args))["code"] == code, (tool, args)
        assert state(services, "notes") == before


async def test_a_read_only_agent_reads_its_only_kb_and_a_long_wait_answers_pending(
    services: Services, team: None
) -> None:
    """The contract's default is the agent's only writable KB; one that may only read has none, so
    its reading tools default to its only readable KB. A wait longer than the service's longest
    answers after the longest, as a timeout does, instead of failing."""
    make_agent(services, "reader", {"notes": "read"}, tools=["memory", "semantic"])
    async with memory_client(services, "alice") as alice:
        added = ok(
            await alice.call_tool("memory_add", {"content": "The VPN endpoint is vpn2.corp.example.net"})
        )
        await _wait(alice, added["taskId"])
    before = state(services, "notes")
    async with memory_client(services, "reader") as reader:
        found = ok(
            await reader.call_tool("memory_search", {"search": "vpn2.corp.example.net", "mode": "keyword"})
        )
        assert [m["id"] for m in found["memories"]] == [added["id"]]
        assert ok(await reader.call_tool("list_due_memories", {}))["memories"] == []
        waited = ok(await reader.call_tool("memory_task_wait", {"taskId": added["taskId"], "timeout": 600}))
        assert waited["status"] == "done"
        for tool, args, code in [
            ("memory_add", {"content": "I may not write"}, "invalid_request"),
            ("memory_task_wait", {"taskId": added["taskId"], "timeout": -1}, "invalid_request"),
        ]:
            assert error(await reader.call_tool(tool, args))["code"] == code, tool
    assert state(services, "notes") == before
