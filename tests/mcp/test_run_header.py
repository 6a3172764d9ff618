"""The `Kb-Run` header (CONTRACT.md §9): over real HTTP with the official MCP client, the run of every
tool call and resource read that names none; an explicit `run` argument wins over it."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from starlette.testclient import TestClient

from kbserver.core.model import WriteRequest
from kbserver.services import Services
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN
from kbserver.services.reviewing import versions
from kbserver.services.writing import writes
from tests.helpers import make_agent, state
from tests.mcp.clients import error, http_client, ok

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]


def _token(services: Services, agent: str) -> dict[str, str]:
    _, token = agents.rotate(services, ADMIN, agent)
    return {"Authorization": f"Bearer {token}"}


def _create(path: str, content: str = "x\n") -> dict[str, Any]:
    return {"files": [{"path": path, "mode": "create", "content": content}]}


def _newest_run(services: Services, kb: str) -> str | None:
    return versions.listing(services, ADMIN, kb, limit=1).versions[0].run


@pytest.mark.parametrize("mode", MODES)
async def test_the_header_names_the_run_of_every_call(
    http_url: str, client: TestClient, services: Services, kb: str, mode: str
) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    auth = _token(services, "bob")
    run = client.post("/api/v1/runs", json={"kbs": [kb]}, headers=auth).json()["id"]
    readme = services.repos.repo(kb).view(services.repos.repo(kb).head()).read("README.md")
    assert readme is not None
    later = {"path": "README.md", "mode": "append", "content": "later\n"}
    writes.submit(services, ADMIN, kb, WriteRequest.model_validate({"files": [later]}))
    async with http_client(http_url, {**auth, "Kb-Run": run}, mode=mode) as bob:
        ok(await bob.call_tool("write_context", _create("a.md")))
        assert _newest_run(services, kb) == run  # the write carries the header's run
        snapshot = (await bob.read_resource(f"kb://{kb}/README.md")).contents[0]
        assert snapshot.text == readme.decode()  # type: ignore[union-attr]  # the run's pinned version
        current = ok(await bob.call_tool("read_context_file", {"path": "README.md"}))
        assert current["content"].endswith("later\n")  # read_context_file: the current file, as always
        other = ok(await bob.call_tool("start_run", {}))["run"]
        ok(await bob.call_tool("write_context", {**_create("b.md"), "run": other}))
        assert _newest_run(services, kb) == other  # an explicit `run` wins over the header


@pytest.mark.parametrize("mode", MODES)
async def test_an_ask_agent_writes_proposals_through_the_header(
    http_url: str, client: TestClient, services: Services, kb: str, mode: str
) -> None:
    make_agent(services, "asker", {kb: "read_write_ask"})
    auth = _token(services, "asker")
    run = client.post("/api/v1/runs", json={"interactive": True}, headers=auth).json()["id"]
    before = state(services, kb)
    async with http_client(http_url, {**auth, "Kb-Run": run}, mode=mode) as asker:
        out = ok(await asker.call_tool("write_context", _create("idea.md")))
        assert out["proposal"]["status"] == "pending"  # no `run` passed: the header's interactive run
    assert state(services, kb) == before


@pytest.mark.parametrize("mode", MODES)
async def test_a_header_naming_no_live_run_of_the_caller_is_not_found(
    http_url: str, client: TestClient, services: Services, kb: str, mode: str
) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    make_agent(services, "eve", {kb: "read_write"})
    bob, eve = _token(services, "bob"), _token(services, "eve")
    ended = client.post("/api/v1/runs", json={}, headers=bob).json()["id"]
    assert client.post(f"/api/v1/runs/{ended}/end", headers=bob).status_code == 200
    eves = client.post("/api/v1/runs", json={}, headers=eve).json()["id"]
    before = state(services, kb)
    for run, words in ((ended, "was ended"), (eves, "does not exist"), ("run_nope", "does not exist")):
        async with http_client(http_url, {**bob, "Kb-Run": run}, mode=mode) as client_:
            err = error(await client_.call_tool("write_context", _create("x.md")))
            assert err["code"] == "not_found" and words in err["message"], (run, err)
            err = error(await client_.call_tool("read_context_file", {"path": "README.md"}))
            assert err["code"] == "not_found", run
            with pytest.raises(MCPError) as missing:
                await client_.read_resource(f"kb://{kb}/README.md")
            assert missing.value.error.message.startswith("not_found: ")
    assert state(services, kb) == before
