"""The consent page and the Agents page's connections in Chromium, at a desktop and a phone width:
axe-core finds nothing serious, the Agents page lists a connection (app, person, created, last
used) and Revoke ends it at the token's next request."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from kbserver.config import Settings
from kbserver.services import Services, kbs
from kbserver.services.access import connections
from kbserver.services.access.auth import ADMIN
from tests.helpers import ADMIN_TOKEN
from tests.mcp.clients import INITIALIZE, MCP_HEADERS
from tests.mcp.oauth_helpers import CHROMIUM, chromium_missing, oauth_server, pkce
from tests.web.axe import AXE, SCREENS, serious_violations

pytestmark = [
    pytest.mark.skipif(chromium_missing(), reason="needs Debian's chromium"),
    pytest.mark.timeout(300),
]
CALLBACK = "http://127.0.0.1:9/callback"


def _consent_path(http: httpx.Client, base: str) -> str:
    r = http.post(f"{base}/register", json={"redirect_uris": [CALLBACK], "client_name": "Pages Chat"})
    client = r.json()["client_id"]
    _, challenge = pkce()
    query = {
        "response_type": "code",
        "client_id": client,
        "redirect_uri": CALLBACK,
        "code_challenge": challenge,
        "state": "s",
        "resource": f"{base}/mcp",
    }
    location = http.get(f"{base}/authorize?{urlencode(query)}").headers["location"]
    return str(location)


def _token(services: Services, base: str, location: str) -> str:
    blob = parse_qs(urlsplit(location).query)["request"][0]
    pending = connections.pending(connections.request_key(ADMIN_TOKEN), blob)
    url = connections.allow(services, ADMIN, pending, base, None, "pages-bot", {"notes": "read"})
    code = parse_qs(urlsplit(url).query)["code"][0]
    return connections.exchange_code(services, code, ()).access


def test_consent_and_agents_pages_in_chromium(settings: Settings, services: Services) -> None:
    from playwright.sync_api import sync_playwright

    kbs.create(services, ADMIN, "notes", "Notes")
    with oauth_server(settings, services) as base, httpx.Client(timeout=60, follow_redirects=False) as http:
        consent = _consent_path(http, base)
        token = _token(services, base, _consent_path(http, base))
        assert (
            http.post(
                f"{base}/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"}
            ).status_code
            == 200
        )
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                for screen, (width, height) in SCREENS.items():
                    context = browser.new_context(
                        viewport={"width": width, "height": height}, bypass_csp=True
                    )
                    page = context.new_page()
                    page.goto(consent)
                    page.get_by_label("Token").fill(ADMIN_TOKEN)
                    page.get_by_role("button", name="Log in").click()
                    page.wait_for_url(re.compile(r".*/admin/connect\?request=.*"))
                    assert page.get_by_role("button", name="Allow", exact=True).is_visible()
                    assert page.get_by_role("button", name="Deny", exact=True).is_visible()
                    assert page.locator("#kb-notes").input_value() == "read_write_ask"
                    _no_overflow(page, screen)
                    if AXE.exists():
                        assert serious_violations(page) == [], (screen, "consent")
                    page.goto(f"{base}/admin/agents")
                    row = page.locator("table.connections tr", has_text="Pages Chat")
                    assert row.count() == 1 and "admin" in row.inner_text()
                    _no_overflow(page, screen)
                    if AXE.exists():
                        assert serious_violations(page) == [], (screen, "agents")
                    context.close()
                context = browser.new_context()
                page = context.new_page()
                page.goto(f"{base}/admin/login")
                page.get_by_label("Token").fill(ADMIN_TOKEN)
                page.get_by_role("button", name="Log in").click()
                page.wait_for_url(re.compile(r".*/admin/$"))
                page.goto(f"{base}/admin/agents")
                page.get_by_role("button", name="Revoke the connection of Pages Chat as pages-bot").click()
                page.wait_for_url(re.compile(r".*/admin/agents$"))
                assert "Revoked the connection of Pages Chat" in page.inner_text("body")
                assert page.locator("table.connections tr", has_text="Pages Chat").count() == 0
                context.close()
            finally:
                browser.close()
        r = http.post(
            f"{base}/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"}
        )
        assert r.status_code == 401


def _no_overflow(page: Any, screen: str) -> None:
    wide = page.evaluate("document.documentElement.scrollWidth > document.documentElement.clientWidth + 1")
    assert not wide, f"the page scrolls sideways at {screen} width"
