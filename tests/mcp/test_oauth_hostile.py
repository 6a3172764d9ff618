"""OAuth against a running server, each hostile case on its own: nothing is issued that should not
be, bad input is a 4xx with an RFC 6749 error (never a 5xx), and the browser is never sent anywhere
the client did not register."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
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
from tests.mcp.oauth_helpers import oauth_server, pkce

pytestmark = pytest.mark.timeout(120)

CALLBACK = "http://127.0.0.1:9/callback"


@dataclass
class AS:
    """The running server's OAuth side, and the services behind it."""

    base: str
    http: httpx.Client
    services: Services

    def register(self, redirect: str = CALLBACK, **extra: Any) -> str:
        body = {"redirect_uris": [redirect], "client_name": "Hostile test", **extra}
        r = self.http.post(f"{self.base}/register", json=body)
        assert r.status_code == 201, r.text
        assert r.json()["token_endpoint_auth_method"] == "none" and "client_secret" not in r.json()
        return str(r.json()["client_id"])

    def authorize(self, client_id: str, challenge: str, **params: str) -> httpx.Response:
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": CALLBACK,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "st-1",
            "resource": f"{self.base}/mcp",
            **params,
        }
        query = {k: v for k, v in query.items() if v != "-"}
        return self.http.get(f"{self.base}/authorize?{urlencode(query)}")

    def consent(
        self, location: str, permissions: dict[str, str] | None = None, name: str = "chat"
    ) -> dict[str, str]:
        """What Allow on the consent page does (the browser test drives the page itself)."""
        blob = parse_qs(urlsplit(location).query)["request"][0]
        pending = connections.pending(connections.request_key(ADMIN_TOKEN), blob)
        url = connections.allow(
            self.services, ADMIN, pending, self.base, None, name, permissions or {"notes": "read"}
        )
        return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}

    def code(self, client_id: str, name: str = "chat") -> tuple[str, str]:
        verifier, challenge = pkce()
        r = self.authorize(client_id, challenge)
        assert r.status_code == 302 and "/admin/connect?request=" in r.headers["location"], r.text
        back = self.consent(r.headers["location"], name=name)
        assert back["state"] == "st-1" and back["iss"] == self.base
        return back["code"], verifier

    def token(self, **form: str) -> httpx.Response:
        return self.http.post(f"{self.base}/token", data=form)

    def tokens(self, client_id: str, name: str = "chat") -> dict[str, Any]:
        code, verifier = self.code(client_id, name)
        r = self.token(
            grant_type="authorization_code",
            code=code,
            client_id=client_id,
            redirect_uri=CALLBACK,
            code_verifier=verifier,
        )
        assert r.status_code == 200, r.text
        return dict(r.json())

    def mcp_status(self, access: str) -> int:
        r = self.http.post(
            f"{self.base}/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {access}"}
        )
        return r.status_code


@pytest.fixture
def oauth(settings: Settings, services: Services) -> Iterator[AS]:
    kbs.create(services, ADMIN, "notes", "Team notes")
    with oauth_server(settings, services) as base, httpx.Client(timeout=60, follow_redirects=False) as http:
        yield AS(base, http, services)


