"""The `memory_tool` set (Anthropic's memory-tool commands) through the SDK client over HTTP and stdio."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client

from kbserver.config import Settings
from kbserver.mcp import RUN_TOOL_NAMES
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.reading import files
from kbserver.services.reviewing import versions
from tests.helpers import git_fsck, make_agent, state
from tests.mcp.clients import error, memory_client, ok
from tests.mcp.transports import Connect, connector

pytestmark = pytest.mark.anyio


@pytest.fixture
def claude(services: Services, kb: str) -> None:
    make_agent(services, "claude", {kb: "read_write"}, tools=["memory_tool"])


@pytest.fixture(params=["http", "stdio"])
def connect(
    request: pytest.FixtureRequest, settings: Settings, services: Services, http_url: str, claude: None
) -> Iterator[Connect]:
    yield connector(request.param, services, settings.data, http_url)


def _versions(services: Services) -> list[dict[str, Any]]:
    return [v.model_dump() for v in versions.listing(services, ADMIN, "notes", limit=100).versions]


def _text(result: Any) -> str:
    assert not result.is_error, result.content
    return str(result.content[0].text)


def _content(services: Services, path: str) -> str:
    return files.read(services, ADMIN, "notes", path).content


async def _memory(client: Client, **args: Any) -> Any:
    return await client.call_tool("memory", args)


async def test_every_command_is_one_version(connect: Connect, services: Services) -> None:
    async with connect("claude") as c:
        assert {t.name for t in (await c.list_tools()).tools} == {"memory", *RUN_TOOL_NAMES}
        empty = _text(await _memory(c, command="view", path="/memories"))
        assert empty.splitlines() == [
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and "
            "node_modules:",
            "0B\t/memories",
        ]
        start = len(_versions(services))
        created = await _memory(
            c, command="create", path="/memories/notes.md", file_text="咖啡: espresso\nline2\n"
        )
        assert _text(created) == "File created successfully at: /memories/notes.md"
        assert created.structured_content["version"] == _versions(services)[0]["version"]
        assert _content(services, "memory-tool/notes.md") == "咖啡: espresso\nline2\n"
        assert _versions(services)[0]["message"] == "memory tool: create /memories/notes.md"

        viewed = _text(await _memory(c, command="view", path="/memories/notes.md"))
        assert viewed == (
            "Here's the content of /memories/notes.md with line numbers:\n"
            "     1\t咖啡: espresso\n     2\tline2\n     3\t"
        )
        ranged = _text(await _memory(c, command="view", path="/memories/notes.md", view_range=[2, -1]))
        assert ranged.splitlines()[1:] == ["     2\tline2", "     3\t"]

        replaced = _text(
            await _memory(
                c, command="str_replace", path="/memories/notes.md", old_str="line2", new_str="第二行"
            )
        )
        assert replaced.startswith("The memory file has been edited.") and "     2\t第二行" in replaced
        inserted = _text(
            await _memory(
                c, command="insert", path="/memories/notes.md", insert_line=0, insert_text="# Notes\n"
            )
        )
        assert inserted == "The file /memories/notes.md has been edited."
        assert _content(services, "memory-tool/notes.md") == "# Notes\n咖啡: espresso\n第二行\n"

        renamed = await _memory(
            c, command="rename", old_path="/memories/notes.md", new_path="/memories/topics/coffee.md"
        )
        assert _text(renamed) == "Successfully renamed /memories/notes.md to /memories/topics/coffee.md"
        assert _versions(services)[0]["paths"] == ["memory-tool/notes.md", "memory-tool/topics/coffee.md"]
        ok(await _memory(c, command="create", path="/memories/topics/deep/x.md", file_text="x"))
        ok(await _memory(c, command="create", path="/memories/.hidden", file_text="h"))
        tree = _text(await _memory(c, command="view", path="/memories"))
        size = len("# Notes\n咖啡: espresso\n第二行\n".encode())
        assert tree.splitlines()[1:] == [
            f"{size + 2}B\t/memories",
            f"{size + 1}B\t/memories/topics/",
            f"{size}B\t/memories/topics/coffee.md",
            "1B\t/memories/topics/deep/",
        ]
        moved = _text(
            await _memory(c, command="rename", old_path="/memories/topics", new_path="/memories/old")
        )
        assert moved == "Successfully renamed /memories/topics to /memories/old"
        assert _content(services, "memory-tool/old/deep/x.md") == "x"
        assert _text(await _memory(c, command="delete", path="/memories/old/coffee.md")) == (
            "Successfully deleted /memories/old/coffee.md"
        )
        assert (
            _text(await _memory(c, command="delete", path="/memories/old"))
            == "Successfully deleted /memories/old"
        )
        assert [f.path for f in files.listing(services, ADMIN, "notes", "memory-tool/").files] == [
            "memory-tool/.hidden"
        ]
        # create, str_replace, insert, rename, create, create, rename, delete, delete: one version each
        assert len(_versions(services)) == start + 9
        assert all(v["author"] == "agent:claude" for v in _versions(services)[:9])
    git_fsck(services.repos.path("notes"))


async def test_errors_change_nothing(connect: Connect, services: Services) -> None:
    kbs.set_limits(services, ADMIN, "notes", max_file_bytes=4000)
    async with connect("claude") as c:
        ok(await _memory(c, command="create", path="/memories/dup.md", file_text="x\ny\nx\n"))
        before = state(services, "notes")
        cases: list[tuple[dict[str, Any], str, str]] = [
            ({"command": "view", "path": "/memories/missing.md"}, "not_found", "does not exist"),
            (
                {"command": "str_replace", "path": "/memories/missing.md", "old_str": "a", "new_str": "b"},
                "not_found",
                "",
            ),
            (
                {"command": "str_replace", "path": "/memories/dup.md", "old_str": "x", "new_str": "z"},
                "ambiguous_match",
                "lines: 1, 3",
            ),
            (
                {"command": "str_replace", "path": "/memories/dup.md", "old_str": "q", "new_str": "z"},
                "no_match",
                "verbatim",
            ),
            (
                {"command": "insert", "path": "/memories/dup.md", "insert_line": 9, "insert_text": "z"},
                "invalid_request",
                "[0, 4]",
            ),
            (
                {"command": "insert", "path": "/memories/nope.md", "insert_line": 0, "insert_text": "z"},
                "not_found",
                "",
            ),
            (
                {"command": "create", "path": "/memories/dup.md", "file_text": "again"},
                "already_exists",
                "already exists",
            ),
            ({"command": "create", "path": "/memories/big.md", "file_text": "b" * 5000}, "too_large", ""),
            (
                {"command": "create", "path": "/memories/k.md", "file_text": "AKIAIOSFODNN7EXAMPLE"},
                "secret_detected",
                "",
            ),
            ({"command": "delete", "path": "/memories"}, "invalid_request", "itself"),
            ({"command": "delete", "path": "/memories/gone"}, "not_found", ""),
            (
                {"command": "rename", "old_path": "/memories/dup.md", "new_path": "/memories/dup.md/x"},
                "invalid_request",
                "",
            ),
            ({"command": "rename", "old_path": "/memories/nope", "new_path": "/memories/b"}, "not_found", ""),
            (
                {"command": "rename", "old_path": "/memories/dup.md", "new_path": "/elsewhere/dup.md"},
                "invalid_request",
                "outside",
            ),
            ({"command": "view", "path": "/memories/dup.md", "view_range": [3, 2]}, "invalid_request", ""),
            ({"command": "create", "path": "/memories/x.md"}, "invalid_request", "file_text"),
            ({"command": "frobnicate", "path": "/memories"}, "invalid_request", ""),
        ]
        escapes = [
            "/memories/../README.md",
            "/etc/passwd",
            "/memories/%2e%2e/README.md",
            "memories/x.md",
            "/memories/a/../../README.md",
            "/memoriesx/a.md",
            "/memories/.git/config",
            "/memories/a\\..\\b",
            "../memories/x",
            "/memories//x",
            "",
        ]
        for path in escapes:
            cases.append(({"command": "create", "path": path, "file_text": "x"}, "invalid_request", ""))
            cases.append(({"command": "view", "path": path}, "invalid_request", ""))
        for args, code, words in cases:
            err = error(await c.call_tool("memory", args))
            assert err["code"] == code, (args, err)
            assert words in err["message"], (args, err)
        assert state(services, "notes") == before


async def test_proposals_and_other_sets(services: Services, kb: str) -> None:
    make_agent(services, "cautious", {kb: "read_write_ask"}, tools=["memory_tool", "context"])
    async with memory_client(services, "cautious", mode="legacy") as c:
        before = state(services, "notes")
        result = await _memory(c, command="create", path="/memories/p.md", file_text="proposed")
        assert "pending" in _text(result) and result.structured_content["proposal"]["status"] == "pending"
        assert state(services, "notes") == before  # a proposal is not a version
        names = {t.name for t in (await c.list_tools()).tools}
        assert "memory" in names and "write_context" in names and "add_memory" not in names


async def test_approval_needs_an_interactive_run(services: Services, kb: str) -> None:
    make_agent(services, "cautious", {kb: "read_write_ask"}, tools=["memory_tool"])
    before = state(services, "notes")
    async with memory_client(services, "cautious") as c:  # sessionless: no run, nobody to ask
        err = error(await _memory(c, command="create", path="/memories/p.md", file_text="x"))
    assert err["code"] == "approval_unavailable" and "start_run" in err["message"]
    assert state(services, "notes") == before
