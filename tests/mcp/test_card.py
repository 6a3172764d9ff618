"""The approval card (MCP Apps): its ui:// resource, write_context's result, and the card's tool."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from kbserver.mcp.card import CARD_URI
from kbserver.services import Services, agents, versions
from kbserver.services.auth import ADMIN
from tests.helpers import ADMIN_TOKEN, git_fsck, make_agent, state
from tests.mcp.clients import error, http_client, ok

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]
APP_MIME = "text/html;profile=mcp-app"


def _connect(url: str, services: Services, agent: str, mode: str) -> Any:
    _, token = agents.rotate(services, ADMIN, agent)
    return http_client(url, {"Authorization": f"Bearer {token}"}, mode=mode)


async def _propose_raw(client: Client, path: str = "idea.md") -> Any:
    run = ok(await client.call_tool("start_run", {"interactive": True}))["run"]
    change = {"files": [{"path": path, "mode": "create", "content": "an idea\n"}], "run": run}
    return await client.call_tool("write_context", change)


async def _propose(client: Client, path: str = "idea.md") -> dict[str, Any]:
    return ok(await _propose_raw(client, path))


@pytest.mark.parametrize("mode", MODES)
async def test_the_card_is_an_mcp_app(http_url: str, services: Services, kb: str, mode: str) -> None:
    make_agent(services, "asker", {kb: "read_write_ask"})
    async with _connect(http_url, services, "asker", mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["write_context"].meta == {"ui": {"resourceUri": CARD_URI}}
        assert tools["approve_proposal"].meta == {"ui": {"resourceUri": CARD_URI, "visibility": ["app"]}}
        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        assert (
            CARD_URI not in listed
        )  # resources/list lists the agent's files; the tool's _meta names the card
        card = (await client.read_resource(CARD_URI)).contents[0]
        assert card.mime_type == APP_MIME
        html = card.text  # type: ignore[union-attr]
        assert "ui/initialize" in html and "approve_proposal" in html and "innerHTML" not in html

        raw = await _propose_raw(client)
        result = ok(raw)
        text = [c.text for c in raw.content]
    pid = result["proposal"]["id"]
    assert result["proposal"] == {"id": pid, "status": "pending"}
    shown = result["approval"]
    assert shown["status"] == "pending" and shown["files"] == [{"path": "idea.md", "mode": "create"}]
    assert shown["diff"][0]["change"] == "added" and "+an idea" in shown["diff"][0]["patch"]
    assert shown["admin_url"] == f"{http_url}/admin/kbs/{kb}/proposals#p-{pid}"
    # Without MCP Apps, the same as text: files, diff and where to approve.
    assert any("create idea.md" in t and shown["admin_url"] in t and "+an idea" in t for t in text)


@pytest.mark.parametrize("mode", MODES)
async def test_the_cards_tool_needs_the_admin_token(
    http_url: str, services: Services, kb: str, mode: str
) -> None:
    make_agent(services, "asker", {kb: "read_write_ask"})
    make_agent(services, "eve", {kb: "read_write_ask"})
    _, eve_token = agents.rotate(services, ADMIN, "eve")
    _, asker_token = agents.rotate(services, ADMIN, "asker")
    async with http_client(http_url, {"Authorization": f"Bearer {asker_token}"}, mode=mode) as asker:
        pid = (await _propose(asker))["proposal"]["id"]
    before = state(services, kb)
    async with http_client(http_url, {"Authorization": f"Bearer {asker_token}"}, mode=mode) as asker:
        # The proposing agent forges the card's call: without the admin token, with its own, with another's.
        for token in (None, asker_token, eve_token, "kba_guess", ""):
            args: dict[str, Any] = {"id": pid, "decision": "approve"}
            if token is not None:
                args["admin_token"] = token
            err = error(await asker.call_tool("approve_proposal", args))
            assert err["code"] == "forbidden" and "admin token" in err["message"], token
            assert state(services, kb) == before
        assert ok(await asker.call_tool("get_proposal", {"id": pid}))["status"] == "pending"
        bad = {"id": pid, "decision": "merge", "admin_token": ADMIN_TOKEN}
        assert error(await asker.call_tool("approve_proposal", bad))["code"] == "invalid_request"

        # The person types the admin token into the card: approved, authored by the agent, run kept.
        done = ok(
            await asker.call_tool(
                "approve_proposal", {"id": pid, "decision": "approve", "admin_token": ADMIN_TOKEN}
            )
        )
        head = services.repos.repo(kb).head()
        assert done == {"id": pid, "status": "approved", "version": head}
        latest = versions.listing(services, ADMIN, kb, limit=1).versions[0]
        assert latest.kind == "approval" and latest.author == "agent:asker" and latest.run
        assert ok(await asker.call_tool("get_proposal", {"id": pid}))["status"] == "approved"
        again = {"id": pid, "decision": "reject", "admin_token": ADMIN_TOKEN}
        assert error(await asker.call_tool("approve_proposal", again))["code"] == "not_pending"
    async with _connect(
        http_url, services, "eve", mode
    ) as eve:  # another agent's proposal, even with the token
        err = error(
            await eve.call_tool(
                "approve_proposal", {"id": pid, "decision": "reject", "admin_token": ADMIN_TOKEN}
            )
        )
        assert err["code"] == "not_found"
    git_fsck(services.repos.path(kb))


async def test_the_card_rejects_and_refuses_stale(http_url: str, services: Services, kb: str) -> None:
    make_agent(services, "asker", {kb: "read_write_ask"})
    make_agent(services, "bob", {kb: "read_write"})
    async with _connect(http_url, services, "asker", "auto") as asker:
        first = (await _propose(asker, "one.md"))["proposal"]["id"]
        second = (await _propose(asker, "two.md"))["proposal"]["id"]
        async with _connect(http_url, services, "bob", "auto") as bob:  # two.md now exists: stale
            ok(
                await bob.call_tool(
                    "write_context", {"files": [{"path": "two.md", "mode": "create", "content": "b\n"}]}
                )
            )
        stale = ok(await asker.call_tool("get_proposal", {"id": second}))
        assert stale["status"] == "stale" and stale["reason"].startswith("already_exists: ")
        before = state(services, kb)
        err = error(
            await asker.call_tool(
                "approve_proposal", {"id": second, "decision": "approve", "admin_token": ADMIN_TOKEN}
            )
        )
        assert err["code"] == "already_exists" and state(services, kb) == before
        rejected = ok(
            await asker.call_tool(
                "approve_proposal",
                {"id": first, "decision": "reject", "admin_token": ADMIN_TOKEN, "reason": "not now"},
            )
        )
        assert rejected == {"id": first, "status": "rejected"}
        shown = ok(await asker.call_tool("get_proposal", {"id": first}))
        assert (shown["status"], shown["reason"]) == ("rejected", "not now")
        assert state(services, kb) == before
