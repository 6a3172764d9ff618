"""Single sign-on in real Chromium against a real OpenID Connect provider (oidc-provider-mock, built
on Authlib): a person created beforehand signs in by verified email, an allowed domain's email
becomes a new viewer, an unverified or unknown email is refused, and a forged callback is refused."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import ADMIN_TOKEN, LiveServer, free_port, stop_process
from tests.web.live import Tab, pytestmark

__all__ = ["pytestmark"]

USERS = [
    {"sub": "rita-sub", "email": "Rita@Example.org", "email_verified": True},
    {"sub": "eve-sub", "email": "eve@example.org", "email_verified": False},
    {"sub": "newbie-sub", "email": "new.bie@team.example", "email_verified": True},
    {"sub": "stranger-sub", "email": "who@elsewhere.example", "email_verified": True},
]


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The provider on `localhost` (another site than the server's 127.0.0.1, as a real one is)."""
    port = free_port()
    args = [sys.executable, "-m", "oidc_provider_mock", "--port", str(port), "--require-nonce", "true"]
    for user in USERS:
        args += ["--user-claims", json.dumps(user)]
    log = tmp_path_factory.mktemp("oidc") / "provider.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://localhost:{port}"
    try:
        _wait_for(proc, url + "/.well-known/openid-configuration", log)
        yield url
    finally:
        stop_process(proc)


def _wait_for(proc: subprocess.Popen[bytes], url: str, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the provider did not answer within {timeout:g} s: {log.read_text()}")


@pytest.fixture(scope="module")
def sso_server(tmp_path_factory: pytest.TempPathFactory, provider: str) -> Iterator[LiveServer]:
    env = {
        "KBSERVER_SAMPLE": "false",
        "KBSERVER_OIDC_ISSUER": provider,
        "KBSERVER_OIDC_CLIENT_ID": "kbserver-test",
        "KBSERVER_OIDC_CLIENT_SECRET": "the-client-secret",
        "KBSERVER_OIDC_ALLOWED_DOMAINS": "team.example",
    }
    live = LiveServer(tmp_path_factory.mktemp("sso") / "data", env=env).start()
    kbserver(live.data, "kb", "create", "notes")
    kbserver(
        live.data,
        "person",
        "create",
        "rita",
        "--email",
        "rita@example.org",
        "--role",
        "reviewer",
        "--kb",
        "notes",
    )
    kbserver(live.data, "person", "create", "eve", "--email", "eve@example.org", "--role", "owner")
    yield live
    live.stop()


def kbserver(data: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "kbserver.cli", *args, "--data", str(data)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "KBSERVER_ADMIN_TOKEN": ADMIN_TOKEN},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def sso_tab(browser: Any, sso_server: LiveServer) -> Iterator[Tab]:
    t = Tab(browser, sso_server.url)
    yield t
    t.context.close()


def _sign_in_as(tab: Tab, sub: str) -> None:
    tab.go("/admin/kbs/notes/versions")
    assert "/admin/login" in tab.page.url
    tab.button("Sign in with SSO").click()
    tab.page.wait_for_url(re.compile(r"http://localhost:\d+/oauth2/authorize.*"))
    assert (
        "code_challenge_method=S256" in tab.page.url and "nonce=" in tab.page.url and "state=" in tab.page.url
    )
    tab.page.get_by_role("button", name=sub, exact=True).click()


def test_a_person_signs_in_by_verified_email(sso_tab: Tab) -> None:
    _sign_in_as(sso_tab, "rita-sub")
    sso_tab.page.wait_for_url(re.compile(r".*/admin/kbs/notes/versions$"))
    assert "Signed in as rita (reviewer)" in sso_tab.page.locator("header").inner_text()


def test_an_allowed_domain_makes_a_new_viewer(sso_tab: Tab, sso_server: LiveServer) -> None:
    _sign_in_as(sso_tab, "newbie-sub")
    sso_tab.page.wait_for_url(re.compile(r".*/admin/kbs/notes/versions$"))
    assert "Signed in as new-bie (viewer)" in sso_tab.page.locator("header").inner_text()
    listed = json.loads(kbserver(sso_server.data, "person", "list", "--json"))["people"]
    assert {(p["name"], p["email"], p["role"]) for p in listed} >= {
        ("new-bie", "new.bie@team.example", "viewer")
    }


@pytest.mark.parametrize(("sub", "why"), [("eve-sub", "verified email"), ("stranger-sub", "no person has")])
def test_an_unverified_or_unknown_email_is_refused(sso_tab: Tab, sub: str, why: str) -> None:
    _sign_in_as(sso_tab, sub)
    sso_tab.page.wait_for_url(re.compile(r".*/admin/oidc/callback.*"))
    assert why in sso_tab.page.get_by_role("alert").inner_text()
    sso_tab.go("/admin/")
    assert "/admin/login" in sso_tab.page.url  # not signed in


def test_a_forged_or_replayed_callback_is_refused(sso_server: LiveServer) -> None:
    with httpx.Client(base_url=sso_server.url, timeout=30) as http:
        r = http.get("/admin/oidc/callback", params={"code": "stolen", "state": "guessed"})
        assert r.status_code == 400 and "did not start here" in r.text
        started = http.get("/admin/oidc/start", follow_redirects=False)
        assert started.status_code == 303 and started.headers["location"].startswith("http://localhost")
        cookie = started.headers["set-cookie"]
        assert (
            "samesite=lax" in cookie.lower()
            and "path=/admin/oidc" in cookie.lower()
            and "httponly" in cookie.lower()
        )
        r = http.get("/admin/oidc/callback", params={"code": "stolen", "state": "guessed"})
        assert r.status_code == 400 and "state does not match" in r.text
        state = re.search(r"[?&]state=([^&]+)", started.headers["location"]).group(1)  # type: ignore[union-attr]
        r = http.get("/admin/oidc/callback", params={"code": "not-a-code", "state": state})
        assert r.status_code == 401 and "refused the code" in r.text, r.text[-1500:]
        r = http.get("/admin/oidc/callback", params={"error": "access_denied", "state": state})
        assert r.status_code in (400, 401) and "kbserver_admin" not in r.headers.get("set-cookie", "")


def test_an_http_issuer_is_accepted_on_loopback_only() -> None:
    from kbserver.config import Settings

    assert Settings(oidc_issuer="http://127.0.0.1:9/", oidc_client_id="x").oidc_issuer == "http://127.0.0.1:9"
    for bad in ("http://idp.example.org", "ftp://localhost", "https://"):
        with pytest.raises(ValueError):
            Settings(oidc_issuer=bad, oidc_client_id="x")
    with pytest.raises(ValueError):
        Settings(oidc_issuer="https://idp.example.org")  # no client id
