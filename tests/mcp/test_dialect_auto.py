"""The `auto` tool set through the SDK client over Streamable HTTP and stdio: MEMORY.md and its rules."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest

from kbserver.config import Settings
from kbserver.core.errors import KBError
from kbserver.mcp import RUN_TOOL_NAMES
from kbserver.services import Services
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN
from kbserver.services.reading import files
from kbserver.services.reviewing import versions
from kbserver.services.writing import proposals
from kbserver.store import CommitPlan
from tests.helpers import ADMIN_TOKEN, git_fsck, make_agent, state
from tests.mcp.clients import error, memory_client, ok
from tests.mcp.transports import Connect, connector

pytestmark = pytest.mark.anyio

ALICE = "memory/alice/MEMORY.md"
KID = "memory/kid/MEMORY.md"


@pytest.fixture
def family(services: Services, kb: str) -> None:
    make_agent(services, "alice", {kb: "read_write"}, tools=["context", "auto"])
    make_agent(services, "kid", {kb: "read_write"}, tools=["context", "auto"], parent="alice")


@pytest.fixture(params=["http", "stdio"])
def connect(
    request: pytest.FixtureRequest, settings: Settings, services: Services, http_url: str, family: None
) -> Iterator[Connect]:
    yield connector(request.param, services, settings.data, http_url)


def _file(services: Services, path: str) -> str | None:
    view = services.repos.repo("notes").view(services.repos.repo("notes").head())
    data = view.read(path)
    return data.decode() if data is not None else None


def _outside_write(services: Services, path: str, content: str) -> None:
    """A commit made beside the tools and the write path (as a git push or a restore would)."""
    _, writer = services.repos.get("notes")
    plan = CommitPlan({path: content.encode()}, "outside edit", "admin <admin@kbserver.invalid>", {})
    version, _, _ = writer.submit(lambda tip: plan)
    services.committed("notes", version)


async def test_add_edit_remove_and_the_parent_read_only(connect: Connect, services: Services) -> None:
    async with connect("alice") as alice:
        assert client_tools_include(await alice.list_tools(), {"add_memory", "edit_memory", "write_context"})
        assert alice.instructions and "(empty: nothing remembered yet)" in alice.instructions
        added = ok(await alice.call_tool("add_memory", {"content": "Prefers espresso\n over filter coffee"}))
        assert (
            added["path"] == ALICE and added["kb"] == "notes" and added["bytes_left"] == 2000 - added["bytes"]
        )
        ok(await alice.call_tool("add_memory", {"content": "最喜欢的城市是杭州"}))
        assert _file(services, ALICE) == "- Prefers espresso over filter coffee\n- 最喜欢的城市是杭州\n"
        history = versions.listing(services, ADMIN, "notes", path=ALICE).versions
        assert len(history) == 2  # one version per change
        assert history[0].author == "agent:alice" and history[0].version != added["version"]
        assert history[1].version == added["version"] and history[1].paths == [ALICE]

        edited = ok(
            await alice.call_tool("edit_memory", {"old_string": "espresso", "new_string": "ristretto"})
        )
        assert _file(services, ALICE) == "- Prefers ristretto over filter coffee\n- 最喜欢的城市是杭州\n"
        assert edited["bytes"] == len(_file(services, ALICE).encode())  # type: ignore[union-attr]
        ok(await alice.call_tool("edit_memory", {"old_string": "ristretto over", "new_string": ""}))
        assert _file(services, ALICE) == "- 最喜欢的城市是杭州\n"  # an empty new_string removes the entry

    async with connect("kid") as kid:
        text = kid.instructions or ""
        assert "MEMORY.md of your parent agent alice" in text and "READ-ONLY" in text
        assert "最喜欢的城市是杭州" in text
        ok(await kid.call_tool("add_memory", {"content": "Runs the nightly backup"}))
        assert _file(services, KID) == "- Runs the nightly backup\n"
        before = state(services, "notes")
        # The parent's entry is not in the child's own file, and no tool can reach the parent's.
        assert (
            error(await kid.call_tool("edit_memory", {"old_string": "杭州", "new_string": "上海"}))["code"]
            == "no_match"
        )
        for path in (ALICE, KID):
            refused = error(
                await kid.call_tool(
                    "write_context", {"files": [{"path": path, "mode": "append", "content": "- sneaky\n"}]}
                )
            )
            assert refused["code"] == "forbidden" and refused["path"] == path
        assert state(services, "notes") == before
    git_fsck(services.repos.path("notes"))


def client_tools_include(listing: object, names: set[str]) -> bool:
    return names <= {t.name for t in listing.tools}  # type: ignore[attr-defined]


async def test_the_cap_and_truncated_delivery(connect: Connect, services: Services) -> None:
    async with connect("alice") as alice:
        for i in range(19):
            ok(await alice.call_tool("add_memory", {"content": f"fact {i:02d} " + "x" * 90}))
        size = len(_file(services, ALICE).encode())  # type: ignore[union-attr]
        assert size == 19 * 101
        before = state(services, "notes")
        refused = error(await alice.call_tool("add_memory", {"content": "y" * 150}))
        assert refused["code"] == "too_large" and refused["bytes_left"] == 2000 - size
        assert f"so {2000 - size} bytes are left" in refused["message"]
        assert "Remove or shorten an entry first" in refused["message"]
        grown = error(
            await alice.call_tool("edit_memory", {"old_string": "fact 00", "new_string": "z" * 200})
        )
        assert grown["code"] == "too_large"
        assert state(services, "notes") == before  # nothing changed

    # Made too large from outside: delivered cut at a line boundary, with a note.
    big = "".join(f"- outside fact {i:03d} " + "w" * 80 + "\n" for i in range(30))
    _outside_write(services, ALICE, big)
    async with connect("alice") as alice:
        text = alice.instructions or ""
        assert f"MEMORY.md holds {len(big)} bytes, over its cap of 2000" in text
        shown = text.split('<memory kb="notes" agent="alice">\n', 1)[1].split("\n</memory>", 1)[0] + "\n"
        assert big.startswith(shown) and len(shown.encode()) <= 2000 and shown.endswith("w\n")
        assert len(shown.encode()) > 2000 - 102  # as much as fits, whole lines only
        # Shrinking an oversized file is allowed; growing it is not.
        ok(await alice.call_tool("edit_memory", {"old_string": "outside fact 000", "new_string": ""}))
        assert error(await alice.call_tool("add_memory", {"content": "more"}))["code"] == "too_large"


async def test_admin_edits_within_the_cap_and_agents_cannot_write_it(
    http_url: str, services: Services, family: None
) -> None:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with httpx2.AsyncClient(base_url=http_url, headers=admin) as hc:
        r = await hc.post(
            "/api/v1/kbs/notes/write",
            json={"files": [{"path": ALICE, "mode": "create", "content": "- ok\n"}]},
        )
        assert r.status_code == 200, r.text
        before = state(services, "notes")
        r = await hc.post(
            "/api/v1/kbs/notes/write",
            json={"files": [{"path": ALICE, "mode": "append", "content": "- " + "a" * 2000 + "\n"}]},
        )
        assert r.status_code == 413 and r.json()["error"]["code"] == "too_large"
        assert state(services, "notes") == before
    _, token = agents.rotate(services, ADMIN, "alice")
    async with httpx2.AsyncClient(base_url=http_url, headers={"Authorization": f"Bearer {token}"}) as hc:
        for path in (ALICE, "Memory/alice/memory.md"):
            r = await hc.post(
                "/api/v1/kbs/notes/write", json={"files": [{"path": path, "mode": "append", "content": "x"}]}
            )
            assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", r.text
        assert state(services, "notes") == before
    assert files.read(services, ADMIN, "notes", ALICE).content == "- ok\n"


async def test_tools_follow_the_tool_sets(services: Services, family: None) -> None:
    make_agent(services, "plain", {"notes": "read_write"})
    async with memory_client(services, "plain") as plain:
        names = {t.name for t in (await plain.list_tools()).tools}
        assert "add_memory" not in names and "write_context" in names
        before = state(services, "notes")
        refused = error(await plain.call_tool("add_memory", {"content": "x"}))
        assert refused["code"] == "forbidden" and "(context)" in refused["message"]
        assert state(services, "notes") == before
    make_agent(services, "only", {"notes": "read_write"}, tools=["auto"])
    async with memory_client(services, "only") as only:
        names = {t.name for t in (await only.list_tools()).tools}
        assert names == {"add_memory", "edit_memory", *RUN_TOOL_NAMES}
        assert "Your tool sets are auto: the context tools named above" in (only.instructions or "")


async def test_bad_input_changes_nothing(services: Services, family: None) -> None:
    make_agent(services, "reader", {"notes": "read"}, tools=["auto"])
    async with memory_client(services, "alice") as alice:
        ok(await alice.call_tool("add_memory", {"content": "first"}))
        before = state(services, "notes")
        cases = [
            ("add_memory", {"content": "   \n "}, "invalid_request"),
            ("add_memory", {"content": "key AKIAIOSFODNN7EXAMPLE secret"}, "secret_detected"),
            ("add_memory", {"content": "x" * 2001}, "too_large"),  # CONTRACT §5: over the cap
            ("add_memory", {"content": "x", "kb": "nope"}, "not_found"),
            ("edit_memory", {"old_string": "absent", "new_string": "x"}, "no_match"),
            ("edit_memory", {"old_string": "", "new_string": "x"}, "invalid_request"),
            ("edit_memory", {"old_string": "first", "new_string": "ghp_" + "a1B2" * 9}, "secret_detected"),
        ]
        for tool, args, code in cases:
            assert error(await alice.call_tool(tool, args))["code"] == code, (tool, args)
        ok(await alice.call_tool("add_memory", {"content": "first again"}))
        dup = error(await alice.call_tool("edit_memory", {"old_string": "first", "new_string": "x"}))
        assert dup["code"] == "ambiguous_match"
    async with memory_client(services, "reader") as reader:
        after = state(services, "notes")
        assert error(await reader.call_tool("add_memory", {"content": "x"}))["code"] == "invalid_request"
        assert (
            error(await reader.call_tool("add_memory", {"content": "x", "kb": "notes"}))["code"]
            == "forbidden"
        )
        assert state(services, "notes") == after
    assert before != after  # only the one good add changed something


async def test_proposals_are_capped_when_approved(services: Services, kb: str) -> None:
    make_agent(services, "asker", {kb: "read_write_ask"}, tools=["auto"])
    path = "memory/asker/MEMORY.md"
    async with memory_client(services, "asker", mode="legacy") as asker:  # a session: an interactive run
        first = ok(await asker.call_tool("add_memory", {"content": "small"}))
        assert first["version"] is None and first["proposal"]["status"] == "pending"
        assert _file(services, path) is None  # a proposal is not a version
        proposals.approve(services, ADMIN, kb, first["proposal"]["id"])
        assert _file(services, path) == "- small\n"
        one = ok(await asker.call_tool("add_memory", {"content": "a" * 1200}))["proposal"]["id"]
        two = ok(await asker.call_tool("add_memory", {"content": "b" * 1200}))["proposal"]["id"]
    proposals.approve(services, ADMIN, kb, one)
    before = state(services, kb)
    with pytest.raises(KBError) as refused:  # each fitted when proposed; together they do not
        proposals.approve(services, ADMIN, kb, two)
    assert (
        refused.value.code == "too_large"
        and refused.value.details["bytes_left"] == 2000 - len("- small\n") - 1203
    )
    assert state(services, kb) == before
