"""The approval card in Chromium: a minimal MCP Apps host page runs it in a sandboxed iframe and relays
its tools/call requests to the real server over the proposing agent's own MCP connection."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kbserver.config import Settings
from kbserver.core.model import WriteRequest
from kbserver.mcp.card import CARD_URI
from kbserver.services import Services
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN
from kbserver.services.writing import proposals, writes
from tests.helpers import make_agent, state
from tests.mcp.clients import http_client, ok

async_api = pytest.importorskip("playwright.async_api")
CHROMIUM = "/usr/bin/chromium"
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason="needs Debian's chromium (scripts/test installs it)"
    ),
]

# The host's side of the MCP Apps bridge: answer ui/initialize, send the tool result once the view is
# initialized, relay tools/call to Python (window.mcpCall), record ui/open-link.
HOST = """
window.calls = [];
window.addEventListener("message", async (event) => {
  const frame = document.getElementById("card").contentWindow;
  if (event.source !== frame) return;
  const m = event.data;
  const reply = (result) => frame.postMessage({ jsonrpc: "2.0", id: m.id, result }, "*");
  if (m.method === "ui/initialize") {
    reply({ protocolVersion: "2026-01-26", hostInfo: { name: "test-host", version: "0" },
            hostCapabilities: {}, hostContext: {} });
  } else if (m.method === "ui/notifications/initialized") {
    const note = { jsonrpc: "2.0", method: "ui/notifications/tool-result", params: window.toolResult };
    frame.postMessage(note, "*");
  } else if (m.method === "tools/call") {
    window.calls.push(m.params.name);
    reply(await window.mcpCall(m.params.name, m.params.arguments));
  } else if (m.method === "ui/open-link") {
    window.opened = m.params.url;
    reply({});
  }
});
"""


async def test_approve_in_the_card(http_url: str, settings: Settings, services: Services, kb: str) -> None:
    make_agent(services, "asker", {kb: "read_write_ask"})
    _, token = agents.rotate(services, ADMIN, "asker")
    async with http_client(http_url, {"Authorization": f"Bearer {token}"}) as asker:
        run = ok(await asker.call_tool("start_run", {"interactive": True}))["run"]
        change = {"files": [{"path": "idea.md", "mode": "create", "content": "an <b>idea</b>\n"}], "run": run}
        written = await asker.call_tool("write_context", change)
        pid = ok(written)["proposal"]["id"]
        html = (await asker.read_resource(CARD_URI)).contents[0].text  # type: ignore[union-attr]
        before = state(services, kb)

        async def mcp_call(name: str, arguments: dict[str, Any]) -> Any:
            result = await asker.call_tool(name, arguments)
            return result.model_dump(by_alias=True, mode="json", exclude_none=True)

        async with async_api.async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = await browser.new_page()
                page.set_default_timeout(30_000)
                await page.expose_function("mcpCall", mcp_call)
                await page.set_content("<!doctype html><title>host</title>")
                await page.evaluate(HOST)
                result = json.loads(written.model_dump_json(by_alias=True, exclude_none=True))
                await page.evaluate(
                    """([result, html]) => {
                        window.toolResult = result;
                        const frame = document.createElement("iframe");
                        frame.id = "card"; frame.sandbox = "allow-scripts";
                        frame.width = 700; frame.height = 600;
                        frame.srcdoc = html;
                        document.body.appendChild(frame);
                    }""",
                    [result, html],
                )
                card = page.frame_locator("#card")
                await card.get_by_role("heading", name="asker asks to create idea.md (a new file)").wait_for()
                await card.get_by_text("create idea.md (a new file)", exact=True).wait_for()
                assert pid not in await card.locator("main").inner_text()  # a title, not the proposal id
                added = await card.locator(".diff .add").first.inner_text()
                assert "an <b>idea</b>" in added  # text, not HTML
                assert await card.locator("b").count() == 0

                assert await card.locator("input[type=password]").count() == 0  # never asks for a token
                await card.get_by_role("button", name="Approve or reject in kbserver").click()
                await card.get_by_text("Opened in kbserver").wait_for()
                opened = await page.evaluate("window.opened")
                assert opened == f"{settings.public}/admin/kbs/{kb}/proposals?p={pid}#p-{pid}", opened
                assert state(services, kb) == before  # opening decides nothing
                inner = next(f for f in page.frames if f != page.main_frame)
                other = {"path": "idea.md", "mode": "create", "content": "someone else's\n"}
                writes.submit(services, ADMIN, kb, WriteRequest.model_validate({"files": [other]}))
                await inner.evaluate('window.dispatchEvent(new Event("focus"))')  # back: now it is stale
                await card.get_by_text("approving would fail").wait_for()
                shown = await card.locator("main").inner_text()
                assert not re.search(r"[0-9a-f]{64}", shown) and "retry" not in shown, shown
                assert shown.count("approving would fail") == 1
                wide = await card.locator("body").evaluate("b => b.scrollWidth")
                assert wide <= 700
                writes.submit(
                    services,
                    ADMIN,
                    kb,
                    WriteRequest.model_validate({"files": [{"path": "idea.md", "mode": "delete"}]}),
                )

                proposals.approve(services, ADMIN, kb, pid)  # the person, on the page the card opened
                inner = next(f for f in page.frames if f != page.main_frame)
                await inner.evaluate('window.dispatchEvent(new Event("focus"))')  # back in the chat
                await card.get_by_text("Approved: it is part of the knowledge base").wait_for()
                head = services.repos.repo(kb).head()
                assert head is not None and head != before[0]
                calls = await page.evaluate("window.calls")
                assert set(calls) == {"get_proposal"}, calls  # the card only reads
            finally:
                await browser.close()
        assert ok(await asker.call_tool("get_proposal", {"id": pid}))["status"] == "approved"
