"""Client ID Metadata Documents: a client whose id is a URL. A usable document leads to the consent
page (the name said to come from its host); one that is huge, slow, not JSON, for another client,
or on a private address is refused with a 400 and no redirect (and a private address is never
connected to)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlencode

import httpx
import pytest

from kbserver.config import Settings
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.access.client_metadata import MAX_BYTES
from tests.mcp.oauth_helpers import oauth_server, pkce

pytestmark = pytest.mark.timeout(120)
CALLBACK = "http://127.0.0.1:9/callback"
HITS: list[str] = []


class _Documents(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        HITS.append(self.path)
        me = f"http://127.0.0.1:{self.server.server_address[1]}{self.path}"
        good = {"client_id": me, "client_name": "Docs Chat", "redirect_uris": [CALLBACK]}
        body: bytes
        if self.path == "/good.json":
            body = json.dumps(good).encode()
        elif self.path == "/huge.json":
            body = json.dumps({**good, "pad": "x" * (MAX_BYTES + 10)}).encode()
        elif self.path == "/slow.json":
            time.sleep(8)
            body = json.dumps(good).encode()
        elif self.path == "/html.json":
            body = b"<html>not json</html>"
        elif self.path == "/other.json":
            body = json.dumps({**good, "client_id": "https://someone.else/c.json"}).encode()
        elif self.path == "/secret.json":
            body = json.dumps({**good, "token_endpoint_auth_method": "client_secret_basic"}).encode()
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def documents() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Documents)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _authorize(http: httpx.Client, base: str, client_id: str) -> httpx.Response:
    _, challenge = pkce()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": CALLBACK,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "s",
        "resource": f"{base}/mcp",
    }
    return http.get(f"{base}/authorize?{urlencode(query)}")


def test_metadata_documents_on_loopback_under_the_test_setting(
    settings: Settings, services: Services, documents: str
) -> None:
    kbs.create(services, ADMIN, "notes", "Team notes")
    testing = settings.model_copy(update={"oauth_loopback_clients": True})
    with oauth_server(testing, services) as base, httpx.Client(timeout=60, follow_redirects=False) as http:
        r = _authorize(http, base, f"{documents}/good.json")
        assert r.status_code == 302 and "/admin/connect?request=" in r.headers["location"], r.text
        cached = services.control.oauth_client(f"{documents}/good.json")
        assert cached is not None and cached.metadata_url and cached.info["client_name"] == "Docs Chat"
        hits = len(HITS)
        assert _authorize(http, base, f"{documents}/good.json").status_code == 302
        assert len(HITS) == hits  # cached: not fetched again
        for bad in ("huge", "slow", "html", "other", "secret", "missing"):
            r = _authorize(http, base, f"{documents}/{bad}.json")
            assert r.status_code == 400 and "location" not in r.headers, (bad, r.text)
            assert r.json()["error"] == "invalid_request"
            assert services.control.oauth_client(f"{documents}/{bad}.json") is None


def test_private_addresses_are_never_fetched(settings: Settings, services: Services, documents: str) -> None:
    with oauth_server(settings, services) as base, httpx.Client(timeout=60, follow_redirects=False) as http:
        hits = len(HITS)
        for client_id in (
            f"{documents}/good.json",  # loopback http without the test setting
            "https://127.0.0.1/good.json",
            "https://localhost/good.json",
            "https://[::1]/good.json",
            "https://10.1.2.3/c.json",
            "https://192.168.0.1/c.json",
            "https://169.254.169.254/latest/meta-data",
            "https://[fd00::1]/c.json",
            "https://0.0.0.0/c.json",
            "https://user@app.example/c.json",
            "https://app.example/",  # no path
        ):
            r = _authorize(http, base, client_id)
            assert r.status_code == 400 and "location" not in r.headers, (client_id, r.text)
        assert len(HITS) == hits
