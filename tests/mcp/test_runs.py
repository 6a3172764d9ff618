"""Runs as explicit handles (start_run, `run` on every tool) over real HTTP, in both protocol modes."""

from __future__ import annotations

import time
from typing import Any

import jsonschema
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from starlette.testclient import TestClient

from kbserver.control import RunRow
from kbserver.mcp.server import TOOLS_TTL_MS
from kbserver.services import Services
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.reading import files
from kbserver.services.reviewing import versions
from tests.helpers import ADMIN_TOKEN, git_fsck, make_agent, state
from tests.mcp.clients import error, http_client, ok
from tests.web.session import log_in

pytestmark = pytest.mark.anyio

MODES = [("auto", "2026-07-28"), ("legacy", "2025-11-25")]

# tool set -> (two writes, one read) with `run` added by the test; each write makes one version.
DIALECTS: dict[str, tuple[list[tuple[str, dict[str, Any]]], tuple[str, dict[str, Any]] | None]] = {
    "context": (
        [
            ("write_context", {"files": [{"path": "a.md", "mode": "create", "content": "one\n"}]}),
            ("write_context", {"files": [{"path": "README.md", "mode": "append", "content": "- a.md\n"}]}),
        ],
        ("search_context", {"query": "notes"}),
    ),
    "memory": (
        [("memory_add", {"content": "Espresso needs 9 bar."}), ("memory_add", {"content": "Tea at 80 C."})],
        ("memory_search", {"search": "espresso", "mode": "keyword"}),
    ),
    "semantic": (
        [("store_memory", {"content": "Espresso needs 9 bar."}), ("store_memory", {"content": "Tea, 80 C."})],
        ("list_due_memories", {}),
    ),
    "typed": (
        [
            ("save_memory", {"type": "topic", "name": "coffee", "summary": "espresso"}),
            ("save_memory", {"type": "topic", "name": "tea", "summary": "green"}),
        ],
        ("query_index", {"query": "coffee"}),
    ),
    "auto": ([("add_memory", {"content": "likes espresso"}), ("add_memory", {"content": "likes tea"})], None),
    "memory_tool": (
        [
            ("memory", {"command": "create", "path": "/memories/a.md", "file_text": "one"}),
            ("memory", {"command": "create", "path": "/memories/b.md", "file_text": "two"}),
        ],
        ("memory", {"command": "view", "path": "/memories"}),
    ),
}
CONTEXT_READS: list[tuple[str, dict[str, Any]]] = [
    ("list_context_files", {}),
    ("read_context_file", {"path": "README.md"}),
    ("list_context_versions", {}),
    ("search_context", {"query": "notes"}),
]


def _connect(url: str, services: Services, agent: str, mode: str) -> Any:
    _, token = agents.rotate(services, ADMIN, agent)
    return http_client(url, {"Authorization": f"Bearer {token}"}, mode=mode)


