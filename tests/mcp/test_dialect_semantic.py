"""The `semantic` tool set through the SDK client (Streamable HTTP and stdio): store, supersede, search
by meaning in English, Chinese and across them, importance and its reinforcement, retrieval counters
that make no version, recall of related memories, reminders (one-off and recurring) and the session
instructions that list them, scopes of agents and user_ids, and bad input that changes nothing."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kbserver.config import Settings
from kbserver.dialects.semantic_rules import coverage
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.reviewing import versions
from kbserver.wiring import open_services
from tests.helpers import git_fsck, make_agent, state
from tests.mcp.clients import error, memory_client, ok
from tests.mcp.transports import Connect, connector

pytestmark = pytest.mark.anyio

SEARCH = "search_memories_by_semantics"
FACTS = [
    ("The user drinks coffee black, never with sugar or milk.", "preference"),
    ("Bob has a golden retriever called Biscuit who is afraid of thunder.", "fact"),
    ("每周五下午三点开团队周会，地点在三楼会议室。", "fact"),
    ("Finish the quarterly tax return before the end of January.", "task"),
]


@pytest.fixture
def team(services: Services, kb: str) -> None:
    make_agent(services, "alice", {kb: "read_write"}, tools=["semantic", "memory"])
    make_agent(services, "bob", {kb: "read_write"}, tools=["semantic", "memory"])


@pytest.fixture(params=["http", "stdio"])
def connect(
    request: pytest.FixtureRequest, settings: Settings, services: Services, http_url: str, team: None
) -> Iterator[Connect]:
    yield connector(request.param, services, settings.data, http_url)


def _front(services: Services, memory_id: str) -> tuple[dict[str, Any], str]:
    repo = services.repos.repo("notes")
    data = repo.view(repo.head()).read(f"memories/{memory_id}.md")
    assert data is not None
    _, front, body = data.decode().split("---\n", 2)
    return yaml.safe_load(front), body.strip()


def _head(services: Services) -> str | None:
    return services.repos.repo("notes").head()


def _iso(when: datetime.datetime) -> str:
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_store_search_and_count_over_both_transports(connect: Connect, services: Services) -> None:
    async with connect("alice") as alice:
        names = {t.name for t in (await alice.list_tools()).tools}
        assert {
            "store_memory",
            SEARCH,
            "recall_related",
            "update_memory_importance",
            "list_due_memories",
        } <= names
        ids = []
        for content, kind in FACTS:
            stored = ok(await alice.call_tool("store_memory", {"content": content, "memory_type": kind}))
            assert set(stored) == {"id", "taskId", "superseded"} and stored["superseded"] == []
            assert stored["taskId"] == _head(services)
            ids.append(stored["id"])
        front, body = _front(services, ids[0])
        assert body == FACTS[0][0]
        assert (front["memory_type"], front["user_id"], front["importance"], front["agentId"]) == (
            "preference",
            "default",
            0.5,
            "alice",
        )
        history = versions.listing(services, ADMIN, "notes", path=f"memories/{ids[0]}.md").versions
        assert len(history) == 1 and history[0].author == "agent:alice"
        assert history[0].message.startswith(f"semantic memory: store {ids[0]} (preference of user default)")

        head = _head(services)
        # a paraphrase sharing no word (keyword search cannot find it), Chinese, and across languages
        for query, expected in [
            ("how does she take her morning brew", ids[0]),
            ("what kind of dog does Bob own", ids[1]),
            ("什么时候开周会", ids[2]),
            ("when is the weekly team meeting", ids[2]),
            ("报税截止日期", ids[3]),
        ]:
            found = ok(await alice.call_tool(SEARCH, {"query": query, "limit": 2}))
            assert found["memories"] and found["memories"][0]["id"] == expected, (query, found)
            assert "unembedded" not in found
        assert coverage("how does she take her morning brew", FACTS[0][0]) == 0.0  # no shared word
        keyword = ok(
            await alice.call_tool(
                "memory_search", {"search": "how does she take her morning brew", "mode": "keyword"}
            )
        )
        assert ids[0] not in [m["id"] for m in keyword["memories"]]  # semantic beats keyword here

        again = ok(await alice.call_tool(SEARCH, {"query": "Bob's dog", "limit": 1}))
        hit = again["memories"][0]
        assert set(hit) == {"id", "content", "memory_type", "user_id", "importance", "access_count", "score"}
        assert hit["id"] == ids[1] and hit["access_count"] == 2  # found once above, once now
        assert hit["importance"] == pytest.approx(0.95 * (0.95 * 0.5 + 0.05) + 0.05, abs=1e-4)
        assert 0 < hit["score"] <= 1
        assert _head(services) == head  # retrieval counts in the control plane, never as a version
        assert services.control.memory_access("notes", [ids[1]])[ids[1]].access_count == 2

        changed = ok(await alice.call_tool("update_memory_importance", {"id": ids[1], "importance": 0.9}))
        assert (
            changed["id"] == ids[1] and changed["importance"] == 0.9 and changed["taskId"] == _head(services)
        )
        assert _front(services, ids[1])[0]["importance"] == 0.9
        latest = versions.listing(services, ADMIN, "notes", limit=1).versions[0]
        assert latest.paths == [f"memories/{ids[1]}.md"] and "importance of" in latest.message
        after = ok(await alice.call_tool(SEARCH, {"query": "Bob's dog", "limit": 1}))["memories"][0]
        assert after["importance"] == pytest.approx(0.95 * 0.9 + 0.05, abs=1e-4)  # reinforced from 0.9
        assert after["access_count"] == 3
    git_fsck(services.repos.path("notes"))


async def test_supersede_marks_the_old_memory_in_the_same_version(services: Services, team: None) -> None:
    async with memory_client(services, "alice") as alice:
        old = ok(
            await alice.call_tool(
                "store_memory", {"content": "The user prefers tea over coffee.", "memory_type": "preference"}
            )
        )
        other_type = ok(
            await alice.call_tool(
                "store_memory", {"content": "The user prefers tea over coffee.", "memory_type": "reflection"}
            )
        )
        other_user = ok(
            await alice.call_tool(
                "store_memory",
                {
                    "content": "The user prefers tea over coffee.",
                    "memory_type": "preference",
                    "user_id": "li",
                },
            )
        )
        assert other_type["superseded"] == [] and other_user["superseded"] == []
        new = ok(
            await alice.call_tool(
                "store_memory", {"content": "The user prefers tea to coffee.", "memory_type": "preference"}
            )
        )
        assert new["superseded"] == [old["id"]]
        latest = versions.listing(services, ADMIN, "notes", limit=1).versions[0]
        assert latest.version == new["taskId"]
        assert sorted(latest.paths) == sorted([f"memories/{old['id']}.md", f"memories/{new['id']}.md"])
        assert f"supersedes {old['id']}" in latest.message
        assert _front(services, old["id"])[0]["superseded_by"] == new["id"]
        assert "superseded_by" not in _front(services, other_type["id"])[0]
        assert "superseded_by" not in _front(services, other_user["id"])[0]

        found = ok(await alice.call_tool(SEARCH, {"query": "favourite drink", "limit": 10}))
        # the newest of the chain only (the reflection is another memory_type: not superseded)
        assert sorted(m["id"] for m in found["memories"]) == sorted([new["id"], other_type["id"]])
        history = ok(
            await alice.call_tool(
                SEARCH, {"query": "favourite drink", "limit": 10, "include_superseded": True}
            )
        )
        chain = {m["id"]: m["superseded_by"] for m in history["memories"]}
        assert chain == {new["id"]: None, old["id"]: new["id"], other_type["id"]: None}
        unrelated = ok(
            await alice.call_tool(
                "store_memory", {"content": "The user dislikes green tea.", "memory_type": "preference"}
            )
        )
        assert unrelated["superseded"] == []  # related, not the same: both stay live


async def test_recall_related_adds_the_best_hits_neighbours(services: Services, team: None) -> None:
    async with memory_client(services, "alice") as alice:
        seed = ok(
            await alice.call_tool("store_memory", {"content": "Version 2.0 of the app ships on 15 March."})
        )
        notes = ok(
            await alice.call_tool("store_memory", {"content": "The 2.0 release notes are drafted by Priya."})
        )
        ok(await alice.call_tool("store_memory", {"content": "The app's icon is a green leaf."}))
        ok(await alice.call_tool("store_memory", {"content": "Bob has a golden retriever called Biscuit."}))
        searched = [
            m["id"] for m in ok(await alice.call_tool(SEARCH, {"query": "when is the release"}))["memories"]
        ]
        recalled = ok(await alice.call_tool("recall_related", {"query": "when is the release"}))["memories"]
        assert searched[0] == seed["id"] and recalled[0]["id"] == seed["id"]
        assert notes["id"] not in searched and notes["id"] in [m["id"] for m in recalled]
        assert len(recalled) < 4  # the dog is not related to a release
        nothing = ok(await alice.call_tool("recall_related", {"query": "量子色动力学的渐近自由"}))
        assert nothing == {"memories": []}


async def test_reminders_one_off_and_recurring_and_the_session_instructions(
    services: Services, team: None
) -> None:
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    soon = now + datetime.timedelta(minutes=20)
    yesterday_9 = (now - datetime.timedelta(days=1)).replace(hour=9, minute=0, second=0)
    async with memory_client(services, "alice") as alice:
        dentist = ok(
            await alice.call_tool(
                "store_memory",
                {
                    "content": "Call the dentist about the crown",
                    "memory_type": "task",
                    "remind_at": _iso(soon),
                },
            )
        )
        standup = ok(
            await alice.call_tool(
                "store_memory",
                {
                    "content": "Daily stand-up notes go to the team channel",
                    "memory_type": "task",
                    "user_id": "li",
                    "remind_at": yesterday_9.isoformat(),
                    "recurrence": "RRULE:FREQ=DAILY",
                },
            )
        )
        late = ok(
            await alice.call_tool(
                "store_memory",
                {
                    "content": "Renew the passport",
                    "remind_at": _iso(now + datetime.timedelta(days=40)) + "[Europe/Paris]",  # RFC 9557
                },
            )
        )
        next_standup = yesterday_9 + datetime.timedelta(days=1)
        if next_standup < now:
            next_standup += datetime.timedelta(days=1)
        window = _iso(now + datetime.timedelta(days=2))
        due = ok(await alice.call_tool("list_due_memories", {"before": window}))["memories"]
        assert [m["id"] for m in due] == sorted(
            [dentist["id"], standup["id"]],
            key=lambda i: {dentist["id"]: soon, standup["id"]: next_standup}[i],
        )
        by_id = {m["id"]: m for m in due}
        assert by_id[dentist["id"]]["due"] == _iso(soon) and by_id[dentist["id"]]["overdue"] is False
        assert by_id[standup["id"]]["due"] == _iso(next_standup)
        assert by_id[standup["id"]]["recurrence"] == "FREQ=DAILY"
        assert late["id"] not in by_id
        only_li = ok(await alice.call_tool("list_due_memories", {"before": window, "user_id": "li"}))
        assert [m["id"] for m in only_li["memories"]] == [standup["id"]]
        default_window = ok(await alice.call_tool("list_due_memories", {}))["memories"]
        assert dentist["id"] in [m["id"] for m in default_window]  # within the hour
        assert late["id"] not in [m["id"] for m in default_window]
        everything = ok(
            await alice.call_tool("list_due_memories", {"before": _iso(now + datetime.timedelta(days=41))})
        )
        assert everything["memories"][-1]["id"] == late["id"]  # soonest first
    async with memory_client(services, "alice", mode="legacy") as alice:
        text = alice.instructions or ""
        assert "Reminders due by" in text and f"id {dentist['id']}" in text and "Call the dentist" in text
        assert "Renew the passport" not in text
    async with memory_client(services, "bob", mode="legacy") as bob:
        assert "Call the dentist" not in (bob.instructions or "")  # alice's reminders are hers


async def test_agents_and_user_ids_do_not_see_each_others_memories(services: Services, team: None) -> None:
    async with memory_client(services, "alice") as alice, memory_client(services, "bob") as bob:
        mine = ok(
            await alice.call_tool(
                "store_memory", {"content": "Lily is allergic to peanuts", "user_id": "lily"}
            )
        )
        ok(
            await alice.call_tool(
                "store_memory", {"content": "Tom is allergic to shellfish", "user_id": "tom"}
            )
        )
        lily = ok(await alice.call_tool(SEARCH, {"query": "food allergies", "user_id": "lily", "limit": 10}))
        assert [m["id"] for m in lily["memories"]] == [mine["id"]]
        assert (
            ok(await alice.call_tool(SEARCH, {"query": "food allergies"}))["memories"] == []
        )  # user default
        assert ok(await alice.call_tool("recall_related", {"query": "allergy", "user_id": "nobody"})) == {
            "memories": []
        }
        for who in ("lily", "tom", "default"):
            assert ok(await bob.call_tool(SEARCH, {"query": "allergic", "user_id": who}))["memories"] == []
            assert (
                ok(await bob.call_tool("recall_related", {"query": "allergic", "user_id": who}))["memories"]
                == []
            )
        assert ok(await bob.call_tool("memory_search", {"search": "allergic"}))["total"] == 0
        before = state(services, "notes")
        assert (
            error(await bob.call_tool("update_memory_importance", {"id": mine["id"], "importance": 1}))[
                "code"
            ]
            == "not_found"
        )
        wrong_user = {"id": mine["id"], "importance": 1, "user_id": "tom"}
        assert error(await alice.call_tool("update_memory_importance", wrong_user))["code"] == "not_found"
        assert state(services, "notes") == before
        # bob's near-identical memory supersedes nothing of alice's
        bobs = ok(
            await bob.call_tool("store_memory", {"content": "Lily is allergic to peanuts", "user_id": "lily"})
        )
        assert bobs["superseded"] == [] and "superseded_by" not in _front(services, mine["id"])[0]


async def test_bad_input_is_refused_and_changes_nothing(services: Services, team: None) -> None:
    async with memory_client(services, "alice") as alice:
        stored = ok(await alice.call_tool("store_memory", {"content": "something to keep"}))
        ok(await alice.call_tool(SEARCH, {"query": "something"}))
        before = state(services, "notes")
        counted = services.control.memory_access("notes", [stored["id"]])
        secret = (
            "-----BEGIN RSA PRIVATE KEY-----\n"
            "MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgwMbRvI0MBZhpF\n"
            "-----END RSA PRIVATE KEY-----"
        )
        for tool, args, code in [
            ("store_memory", {"content": "   "}, "invalid_request"),
            ("store_memory", {"content": secret}, "secret_detected"),
            ("store_memory", {"content": "x", "memory_type": "event"}, "invalid_request"),
            ("store_memory", {"content": "x", "importance": 1.5}, "invalid_request"),
            ("store_memory", {"content": "x", "importance": -0.1}, "invalid_request"),
            ("store_memory", {"content": "x", "user_id": ""}, "invalid_request"),
            ("store_memory", {"content": "x", "remind_at": "tomorrow at nine"}, "invalid_request"),
            ("store_memory", {"content": "x", "remind_at": "2026-12-01T09:00:00"}, "invalid_request"),
            ("store_memory", {"content": "x", "remind_at": "2026-02-30T09:00:00Z"}, "invalid_request"),
            (
                "store_memory",
                {"content": "x", "remind_at": "2026-12-01T09:00:00Z[Mars/Olympus]"},
                "invalid_request",
            ),
            ("store_memory", {"content": "x", "recurrence": "FREQ=DAILY"}, "invalid_request"),  # no remind_at
            (
                "store_memory",
                {"content": "x", "remind_at": "2026-12-01T09:00:00Z", "recurrence": "every monday"},
                "invalid_request",
            ),
            (
                "store_memory",
                {
                    "content": "x",
                    "remind_at": "2026-12-01T09:00:00Z",
                    "recurrence": "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30",
                },
                "invalid_request",
            ),
            (
                "store_memory",
                {"content": "x", "remind_at": "0001-01-01T09:00:00Z", "recurrence": "FREQ=DAILY"},
                "invalid_request",
            ),
            ("store_memory", {"content": "x", "remind_at": "9999-01-01T09:00:00Z"}, "invalid_request"),
            (
                "store_memory",
                {"content": "x", "remind_at": "2026-12-01T09:00:00Z", "recurrence": "FREQ=DAILY;COUNT=5000"},
                "invalid_request",
            ),
            ("store_memory", {"content": "x", "kb": "elsewhere"}, "not_found"),
            ("update_memory_importance", {"id": "0123456789abcdef", "importance": 0.5}, "not_found"),
            ("update_memory_importance", {"id": "../../README", "importance": 0.5}, "not_found"),
            ("update_memory_importance", {"id": stored["id"], "importance": 2}, "invalid_request"),
            (SEARCH, {"query": "  "}, "invalid_request"),
            (SEARCH, {"query": "x", "limit": 0}, "invalid_request"),
            (SEARCH, {"query": "x", "user_id": "a\nb"}, "invalid_request"),
            ("recall_related", {"query": ""}, "invalid_request"),
            ("list_due_memories", {"before": "next week"}, "invalid_request"),
            ("list_due_memories", {"user_id": ""}, "invalid_request"),
        ]:
            assert error(await alice.call_tool(tool, args))["code"] == code, (tool, args)
        assert state(services, "notes") == before
        assert services.control.memory_access("notes", [stored["id"]]) == counted  # refused: nothing counted


async def test_without_an_embedder_word_overlap_ranks_and_supersedes(tmp_path: Any) -> None:
    """KBSERVER_EMBEDDER=none: similarity is the query's words found (search) and Jaccard (supersede)."""
    plain = Settings(data=tmp_path / "plain", admin_token="x" * 32, sample=False, embedder="none")
    svc = open_services(plain.data, plain.options())
    svc.start()
    try:
        kbs.create(svc, ADMIN, "notes", "Team notes")
        make_agent(svc, "alice", {"notes": "read_write"}, tools=["semantic"])
        async with memory_client(svc, "alice") as alice:
            old = ok(await alice.call_tool("store_memory", {"content": "Lily is allergic to peanuts"}))
            ok(await alice.call_tool("store_memory", {"content": "The printer on floor two is broken"}))
            again = ok(await alice.call_tool("store_memory", {"content": "lily is allergic to peanuts!"}))
            assert again["superseded"] == [old["id"]]
            found = ok(await alice.call_tool(SEARCH, {"query": "peanuts allergy", "limit": 5}))
            assert [m["id"] for m in found["memories"]] == [again["id"]] and "unembedded" not in found
            assert ok(await alice.call_tool(SEARCH, {"query": "food intolerance"}))["memories"] == []
    finally:
        svc.close()


async def test_the_memory_file_comes_before_the_reminders(services: Services, kb: str) -> None:
    make_agent(services, "carol", {kb: "read_write"}, tools=["semantic", "auto"])
    soon = datetime.datetime.now(datetime.UTC).replace(microsecond=0) + datetime.timedelta(minutes=20)
    async with memory_client(services, "carol") as carol:
        ok(await carol.call_tool("store_memory", {"content": "Water the plants", "remind_at": _iso(soon)}))
    async with memory_client(services, "carol", mode="legacy") as carol:
        text = carol.instructions or ""
        memory_file, reminders = text.find("MEMORY.md"), text.find("Reminders due by")
        assert 0 <= memory_file < reminders, text  # the agent's own memory file, then what is due
