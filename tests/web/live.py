"""The admin in a real browser (Debian's Chromium through Playwright): the live server, the API to seed
it, one tab per test, and axe-core's accessibility check.

One browser and one live server per test module; each test makes its own KB so tests stay apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import ADMIN_TOKEN, LiveServer

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="needs Debian's chromium (scripts/test installs it)"
)

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


class Api:
    """The HTTP API of the live server, for seeding and checking what the browser did."""

    def __init__(self, url: str) -> None:
        self.url = url + "/api/v1"
        self.http = httpx.Client(timeout=60)

    def call(self, method: str, path: str, headers: dict[str, str] = ADMIN, **kw: Any) -> Any:
        r = self.http.request(method, self.url + path, headers=headers, **kw)
        assert r.status_code < 300, (method, path, r.status_code, r.text)
        return r.json()

    def kb(self, slug: str) -> str:
        self.call("POST", "/kbs", json={"slug": slug, "description": f"KB {slug}"})
        return slug

    def agent(self, name: str, slug: str, permission: str = "read_write") -> dict[str, str]:
        token = self.call("POST", "/agents", json={"name": name})["token"]
        self.call("POST", f"/agents/{name}/links", json={"kb": slug, "permission": permission})
        return {"Authorization": f"Bearer {token}"}

    def write(
        self, slug: str, who: dict[str, str], *files: dict[str, str], message: str | None = None
    ) -> str:
        body: dict[str, Any] = {"files": list(files)}
        if message:
            body["message"] = message
        return str(self.call("POST", f"/kbs/{slug}/write", who, json=body)["version"])

    def head(self, slug: str) -> str:
        return str(self.call("GET", f"/kbs/{slug}")["head"])

    def content(self, slug: str, path: str) -> str | None:
        r = self.http.get(f"{self.url}/kbs/{slug}/files/{path}", headers=ADMIN)
        return str(r.json()["content"]) if r.status_code == 200 else None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = LiveServer(tmp_path_factory.mktemp("web") / "data", env={"KBSERVER_SAMPLE": "false"}).start()
    yield live
    live.stop()


@pytest.fixture(scope="module")
def api(server: LiveServer) -> Iterator[Api]:
    client = Api(server.url)
    yield client
    client.http.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def signed_in_page(browser: Any, base: str, viewport: tuple[int, int]) -> Any:
    """A page of a new context signed in with the admin token; CSP is bypassed so a test may inject
    axe. Close it with `page.context.close()`."""
    width, height = viewport
    context = browser.new_context(bypass_csp=True, viewport={"width": width, "height": height})
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.goto(base + "/admin/login")
    page.get_by_label("Token").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/admin/")
    return page


class Tab:
    """One browser context (its own cookies) and page, recording dialogs and every request made."""

    def __init__(self, browser: Any, base: str) -> None:
        self.base = base
        self.context = browser.new_context(viewport={"width": 1000, "height": 800})
        self.context.set_default_timeout(30_000)
        self.page = self.context.new_page()
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("request", lambda r: self.requests.append(r.url))

    def go(self, path: str) -> Any:
        return self.page.goto(self.base + path)

    def log_in(self) -> None:
        self.go("/admin/login")
        self.page.get_by_label("Token").fill(ADMIN_TOKEN)
        self.page.get_by_role("button", name="Log in").click()
        self.page.wait_for_url(re.compile(r".*/admin/$"))

    def button(self, name: str) -> Any:
        return self.page.get_by_role("button", name=name, exact=True)  # CONTRACT §6 names them exactly


@pytest.fixture
def tab(browser: Any, server: LiveServer) -> Iterator[Tab]:
    t = Tab(browser, server.url)
    yield t
    t.context.close()


@pytest.fixture
def admin_tab(tab: Tab) -> Tab:
    tab.log_in()
    return tab
