"""Behind a proxy or not: who the login limiter counts, the Secure cookie, and bodies refused by
their declared size before they are read (a real `kbserver serve`)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from kbserver.app import create_app
from kbserver.config import Settings
from kbserver.services import Services
from tests.helpers import ADMIN_TOKEN, LiveServer
from tests.web.session import csrf_of

ENV = {"KBSERVER_SAMPLE": "false", "KBSERVER_EMBEDDER": "none"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    live = LiveServer(tmp_path / "data", ENV).start()
    yield live
    live.stop()


def _fail_logins(client: httpx.Client, csrf: str, forwarded: list[str]) -> list[int]:
    """Failed logins at once, each claiming another client address in X-Forwarded-For."""
    statuses: list[int] = []
    lock = threading.Lock()

    def attempt(address: str) -> None:
        r = client.post(
            "/admin/login", data={"csrf": csrf, "token": "guess"}, headers={"X-Forwarded-For": address}
        )
        with lock:
            statuses.append(r.status_code)

    threads = [threading.Thread(target=attempt, args=(a,)) for a in forwarded]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return statuses


def _login(client: httpx.Client, csrf: str, forwarded: str) -> httpx.Response:
    return client.post(
        "/admin/login", data={"csrf": csrf, "token": ADMIN_TOKEN}, headers={"X-Forwarded-For": forwarded}
    )


@pytest.mark.slow
def test_a_rotated_x_forwarded_for_does_not_escape_the_limiter(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url, timeout=120) as client:
        csrf = csrf_of(client.get("/admin/login").text)
        statuses = _fail_logins(client, csrf, [f"10.9.{n // 250}.{n % 250}" for n in range(24)])
        assert statuses == [401] * 24
        # every attempt came from 127.0.0.1: that address is locked out, whatever it claims to be
        r = _login(client, csrf, "10.200.0.1")
        assert r.status_code == 401 and "too many attempts" in r.text


@pytest.mark.slow
def test_a_trusted_proxy_forwards_the_client_address_and_scheme(tmp_path: Path) -> None:
    env = ENV | {"KBSERVER_TRUSTED_PROXIES": "127.0.0.1"}
    live = LiveServer(tmp_path / "data", env).start()
    try:
        with httpx.Client(base_url=live.url, timeout=120) as client:
            csrf = csrf_of(client.get("/admin/login").text)
            assert _fail_logins(client, csrf, ["10.0.0.1"] * 21) == [401] * 21
            locked = _login(client, csrf, "10.0.0.1")
            assert locked.status_code == 401 and "too many attempts" in locked.text
            # another client behind the same proxy is its own address; HTTPS at the proxy: Secure cookie
            r = client.post(
                "/admin/login",
                data={"csrf": csrf, "token": ADMIN_TOKEN},
                headers={"X-Forwarded-For": "10.0.0.2", "X-Forwarded-Proto": "https"},
            )
            assert r.status_code == 303, r.text
            assert "secure" in r.headers["set-cookie"].lower().split("; ")
    finally:
        live.stop()


def _cookie_flags(client: TestClient) -> list[str]:
    """The flags of the session cookie the login page sets (a pre-login session holds its CSRF token)."""
    return client.get("/admin/login").headers["set-cookie"].lower().split("; ")


def test_the_session_cookie_is_secure_on_https_or_when_set(settings: Settings, services: Services) -> None:
    with TestClient(create_app(settings, services)) as plain:
        assert "secure" not in _cookie_flags(plain)
    with TestClient(create_app(settings, services), base_url="https://testserver") as tls:
        assert "secure" in _cookie_flags(tls)
        page = tls.get("/admin/login")
        r = tls.post(
            "/admin/login", data={"csrf": csrf_of(page.text), "token": ADMIN_TOKEN}, follow_redirects=False
        )
        assert r.status_code == 303 and "secure" in r.headers["set-cookie"].lower().split("; ")
    always = settings.model_copy(update={"secure_cookies": True})
    with TestClient(create_app(always, services)) as behind_tls_proxy:
        assert "secure" in _cookie_flags(behind_tls_proxy)


def _declared_only(server: LiveServer, request_line: str, headers: str) -> bytes:
    """Send only the head of a request declaring a 1 GB body; the answer must come without it."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(
            f"{request_line}\r\nHost: 127.0.0.1\r\nContent-Length: 1000000000\r\n{headers}\r\n".encode()
        )
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    return answer


@pytest.mark.slow
def test_an_oversize_declared_body_is_refused_up_front(server: LiveServer) -> None:
    login = _declared_only(
        server, "POST /admin/login HTTP/1.1", "Content-Type: application/x-www-form-urlencoded\r\n"
    )
    assert login.startswith(b"HTTP/1.1 413 "), login[:200]
    git = _declared_only(
        server,
        "POST /git/sample.git/git-upload-pack HTTP/1.1",
        "Content-Type: application/x-git-upload-pack-request\r\n",
    )
    assert git.startswith(b"HTTP/1.1 413 "), git[:200]
