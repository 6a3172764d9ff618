"""The `typed` tool set through the SDK client over HTTP and stdio: upserts, compiled files, archives."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kbserver.config import Settings
from kbserver.dialects.typed_records import compile_context, compile_user, parse_record
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.reading import files
from kbserver.services.reviewing import versions
from tests.helpers import git_fsck, make_agent, state
from tests.mcp.clients import error, memory_client, ok
from tests.mcp.transports import Connect, connector

pytestmark = pytest.mark.anyio


@pytest.fixture
def typist(services: Services, kb: str) -> None:
    make_agent(services, "typist", {kb: "read_write"}, tools=["typed"])


@pytest.fixture(params=["http", "stdio"])
def connect(
    request: pytest.FixtureRequest, settings: Settings, services: Services, http_url: str, typist: None
) -> Iterator[Connect]:
    yield connector(request.param, services, settings.data, http_url)


def _head_version(services: Services) -> dict[str, Any]:
    return versions.listing(services, ADMIN, "notes", limit=1).versions[0].model_dump()


def _read(services: Services, path: str) -> str:
    return files.read(services, ADMIN, "notes", path).content


def _paths(services: Services, prefix: str = "") -> list[str]:
    return [f.path for f in files.listing(services, ADMIN, "notes", prefix).files]


def _recompiled(services: Services) -> tuple[str, str]:
    records = [
        parse_record(_read(services, p))
        for p in _paths(services)
        if p.split("/")[0] in ("self", "relationship", "topic", "saved")
    ]
    return compile_user(records), compile_context(records)


async def test_upsert_compiled_files_and_forget(connect: Connect, services: Services) -> None:
    async with connect("typist") as c:
        first = ok(
            await c.call_tool(
                "save_memory",
                {"type": "self", "category": "work", "key": "employer", "summary": "Works at Acme"},
            )
        )
        assert first["status"] == "created" and first["id"] == "work/employer"
        assert first["taskId"] == _head_version(services)["version"]
        assert set(_head_version(services)["paths"]) == {"self/work/employer.md", "USER.md"}  # one version
        # "You remembered wrong": one call, matched by category+key (case and spacing ignored), same id.
        fixed = ok(
            await c.call_tool(
                "save_memory",
                {
                    "type": "self",
                    "category": "Work",
                    "key": " employer ",
                    "summary": "Works at Globex since 2025",
                },
            )
        )
        assert fixed["status"] == "updated" and fixed["id"] == first["id"]
        assert set(_head_version(services)["paths"]) == {"self/work/employer.md", "USER.md"}
        assert "Works at Globex since 2025" in _read(services, "USER.md") and "Acme" not in _read(
            services, "USER.md"
        )

        zhang = ok(
            await c.call_tool(
                "save_memory", {"type": "relationship", "name": "张三", "summary": "大学同学，住在杭州"}
            )
        )
        assert zhang["id"] == "张三" and "relationship/张三.md" in _paths(services)
        alice = ok(
            await c.call_tool(
                "save_memory", {"type": "relationship", "name": "Alice Smith", "summary": "Sister"}
            )
        )
        again = ok(
            await c.call_tool(
                "save_memory",
                {"type": "relationship", "name": "alice  smith", "summary": "Older sister, lives in Lyon"},
            )
        )
        assert alice["id"] == again["id"] == "alice-smith" and again["status"] == "updated"
        odd = ok(
            await c.call_tool(
                "save_memory", {"type": "topic", "name": "C++ / Rust: ../..", "summary": "Languages"}
            )
        )
        assert odd["id"] == "c-rust" and "topic/c-rust.md" in _paths(services)

        plan = ok(
            await c.call_tool(
                "save_memory",
                {
                    "type": "saved",
                    "saved_kind": "arrangement",
                    "title": "Dentist",
                    "summary": "Dentist on Friday 10:00",
                    "saved_reason": "appointment",
                    "source_refs": [{"kind": "conversation", "date": "2026-11-28"}],
                },
            )
        )
        assert set(_head_version(services)["paths"]) == {f"saved/{plan['id']}.md", "CONTEXT.md"}
        note = ok(await c.call_tool("save_memory", {"type": "saved", "summary": "A plain note"}))
        assert note["id"] != plan["id"] and _head_version(services)["paths"] == [f"saved/{note['id']}.md"]
        context = _read(services, "CONTEXT.md")
        assert (
            context.index("**Dentist**") > context.index("## Saved arrangements")
            and "plain note" not in context
        )
        assert (_read(services, "USER.md"), context) == _recompiled(
            services
        )  # deterministic from the records

        found = ok(await c.call_tool("query_index", {"query": "Globex"}))["entries"]
        assert found[0] == {
            "type": "self",
            "id": "work/employer",
            "label": "Work: employer",
            "summary": "Works at Globex since 2025",
        }
        assert (
            ok(await c.call_tool("query_index", {"query": "杭州", "types": ["relationship"]}))["entries"][0][
                "id"
            ]
            == "张三"
        )
        assert ok(await c.call_tool("query_index", {"query": "杭州", "types": ["topic"]}))["entries"] == []
        record = ok(await c.call_tool("get_memory", {"type": "saved", "id": plan["id"]}))
        assert record["source_refs"] == [{"kind": "conversation", "date": "2026-11-28"}]
        assert record["saved_kind"] == "arrangement" and record["summary"] == "Dentist on Friday 10:00"
        readme = ok(await c.call_tool("get_memory", {"type": "source", "id": "README.md"}))
        assert readme["kind"] == "file" and readme["content"].startswith("# notes")

        forgot = ok(
            await c.call_tool(
                "forget_memory",
                {"type": "saved", "id": plan["id"], "reason": "the appointment was cancelled"},
            )
        )
        head = _head_version(services)
        assert forgot["taskId"] == head["version"] and head["message"].endswith(
            "(reason: the appointment was cancelled)"
        )
        assert set(head["paths"]) == {f"saved/{plan['id']}.md", "CONTEXT.md"}
        assert "Dentist" not in _read(services, "CONTEXT.md")
        assert (_read(services, "USER.md"), _read(services, "CONTEXT.md")) == _recompiled(services)
        # Undoable: the record is still in history, and reverting to before it brings it back.
        versions.revert(services, ADMIN, "notes", head["parent"])
        assert "Dentist" in _read(services, "CONTEXT.md")
    git_fsck(services.repos.path("notes"))


async def test_archive_and_recall(connect: Connect, services: Services) -> None:
    async with connect("typist") as c:
        one = ok(
            await c.call_tool(
                "archive_day",
                {
                    "date": "2026-11-28",
                    "summary": "Planned the trip",
                    "facts": ["Flight at 9:40", "Hotel in 京都"],
                },
            )
        )
        assert one["status"] == "created" and _head_version(services)["paths"] == ["archive/2026-11-28.json"]
        two = ok(
            await c.call_tool(
                "archive_day",
                {
                    "date": "2026-11-28",
                    "diary": "Booked the hotel",
                    "summary": "Booked everything",
                    "facts": ["Hotel in 京都", "Taxi booked"],
                },
            )
        )
        assert two["status"] == "merged"
        ok(await c.call_tool("archive_day", {"date": "2026-11-30", "summary": "Quiet day at home"}))
        day = ok(await c.call_tool("get_memory", {"type": "source", "id": "2026-11-28"}))
        assert day["kind"] == "conversation" and day["facts"] == [
            "Flight at 9:40",
            "Hotel in 京都",
            "Taxi booked",
        ]
        assert (
            day["summary"] == "Planned the trip\n\nBooked everything" and day["diary"] == "Booked the hotel"
        )
        by_word = ok(await c.call_tool("recall_raw", {"query": "京都 hotel"}))["days"]
        assert [d["date"] for d in by_word] == ["2026-11-28"]
        by_range = ok(await c.call_tool("recall_raw", {"startDate": "2026-11-01", "endDate": "2026-11-30"}))[
            "days"
        ]
        assert [d["date"] for d in by_range] == ["2026-11-30", "2026-11-28"]  # newest first
        assert (
            ok(await c.call_tool("recall_raw", {"endDate": "2026-11-29"}))["days"][0]["date"] == "2026-11-28"
        )
        assert ok(await c.call_tool("recall_raw", {"query": "quiet", "startDate": "2026-11-29"}))["days"][0][
            "date"
        ] == ("2026-11-30")


async def test_bad_input_changes_nothing(services: Services, typist: None) -> None:
    kbs.set_limits(services, ADMIN, "notes", max_file_bytes=3000)
    async with memory_client(services, "typist") as c:
        ok(await c.call_tool("save_memory", {"type": "topic", "name": "Rust", "summary": "A language"}))
        ok(await c.call_tool("archive_day", {"date": "2026-11-28", "summary": "A day"}))
        before = state(services, "notes")
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("save_memory", {"type": "person", "summary": "x", "name": "y"}, "invalid_request"),
            ("save_memory", {"type": "self", "category": "work", "summary": "x"}, "invalid_request"),
            (
                "save_memory",
                {"type": "relationship", "name": "Bob", "key": "k", "summary": "x"},
                "invalid_request",
            ),
            ("save_memory", {"type": "topic", "name": "   ", "summary": "x"}, "invalid_request"),
            ("save_memory", {"type": "topic", "name": "Go", "summary": "  "}, "invalid_request"),
            ("save_memory", {"type": "saved", "saved_kind": "bogus", "summary": "x"}, "invalid_request"),
            (
                "save_memory",
                {
                    "type": "saved",
                    "summary": "x",
                    "source_refs": [{"kind": "conversation", "date": "2026-13-01"}],
                },
                "invalid_request",
            ),
            (
                "save_memory",
                {"type": "saved", "summary": "x", "source_refs": [{"kind": "file", "path": "../etc"}]},
                "invalid_request",
            ),
            (
                "save_memory",
                {"type": "saved", "summary": "x", "source_refs": [{"kind": "web", "url": "u"}]},
                "invalid_request",
            ),
            (
                "save_memory",
                {"type": "topic", "name": "Keys", "summary": "AKIAIOSFODNN7EXAMPLE"},
                "secret_detected",
            ),
            ("save_memory", {"type": "topic", "name": "Rust", "summary": "r" * 4000}, "too_large"),
            ("forget_memory", {"type": "topic", "id": "nope"}, "not_found"),
            ("forget_memory", {"type": "topic", "id": "../README"}, "not_found"),
            ("forget_memory", {"type": "person", "id": "rust"}, "invalid_request"),
            ("get_memory", {"type": "topic", "id": "nope"}, "not_found"),
            ("get_memory", {"type": "self", "id": "rust"}, "not_found"),
            ("get_memory", {"type": "bogus", "id": "rust"}, "invalid_request"),
            ("get_memory", {"type": "source", "id": "1999-01-01"}, "not_found"),
            ("get_memory", {"type": "source", "id": "../../etc/passwd"}, "not_found"),
            ("query_index", {"query": "rust", "types": ["bogus"]}, "invalid_request"),
            ("query_index", {"query": "  ,, "}, "invalid_request"),
            ("archive_day", {"date": "2026-11-31", "summary": "x"}, "invalid_request"),
            ("archive_day", {"date": "26-11-01", "summary": "x"}, "invalid_request"),
            ("archive_day", {"date": "2026-11-28"}, "invalid_request"),
            ("archive_day", {"date": "2026-11-29", "diary": "token ghp_" + "a1B2" * 9}, "secret_detected"),
            ("archive_day", {"date": "2026-11-29", "diary": "d" * 4000}, "too_large"),
            ("recall_raw", {}, "invalid_request"),
            ("recall_raw", {"startDate": "yesterday"}, "invalid_request"),
            ("recall_raw", {"startDate": "2026-11-30", "endDate": "2026-11-01"}, "invalid_request"),
            ("save_memory", {"type": "topic", "name": "x", "summary": "x", "kb": "nope"}, "not_found"),
        ]
        for tool, args, code in cases:
            got = error(await c.call_tool(tool, args))
            assert got["code"] == code, (tool, args, got)
        assert state(services, "notes") == before
