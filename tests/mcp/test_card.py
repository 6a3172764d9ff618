"""The approval card (MCP Apps): its ui:// resource and write_context's result; no tool decides."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from kbserver.config import Settings
from kbserver.mcp.card import CARD_URI
from kbserver.services import Services
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN
from kbserver.services.reviewing import versions
from kbserver.services.writing import proposals
from tests.helpers import ADMIN_TOKEN, git_fsck, make_agent, state
from tests.mcp.clients import http_client, ok
from tests.mcp.conftest import _Uvicorn

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
async def test_the_card_is_an_mcp_app(
    http_url: str, settings: Settings, services: Services, kb: str, mode: str
) -> None:
    make_agent(services, "asker", {kb: "read_write_ask"})
    async with _connect(http_url, services, "asker", mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["write_context"].meta == {"ui": {"resourceUri": CARD_URI}}
        assert not any("approve" in name or "reject" in name for name in tools)  # no tool decides
        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        assert (
            CARD_URI not in listed
        )  # resources/list lists the agent's files; the tool's _meta names the card
        card = (await client.read_resource(CARD_URI)).contents[0]
        assert card.mime_type == APP_MIME
        html = card.text  # type: ignore[union-attr]
        assert "ui/initialize" in html and "ui/open-link" in html and "innerHTML" not in html
        assert "approve_proposal" not in html and 'type="password"' not in html  # never asks for a token

        raw = await _propose_raw(client)
        result = ok(raw)
        text = [c.text for c in raw.content]
    pid = result["proposal"]["id"]
    assert result["proposal"] == {"id": pid, "status": "pending"}
    shown = result["approval"]
    assert shown["status"] == "pending" and shown["files"] == [{"path": "idea.md", "mode": "create"}]
    assert shown["diff"][0]["change"] == "added" and "+an idea" in shown["diff"][0]["patch"]
    assert shown["admin_url"] == f"{settings.public}/admin/kbs/{kb}/proposals?p={pid}#p-{pid}"
    # Without MCP Apps, the same as text: files, diff and where to approve.
    assert any("create idea.md" in t and shown["admin_url"] in t and "+an idea" in t for t in text)


async def test_the_card_links_to_the_public_url_not_the_request(
    settings: Settings, services: Services, kb: str
) -> None:
    """Behind a proxy the request names an internal address; the card links to KBSERVER_PUBLIC_URL."""
    public = "https://kb.example.com"
    server = _Uvicorn(settings.model_copy(update={"public_url": public}), services).start()
    try:
        make_agent(services, "asker", {kb: "read_write_ask"})
        async with _connect(server.url, services, "asker", "auto") as client:
            raw = await _propose_raw(client)
    finally:
        server.stop()
    pid = ok(raw)["proposal"]["id"]
    link = ok(raw)["approval"]["admin_url"]
    assert link == f"{public}/admin/kbs/{kb}/proposals?p={pid}#p-{pid}"
    assert any(link in c.text for c in raw.content)  # the text card names the same link


@pytest.mark.parametrize("mode", MODES)
async def test_the_agent_cannot_decide_its_own_proposal(
    http_url: str, services: Services, kb: str, mode: str
) -> None:
    """No tool approves: a forged call is an unknown tool; the person decides in the web admin and
    the card, asking get_proposal, shows the outcome."""
    make_agent(services, "asker", {kb: "read_write_ask"})
    async with _connect(http_url, services, "asker", mode) as asker:
        pid = (await _propose(asker))["proposal"]["id"]
        before = state(services, kb)
        for name in ("approve_proposal", "reject_proposal"):
            forged = await asker.call_tool(
                name, {"id": pid, "decision": "approve", "admin_token": ADMIN_TOKEN}
            )
            assert forged.is_error and state(services, kb) == before
        assert ok(await asker.call_tool("get_proposal", {"id": pid}))["status"] == "pending"
        proposals.approve(services, ADMIN, kb, pid)  # what Approve on the admin's proposal page does
        assert ok(await asker.call_tool("get_proposal", {"id": pid}))["status"] == "approved"
    latest = versions.listing(services, ADMIN, kb, limit=1).versions[0]
    assert latest.kind == "approval" and latest.author == "agent:asker"
    git_fsck(services.repos.path(kb))


async def test_the_card_shows_stale_and_rejected(http_url: str, services: Services, kb: str) -> None:
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
        proposals.reject(services, ADMIN, kb, first, "not now")  # the person, in the web admin
        shown = ok(await asker.call_tool("get_proposal", {"id": first}))
        assert (shown["status"], shown["reason"]) == ("rejected", "not now")
        assert state(services, kb) == before