async def _text(client: Client, uri: str) -> str:
    return (await client.read_resource(uri)).contents[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize(("mode", "protocol"), MODES)
async def test_a_run_through_every_dialect(
    http_url: str, services: Services, kb: str, mode: str, protocol: str
) -> None:
    repo = services.repos.repo(kb)
    for tool_set in DIALECTS:
        make_agent(services, f"a-{tool_set}".replace("_", "-"), {kb: "read_write"}, tools=[tool_set])
    for tool_set, (calls, read) in DIALECTS.items():
        name = f"a-{tool_set}".replace("_", "-")
        readme = repo.view(repo.head()).read("README.md")
        assert readme is not None
        async with _connect(http_url, services, name, mode) as client:
            assert client.protocol_version == protocol
            started = ok(await client.call_tool("start_run", {"kbs": [kb]}))
            run = started["run"]
            pinned = repo.head()
            assert started["mounts"] == {kb: pinned} and not started["interactive"]
            assert set(started) == {"run", "mounts", "interactive", "expires_at", "instructions"}
            assert started["expires_at"].endswith("Z")
            assert run in started["instructions"] and "README.md first" in started["instructions"]
            for tool, args in calls:
                assert ok(await client.call_tool(tool, {**args, "run": run})), (tool_set, tool)
            if read is not None:
                assert ok(await client.call_tool(read[0], {**read[1], "run": run})), (tool_set, read)
            # The snapshot is as the run started; the KB moved on by exactly two versions of this run.
            assert await _text(client, f"kb://{kb}/README.md?run={run}") == readme.decode()
            page = versions.listing(services, caller_for(services, name), kb, limit=2)
            assert [v.run for v in page.versions] == [run, run], tool_set
            assert page.versions[-1].parent == pinned, tool_set
            if tool_set == "context":
                current = ok(await client.call_tool("read_context_file", {"path": "README.md", "run": run}))
                assert current["content"] == readme.decode() + "- a.md\n"  # read_context_file: current
                at_pin = ok(
                    await client.call_tool("read_context_file", {"path": "README.md", "version": pinned})
                )
                assert at_pin["content"] == readme.decode()
                with pytest.raises(MCPError) as missing:  # a.md came after the snapshot
                    await client.read_resource(f"kb://{kb}/a.md?run={run}")
                assert missing.value.error.message.startswith("not_found: ")
                if mode == "auto":  # sessionless, no run named: the current file
                    assert await _text(client, f"kb://{kb}/a.md") == "one\n"
                else:  # a session's implicit run pinned the KB at initialize, before a.md
                    with pytest.raises(MCPError):
                        await client.read_resource(f"kb://{kb}/a.md")
    git_fsck(services.repos.path(kb))


@pytest.mark.parametrize(("mode", "protocol"), MODES)
async def test_foreign_expired_and_unknown_runs_are_not_found(
    http_url: str, services: Services, kb: str, mode: str, protocol: str
) -> None:
    make_agent(services, "bob", {kb: "read_write"}, tools=["context", "memory"])
    make_agent(services, "eve", {kb: "read_write"}, tools=["context", "memory"])
    now = time.time()
    services.control.add_run(
        RunRow(
            id="run_" + "0" * 24, agent="bob", created=now - 10, expires=now - 1, interactive=True, mounts={}
        )
    )
    async with _connect(http_url, services, "bob", mode) as bob:
        bobs = ok(await bob.call_tool("start_run", {}))["run"]
    before = state(services, kb)
    async with _connect(http_url, services, "eve", mode) as eve:
        assert eve.protocol_version == protocol
        for run in (bobs, "run_" + "0" * 24, "run_nope"):
            for tool, args in [
                *CONTEXT_READS,
                ("write_context", {"files": [{"path": "x.md", "mode": "create", "content": "x\n"}]}),
                ("memory_add", {"content": "sneaky"}),
                ("memory_search", {"search": "x"}),
            ]:
                err = error(await eve.call_tool(tool, {**args, "run": run}))
                assert err["code"] == "not_found" and "start a new run" in err["message"], (tool, run)
            with pytest.raises(MCPError) as missing:
                await eve.read_resource(f"kb://{kb}/README.md?run={run}")
            assert missing.value.error.message.startswith("not_found: ")
    async with _connect(http_url, services, "bob", mode) as bob:  # bob's own expired run is gone too
        err = error(await bob.call_tool("write_context", {"files": [], "run": "run_" + "0" * 24}))
        assert err["code"] == "invalid_request"  # the arguments are checked first
        err = error(
            await bob.call_tool(
                "write_context",
                {"files": [{"path": "x.md", "mode": "create", "content": "x\n"}], "run": "run_" + "0" * 24},
            )
        )
        assert err["code"] == "not_found"
    assert state(services, kb) == before


async def test_start_run_errors(http_url: str, services: Services, kb: str) -> None:
    make_agent(services, "bob", {kb: "read"})
    async with _connect(http_url, services, "bob", "auto") as bob:
        assert error(await bob.call_tool("start_run", {"kbs": ["nope"]}))["code"] == "not_found"
        assert error(await bob.call_tool("start_run", {"kbs": [kb, kb]}))["code"] == "invalid_request"
        assert error(await bob.call_tool("start_run", {"interactive": "yes"}))["code"] == "invalid_request"
        assert error(await bob.call_tool("start_run", {"label": "a\nb"}))["code"] == "invalid_request"
        labelled = ok(await bob.call_tool("start_run", {"label": "triage open issues"}))
        assert services.control.run(labelled["run"]).label == "triage open issues"  # type: ignore[union-attr]
        read_only = ok(await bob.call_tool("start_run", {"interactive": True}))
        assert read_only["mounts"] == {kb: services.repos.repo(kb).head()} and read_only["interactive"]
        err = error(
            await bob.call_tool(
                "write_context",
                {"files": [{"path": "x.md", "mode": "create", "content": "x"}], "run": read_only["run"]},
            )
        )
        assert err["code"] == "forbidden"
    async with http_client(http_url, {"Authorization": f"Bearer {ADMIN_TOKEN}"}) as admin:
        assert error(await admin.call_tool("start_run", {}))["code"] == "forbidden"


@pytest.mark.parametrize(("mode", "protocol"), MODES)
async def test_ask_before_write_in_an_interactive_run(
    http_url: str, client: TestClient, services: Services, kb: str, mode: str, protocol: str
) -> None:
    make_agent(services, "asker", {kb: "read_write_ask"}, tools=["context", "memory"])
    make_agent(services, "eve", {kb: "read_write"})
    idea = {"files": [{"path": "idea.md", "mode": "create", "content": "an idea\n"}]}
    before = state(services, kb)
    async with _connect(http_url, services, "asker", mode) as asker:
        assert asker.protocol_version == protocol
        if mode == "auto":  # no run named, none implied: nobody to ask
            err = error(await asker.call_tool("write_context", idea))
            assert err["code"] == "approval_unavailable" and "start_run" in err["message"]
        plain = ok(await asker.call_tool("start_run", {}))["run"]
        err = error(await asker.call_tool("write_context", {**idea, "run": plain}))
        assert err["code"] == "approval_unavailable" and "not interactive" in err["message"]
        assert state(services, kb) == before

        run = ok(await asker.call_tool("start_run", {"interactive": True}))["run"]
        first = ok(await asker.call_tool("write_context", {**idea, "run": run}))["proposal"]
        memo = ok(await asker.call_tool("memory_add", {"content": "a cautious fact", "run": run}))
        assert memo["proposal"]["status"] == "pending"
        assert state(services, kb) == before  # proposals are not versions
        pending = ok(await asker.call_tool("get_proposal", {"id": first["id"]}))
        assert pending["status"] == "pending" and pending["kb"] == kb
        assert (
            pending["files"] == [{"path": "idea.md", "mode": "create"}]
            and pending["diff"][0]["change"] == "added"
        )

        # The admin approves it in the web admin.
        csrf = log_in(client)
        r = client.post(
            f"/admin/kbs/{kb}/proposals/{first['id']}/approve", data={"csrf": csrf}, follow_redirects=False
        )
        assert r.status_code == 303, r.text
        approved = ok(await asker.call_tool("get_proposal", {"id": first["id"]}))
        head = services.repos.repo(kb).head()
        assert approved["status"] == "approved" and approved["version"] == head and approved["diff"] is None
        assert versions.listing(services, ADMIN, kb, limit=1).versions[0].run == run

        # A second proposal goes stale when the file changes under it; approving it is refused.
        edit = {
            "files": [
                {
                    "path": "idea.md",
                    "mode": "append",
                    "content": "more\n",
                    "expected_sha256": _sha(services, kb),
                }
            ]
        }
        second = ok(await asker.call_tool("write_context", {**edit, "run": run}))["proposal"]
        async with _connect(http_url, services, "eve", mode) as eve:
            ok(
                await eve.call_tool(
                    "write_context", {"files": [{"path": "idea.md", "mode": "append", "content": "eve\n"}]}
                )
            )
            assert error(await eve.call_tool("get_proposal", {"id": second["id"]}))["code"] == "not_found"
        stale = ok(await asker.call_tool("get_proposal", {"id": second["id"]}))
        assert stale["status"] == "stale" and stale["reason"].startswith("stale: ")
        moved = state(services, kb)
        r = client.post(
            f"/admin/kbs/{kb}/proposals/{second['id']}/approve", data={"csrf": csrf}, follow_redirects=False
        )
        assert r.status_code == 409 and state(services, kb) == moved
        assert ok(await asker.call_tool("get_proposal", {"id": second["id"]}))["status"] == "stale"

        # The admin rejects the memory with a reason the agent can read.
        r = client.post(
            f"/admin/kbs/{kb}/proposals/{memo['proposal']['id']}/reject",
            data={"csrf": csrf, "reason": "not a fact"},
            follow_redirects=False,
        )
        assert r.status_code == 303
        rejected = ok(await asker.call_tool("get_proposal", {"id": memo["proposal"]["id"]}))
        assert (rejected["status"], rejected["reason"]) == ("rejected", "not a fact")
        assert error(await asker.call_tool("get_proposal", {"id": "prop_nope"}))["code"] == "not_found"
    git_fsck(services.repos.path(kb))


def _sha(services: Services, kb: str) -> str:
    return files.read(services, ADMIN, kb, "idea.md").sha256


async def test_instructions_say_when_to_start_a_run(http_url: str, services: Services, kb: str) -> None:
    make_agent(services, "asker", {kb: "read_write_ask"})
    async with _connect(http_url, services, "asker", "auto") as sessionless:
        text = sessionless.instructions or ""
    assert 'call start_run {"interactive": true}' in text and "pass the `run`" in text
    assert "get_proposal" in text
    async with _connect(http_url, services, "asker", "legacy") as legacy:
        text = legacy.instructions or ""
    assert "You need no start_run" in text and "This session is run run_" in text


async def test_tools_list_is_cacheable_per_agent(http_url: str, services: Services, kb: str) -> None:
    make_agent(services, "bob", {kb: "read_write"}, tools=["context", "memory"])
    async with _connect(http_url, services, "bob", "auto") as bob:
        first = await bob.list_tools(cache_mode="bypass")
        second = await bob.list_tools(cache_mode="bypass")
        run = ok(await bob.call_tool("start_run", {}))["run"]
        ok(await bob.call_tool("memory_add", {"content": "a fact", "run": run}))
        third = await bob.list_tools(cache_mode="bypass")
    assert (first.ttl_ms, first.cache_scope) == (TOOLS_TTL_MS, "private")
    assert first.tools == second.tools == third.tools  # a run or a write changes nothing in it


async def test_an_unknown_tool_is_not_found(http_url: str, services: Services, kb: str) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    before = state(services, kb)
    async with _connect(http_url, services, "bob", "auto") as bob:
        err = error(await bob.call_tool("test_simple_text", {}))
        assert err["code"] == "not_found" and "tools/list" in err["message"]
        err = error(await bob.call_tool("memory_add", {"content": "x"}))  # exists, not in bob's sets
        assert err["code"] == "forbidden"
    assert state(services, kb) == before


async def test_every_tool_publishes_an_output_schema_its_results_meet(
    http_url: str, services: Services, kb: str
) -> None:
    sets = ["context", "memory", "semantic", "typed", "auto", "memory_tool"]
    make_agent(services, "all", {kb: "read_write"}, tools=sets)
    async with _connect(http_url, services, "all", "auto") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        missing = [name for name, tool in tools.items() if tool.output_schema is None]
        assert missing == []
        run = ok(await client.call_tool("start_run", {}))["run"]
        added = ok(await client.call_tool("memory_add", {"content": "Espresso needs 9 bar.", "run": run}))
        stored = ok(await client.call_tool("store_memory", {"content": "Tea wants 80 C.", "run": run}))
        calls: list[tuple[str, dict[str, Any]]] = [
            ("memory_search", {"search": "espresso"}),
            ("memory_update", {"id": added["id"], "content": "Espresso needs 9 bar of pressure."}),
            ("memory_task_wait", {"taskId": added["taskId"], "timeout": 30}),
            ("search_memories_by_semantics", {"query": "tea temperature"}),
            ("recall_related", {"query": "tea"}),
            ("update_memory_importance", {"id": stored["id"], "importance": 0.9}),
            ("store_memory", {"content": "Call the club", "remind_at": "2026-12-01T09:00:00Z"}),
            ("list_due_memories", {"before": "2027-01-01T00:00:00Z"}),
            ("memory_delete", {"id": added["id"]}),
        ]
        results = {"memory_add": added, "store_memory": stored}
        for name, args in calls:
            results[name] = ok(await client.call_tool(name, {**args, "run": run}))
    for name, result in results.items():
        jsonschema.validate(result, tools[name].output_schema)  # type: ignore[arg-type]
    assert results["list_due_memories"]["memories"][0]["content"] == "Call the club"
    assert results["memory_delete"]["deleted"] is True
