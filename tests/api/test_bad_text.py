"""NUL and lone surrogates are `invalid_request` on both control stores, at one input boundary of
each edge (HTTP bodies, queries and path segments; MCP tool arguments) and, behind it, in the stores
themselves: PostgreSQL's DataError (NUL) and a lone surrogate no driver can encode are 400, never 500.
Nothing changes."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client
from starlette.testclient import TestClient

from kbserver.config import Settings
from kbserver.core.errors import InvalidRequest
from kbserver.mcp import Binding, build_server
from kbserver.services import Services
from kbserver.services.access.auth import caller_for
from tests.helpers import make_agent, pending_proposal, state

ADMIN = {"Authorization": "Bearer test-admin-token"}


@pytest.fixture
def settings(settings_on_both_stores: Settings) -> Settings:
    return settings_on_both_stores


@pytest.fixture
def pending(services: Services, kb: str) -> str:
    """A pending proposal of agent `asker`."""
    return pending_proposal(services, kb)


def _refused(answer: Any) -> None:
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "invalid_request", answer.text


def test_http_ids_names_and_texts(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], pending: str
) -> None:
    before = state(services, kb), services.control.proposal(kb, pending)
    for bad in ("%00", "x%00y"):
        _refused(client.get(f"/api/v1/runs/run_{bad}/kbs/{kb}/files", headers=agent))
        _refused(client.get(f"/api/v1/runs/run_{bad}/kbs/{kb}/files/README.md", headers=agent))
        _refused(client.get(f"/api/v1/kbs/{kb}/proposals/p{bad}", headers=ADMIN))
        _refused(client.post(f"/api/v1/kbs/{kb}/proposals/p{bad}/approve", headers=ADMIN))
        _refused(client.post(f"/api/v1/kbs/{kb}/proposals/p{bad}/reject", headers=ADMIN, json={}))
        _refused(client.get(f"/api/v1/agents/bob{bad}", headers=ADMIN))
        _refused(client.delete(f"/api/v1/agents/bob{bad}", headers=ADMIN))
        _refused(client.get(f"/api/v1/kbs/{kb}/versions/{bad}", headers=agent))
    for text in ("a\x00b", "lone \ud800"):
        raw = json.dumps({"reason": text})  # ensure_ascii: "\u0000" and "\ud800" on the wire
        _refused(client.post(f"/api/v1/kbs/{kb}/proposals/{pending}/reject", headers=ADMIN, content=raw))
        files = [{"path": "a.md", "mode": "create", "content": "x\n"}]
        raw = json.dumps({"files": files, "run_id": f"run_{text}"})
        _refused(client.post(f"/api/v1/kbs/{kb}/write", headers=agent, content=raw))
        _refused(client.post("/api/v1/agents", headers=ADMIN, content=json.dumps({"name": f"x{text}"})))
        _refused(client.post("/api/v1/runs", headers=agent, content=json.dumps({"kbs": [text]})))
        _refused(client.get(f"/api/v1/kbs/{kb}/search", params={"q": "a\x00"}, headers=agent))
    assert (state(services, kb), services.control.proposal(kb, pending)) == before
    assert [a.name for a in services.control.agents()] == ["asker", "bob"]


def test_the_stores_refuse_what_they_cannot_hold(
    settings: Settings, services: Services, kb: str, pending: str
) -> None:
    with pytest.raises(InvalidRequest):
        services.control.run("run_\ud800")
    with pytest.raises(InvalidRequest):
        services.control.reject_proposal(kb, pending, "admin", "lone \ud800")
    if settings.control_url is not None:  # PostgreSQL cannot hold NUL either (SQLite can)
        with pytest.raises(InvalidRequest):
            services.control.run("run_\x00")
        with pytest.raises(InvalidRequest):
            services.control.reject_proposal(kb, pending, "admin", "a\x00b")
    assert services.control.proposal(kb, pending).status == "pending"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("save_memory", {"type": "relationship", "summary": "Met at the fair", "name": "Ada \ud800"}),
        ("save_memory", {"type": "relationship", "summary": "Met at the fair", "name": "Ada\x00"}),
        ("store_memory", {"content": "lone \ud800 surrogate"}),
        ("memory_search", {"search": "lone \ud800 surrogate"}),
        ("memory_add", {"content": "fine", "sessionId": "s\x00"}),
        ("get_proposal", {"id": "p\x00"}),
        ("read_context_file", {"path": "README.md", "version": "\ud800"}),
    ],
)
def test_mcp_arguments(services: Services, kb: str, tool: str, args: dict[str, Any]) -> None:
    make_agent(services, "ada", {kb: "read_write"}, tools=["context", "memory", "semantic", "typed"])
    before = state(services, kb)

    async def call() -> Any:
        async with Client(build_server(Binding(services, lambda: caller_for(services, "ada")))) as client:
            return await client.call_tool(tool, args)

    result = anyio.run(call)
    assert result.is_error and result.structured_content["error"]["code"] == "invalid_request", result
    assert state(services, kb) == before
