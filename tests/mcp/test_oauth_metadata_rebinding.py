"""A client metadata URL is fetched from the very address that was checked: a host that resolves
to an allowed address at the check and elsewhere at the connection (DNS rebinding) cannot lead the
fetch there. The OS resolver is wrapped to rebind; the document server and the fetch are real."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kbserver.services.access import client_metadata

pytestmark = pytest.mark.timeout(120)
REBOUND = "192.0.2.1"  # TEST-NET-1: reserved, never the document server


class _Document(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        me = f"http://{self.headers['Host']}{self.path}"  # the name the client asked for, kept
        body = json.dumps({"client_id": me, "redirect_uris": ["http://127.0.0.1:9/cb"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Document)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_fetch_connects_to_the_address_that_was_checked(
    port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = socket.getaddrinfo
    asked: list[str] = []

    def rebinding(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "localhost":  # loopback at the first answer, a reserved address after it
            asked.append(host)
            host = "127.0.0.1" if len(asked) == 1 else REBOUND
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    url = f"http://localhost:{port}/client.json"
    doc = client_metadata.fetch(url, loopback=True, timeout=3)
    assert doc["client_id"] == url  # served by 127.0.0.1, asked for by its name
    assert asked == ["localhost"]  # resolved once: the connection went to what was checked


def test_a_host_resolving_to_a_private_address_is_refused_before_any_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = socket.getaddrinfo

    def private(host: Any, *args: Any, **kwargs: Any) -> Any:
        return real("10.1.2.3" if host == "app.example" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", private)
    with pytest.raises(client_metadata.ClientMetadataError, match=r"10\.1\.2\.3, a private"):
        client_metadata.fetch("https://app.example/c.json")
