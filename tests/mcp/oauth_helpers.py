"""The OAuth tests' parts: a server whose public URL is its own loopback port, the SDK's OAuth client
with tokens in memory, and Chromium signing in and answering the consent page."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

from kbserver.config import Settings
from kbserver.services import Services
from tests.helpers import ADMIN_TOKEN, free_port
from tests.mcp.conftest import _Uvicorn

CHROMIUM = "/usr/bin/chromium"


@contextmanager
def oauth_server(settings: Settings, services: Services) -> Iterator[str]:
    """The app on a free loopback port that is also its public URL (the OAuth issuer)."""
    port = free_port()
    served = settings.model_copy(update={"port": port, "public_url": f"http://127.0.0.1:{port}"})
    server = _Uvicorn(served, services, port=port).start()
    try:
        yield server.url
    finally:
        server.stop()


@dataclass
class MemoryStorage:
    tokens: OAuthToken | None = None
    client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@dataclass
class Consent:
    """What the person does in Chromium: sign in with the admin token, then answer the consent page."""

    decision: str = "allow"
    agent: str = ""  # "" a new agent
    name: str | None = None  # the new agent's name; None keeps the proposed one
    permissions: dict[str, str] = field(default_factory=dict)
    seen: dict[str, Any] = field(default_factory=dict)  # what the page showed: text, CSP, choices
    login: tuple[str, str] | None = None  # a person's email and password; None: the admin token


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def browse_consent(url: str, callback: str, consent: Consent) -> str:
    """Open the authorization `url` in Chromium, sign in, answer the consent page; the URL the
    browser was sent back to (the callback is intercepted: nothing listens there)."""
    from playwright.sync_api import sync_playwright

    landed: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page()

            def catch(route: Any) -> None:
                landed.append(route.request.url)
                route.fulfill(status=200, body="back in the app", content_type="text/plain")

            page.route(re.compile("^" + re.escape(callback)), catch)
            response = page.goto(url)
            assert response is not None
            if "/admin/login" in page.url and consent.login is None:
                page.fill("#token", ADMIN_TOKEN)
                page.get_by_role("button", name="Log in", exact=True).click()
            elif "/admin/login" in page.url:
                page.get_by_label("Email").fill(consent.login[0])
                page.get_by_label("Password").fill(consent.login[1])
                page.get_by_role("button", name="Sign in", exact=True).click()
            page.wait_for_url(re.compile(r".*/admin/connect\?request=.*"), timeout=30_000)
            reloaded = page.request.get(page.url)
            consent.seen["csp"] = reloaded.headers.get("content-security-policy", "")
            consent.seen["text"] = page.inner_text("main") if page.locator("main").count() else page.content()
            consent.seen["choices"] = {
                sel.get_attribute("id"): sel.locator("option").all_inner_texts()
                for sel in page.locator("select[id^=kb-]").all()
            }
            if consent.agent:
                page.select_option("#agent", consent.agent)
            if consent.name is not None:
                page.fill("#name", consent.name)
            for slug, perm in consent.permissions.items():
                page.select_option(f"#kb-{slug}", perm)
            page.click(f"button[value={consent.decision}]")
            page.wait_for_timeout(50)
            for _ in range(600):
                if landed:
                    break
                page.wait_for_timeout(50)
        finally:
            browser.close()
    assert landed, "the browser was never sent back to the client"
    return landed[0]


def sdk_oauth(
    base: str, consent: Consent, name: str = "Test Chat"
) -> tuple[OAuthClientProvider, MemoryStorage]:
    """The SDK's OAuth client for `{base}/mcp`, registering itself (RFC 7591), the person answering
    in Chromium."""
    callback = f"http://127.0.0.1:{free_port()}/callback"
    storage = MemoryStorage()
    result: dict[str, str] = {}

    async def redirect(url: str) -> None:
        landed = await anyio.to_thread.run_sync(browse_consent, url, callback, consent)
        query = parse_qs(urlsplit(landed).query)
        result.update({k: v[0] for k, v in query.items()})

    async def callback_handler() -> AuthorizationCodeResult:
        if "code" not in result:
            raise RuntimeError(f"no code: {result}")
        return AuthorizationCodeResult(code=result["code"], state=result.get("state"), iss=result.get("iss"))

    metadata = OAuthClientMetadata(
        client_name=name,
        redirect_uris=[AnyUrl(callback)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    provider = OAuthClientProvider(f"{base}/mcp", metadata, storage, redirect, callback_handler)
    return provider, storage


def chromium_missing() -> bool:
    return not Path(CHROMIUM).exists()