def _no_redirect(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 400, (r.status_code, r.text)
    assert "location" not in r.headers
    return dict(r.json())


def _error_redirect(r: httpx.Response) -> dict[str, str]:
    assert r.status_code == 302, r.text
    location = r.headers["location"]
    assert location.startswith(CALLBACK + "?") and "/admin/connect" not in location
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def test_discovery_documents_are_the_contracts(oauth: AS) -> None:
    r = oauth.http.post(f"{oauth.base}/mcp", json=INITIALIZE, headers=MCP_HEADERS)
    assert r.status_code == 401
    pointer = f'resource_metadata="{oauth.base}/.well-known/oauth-protected-resource/mcp"'
    assert pointer in r.headers["www-authenticate"]
    prm = oauth.http.get(f"{oauth.base}/.well-known/oauth-protected-resource/mcp").json()
    assert prm["resource"] == f"{oauth.base}/mcp" and prm["authorization_servers"] == [oauth.base]
    meta = oauth.http.get(f"{oauth.base}/.well-known/oauth-authorization-server").json()
    assert meta["issuer"] == oauth.base
    for key, path in (("authorization_endpoint", "/authorize"), ("token_endpoint", "/token")):
        assert meta[key] == oauth.base + path
    assert meta["registration_endpoint"] == oauth.base + "/register"
    assert meta["revocation_endpoint"] == oauth.base + "/revoke"
    assert meta["code_challenge_methods_supported"] == ["S256"]
    assert meta["client_id_metadata_document_supported"] is True
    assert meta["authorization_response_iss_parameter_supported"] is True


def test_an_unregistered_redirect_uri_gets_400_and_no_redirect(oauth: AS) -> None:
    client = oauth.register()
    _, challenge = pkce()
    for uri in ("http://127.0.0.1:9/other", "https://evil.example/callback", CALLBACK + "/x"):
        body = _no_redirect(oauth.authorize(client, challenge, redirect_uri=uri))
        assert body["error"] == "invalid_request"
    body = _no_redirect(oauth.authorize("no-such-client", challenge))
    assert body["error"] == "invalid_request"


def test_registration_refuses_dangerous_redirect_uris(oauth: AS) -> None:
    for uri in (
        "javascript:alert(1)",
        "http://evil.example/cb",
        "https://app.example/cb#frag",
        "data:text/html,x",
    ):
        r = oauth.http.post(f"{oauth.base}/register", json={"redirect_uris": [uri]})
        assert r.status_code == 400, (uri, r.text)
        assert r.json()["error"] in ("invalid_redirect_uri", "invalid_client_metadata")


def test_pkce_is_required_and_only_s256(oauth: AS) -> None:
    client = oauth.register()
    _, challenge = pkce()
    assert _error_redirect(oauth.authorize(client, "-"))["error"] == "invalid_request"  # no challenge
    back = _error_redirect(oauth.authorize(client, challenge, code_challenge_method="plain"))
    assert back["error"] == "invalid_request" and back["state"] == "st-1"
    # the wrong verifier at the token endpoint
    code, _ = oauth.code(client)
    r = oauth.token(
        grant_type="authorization_code",
        code=code,
        client_id=client,
        redirect_uri=CALLBACK,
        code_verifier="x" * 50,
    )
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"


def test_a_resource_other_than_mcp_is_refused(oauth: AS) -> None:
    client = oauth.register()
    _, challenge = pkce()
    for resource in ("https://evil.example/mcp", f"{oauth.base}/api/v1"):
        assert (
            _error_redirect(oauth.authorize(client, challenge, resource=resource))["error"]
            == "invalid_target"
        )


def test_a_code_used_twice_is_refused_and_revokes_what_it_gave(oauth: AS) -> None:
    client = oauth.register()
    code, verifier = oauth.code(client)
    form = {"grant_type": "authorization_code", "code": code, "client_id": client, "redirect_uri": CALLBACK}
    first = oauth.token(**form, code_verifier=verifier)
    assert first.status_code == 200 and first.headers["cache-control"] == "no-store"
    access = first.json()["access_token"]
    assert oauth.mcp_status(access) == 200
    again = oauth.token(**form, code_verifier=verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert oauth.mcp_status(access) == 401  # the tokens of a replayed code are revoked


def test_a_code_of_another_client_is_refused(oauth: AS) -> None:
    alice, mallory = oauth.register(), oauth.register()
    code, verifier = oauth.code(alice)
    r = oauth.token(
        grant_type="authorization_code",
        code=code,
        client_id=mallory,
        redirect_uri=CALLBACK,
        code_verifier=verifier,
    )
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"
    r = oauth.token(
        grant_type="authorization_code",
        code=code,
        client_id=alice,
        redirect_uri=CALLBACK,
        code_verifier=verifier,
    )
    assert r.status_code == 200  # still unused: the other client's attempt did not spend it


def test_a_reused_refresh_token_revokes_the_family(oauth: AS) -> None:
    client = oauth.register()
    first = oauth.tokens(client)
    r = oauth.token(grant_type="refresh_token", refresh_token=first["refresh_token"], client_id=client)
    assert r.status_code == 200, r.text
    second = r.json()
    assert (
        second["refresh_token"] != first["refresh_token"] and oauth.mcp_status(second["access_token"]) == 200
    )
    assert oauth.mcp_status(first["access_token"]) == 401  # rotated out
    reused = oauth.token(grant_type="refresh_token", refresh_token=first["refresh_token"], client_id=client)
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    assert oauth.mcp_status(second["access_token"]) == 401  # the family is revoked
    r = oauth.token(grant_type="refresh_token", refresh_token=second["refresh_token"], client_id=client)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"
    assert connections.listing(oauth.services, ADMIN) == {}


def test_revocation_ends_the_connection(oauth: AS) -> None:
    client = oauth.register()
    tokens = oauth.tokens(client)
    r = oauth.http.post(f"{oauth.base}/revoke", data={"token": tokens["access_token"], "client_id": client})
    assert r.status_code == 200
    assert oauth.mcp_status(tokens["access_token"]) == 401
    r = oauth.token(grant_type="refresh_token", refresh_token=tokens["refresh_token"], client_id=client)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"


def test_a_token_for_another_resource_is_refused(settings: Settings, services: Services) -> None:
    """A token is bound to `{public URL}/mcp`: the same data served under another public URL refuses it."""
    kbs.create(services, ADMIN, "notes", "Team notes")
    with oauth_server(settings, services) as base, httpx.Client(timeout=60, follow_redirects=False) as http:
        first = AS(base, http, services)
        tokens = first.tokens(first.register())
        assert first.mcp_status(tokens["access_token"]) == 200
    with oauth_server(settings, services) as other, httpx.Client(timeout=60) as http:
        second = AS(other, http, services)
        assert second.mcp_status(tokens["access_token"]) == 401


def test_bad_input_is_a_4xx_with_an_oauth_error(oauth: AS) -> None:
    client = oauth.register()
    posts: list[tuple[str, dict[str, Any]]] = [
        ("/token", {"data": {}}),
        ("/token", {"data": {"client_id": client}}),
        ("/token", {"data": {"client_id": client, "grant_type": "password"}}),
        ("/token", {"data": {"client_id": client, "grant_type": "authorization_code", "code": "x"}}),
        ("/token", {"data": {"client_id": client, "grant_type": "refresh_token", "refresh_token": "\x00"}}),
        (
            "/token",
            {"content": b"\xff\xfe", "headers": {"content-type": "application/x-www-form-urlencoded"}},
        ),
        ("/token", {"data": {"client_id": "https://10.0.0.1/c.json", "grant_type": "refresh_token"}}),
        ("/register", {"content": b"not json"}),
        ("/register", {"json": {"redirect_uris": []}}),
        ("/register", {"json": {"redirect_uris": ["x"], "grant_types": ["client_credentials"]}}),
        ("/revoke", {"data": {"client_id": client}}),
        ("/revoke", {"data": {}}),
    ]
    for path, kw in posts:
        r = oauth.http.post(oauth.base + path, **kw)
        assert 400 <= r.status_code < 500, (path, kw, r.status_code, r.text)
        assert r.json()["error"] in (
            "invalid_request",
            "invalid_client",
            "invalid_grant",
            "unsupported_grant_type",
            "invalid_client_metadata",
            "invalid_redirect_uri",
            "unauthorized_client",
        ), (path, r.text)
    for query in ("", "client_id=%00", "response_type=token&client_id=" + client, "client_id=" + "a" * 5000):
        r = oauth.http.get(f"{oauth.base}/authorize?{query}")
        assert 300 <= r.status_code < 500, (query, r.status_code, r.text)


def test_consent_needs_the_sessions_csrf_token_and_its_signed_request(oauth: AS) -> None:
    client = oauth.register()
    _, challenge = pkce()
    location = oauth.authorize(client, challenge).headers["location"]
    blob = parse_qs(urlsplit(location).query)["request"][0]
    with httpx.Client(base_url=oauth.base, timeout=60, follow_redirects=False) as browser:
        page = browser.get("/admin/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
        r = browser.post("/admin/login", data={"csrf": csrf, "token": ADMIN_TOKEN, "next": "/admin/"})
        assert r.status_code == 303
        page = browser.get("/admin/connect", params={"request": blob})
        assert page.status_code == 200 and "Hostile test" in page.text and "not verified" in page.text
        assert "form-action 'self' http://127.0.0.1:9" in page.headers["content-security-policy"]
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
        allow = {"request": blob, "decision": "allow", "agent": "", "name": "csrf-bot", "kb:notes": "read"}
        for bad in ({}, {"csrf": "forged"}):
            r = browser.post("/admin/connect", data={**allow, **bad})
            assert r.status_code == 403 and "location" not in r.headers
        tampered = blob[:-4] + ("0000" if not blob.endswith("0000") else "1111")
        r = browser.post("/admin/connect", data={**allow, "csrf": csrf, "request": tampered})
        assert r.status_code == 400 and "location" not in r.headers
        r = browser.post("/admin/connect", data={**allow, "csrf": csrf, "kb:notes": "admin"})
        assert r.status_code == 400 and "location" not in r.headers  # not a permission one may grant
        assert (
            oauth.services.control.agent("csrf-bot") is None
            and connections.listing(oauth.services, ADMIN) == {}
        )
        r = browser.post("/admin/connect", data={**allow, "csrf": csrf, "decision": "deny"})
        assert r.status_code == 303 and r.headers["location"].startswith(CALLBACK + "?")
        assert parse_qs(urlsplit(r.headers["location"]).query)["error"] == ["access_denied"]
        r = browser.post("/admin/connect", data={**allow, "csrf": csrf})
        assert r.status_code == 303 and r.headers["location"].startswith(CALLBACK + "?code=")
        assert oauth.services.control.agent("csrf-bot") is not None


def test_consent_needs_a_signed_in_person_and_next_stays_inside_admin(oauth: AS) -> None:
    client = oauth.register()
    _, challenge = pkce()
    location = oauth.authorize(client, challenge).headers["location"]
    path = location[len(oauth.base) :]
    with httpx.Client(base_url=oauth.base, timeout=60, follow_redirects=False) as browser:
        r = browser.get(path)
        assert r.status_code == 303 and r.headers["location"].startswith("/admin/login?next=/admin/connect")
        page = browser.get("/admin/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
        for evil in ("//evil.example/x", "https://evil.example/", "/admin\\@evil.example"):
            r = browser.post("/admin/login", data={"csrf": csrf, "token": ADMIN_TOKEN, "next": evil})
            assert r.status_code == 303 and r.headers["location"] == "/admin/", evil
            page = browser.get("/admin/login")
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]


def test_a_plain_http_public_url_off_loopback_serves_static_tokens_only(
    settings: Settings, services: Services, agent: dict[str, str]
) -> None:
    """OAuth needs an https issuer (RFC 8414; loopback http aside): `serve --host 0.0.0.0` without a
    KBSERVER_PUBLIC_URL still starts, and /mcp takes static tokens."""
    from starlette.testclient import TestClient

    from kbserver.app import create_app

    for served in (
        settings.model_copy(update={"host": "0.0.0.0"}),
        settings.model_copy(update={"public_url": "http://kb.lan:8765"}),
    ):
        with TestClient(create_app(served, services), base_url="http://127.0.0.1") as client:
            r = client.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
            assert r.status_code == 401 and "resource_metadata" not in r.headers["www-authenticate"]
            assert client.get("/.well-known/oauth-authorization-server").status_code == 404
            assert client.get("/.well-known/oauth-protected-resource/mcp").status_code == 404
            assert client.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **agent}).status_code == 200
