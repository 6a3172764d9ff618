"""/mcp while a real `kbserver serve` cannot reach its PostgreSQL: the token check fails inside the
SDK's auth middleware, and the answer is a JSON-RPC error with status 503, `Retry-After` and the
contract's `unavailable`, never the plain-text 500 the SDK begins ("response already started"); once
PostgreSQL answers again, so does /mcp, without a restart. Both outages: the server stopped, and the
network silent (a proxy that stops forwarding while every socket stays open)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.faultproxy import FaultProxy
from tests.helpers import ADMIN_TOKEN, LiveServer
from tests.mcp.clients import INITIALIZE, MCP_HEADERS
from tests.pg import PASSWORD, PostgresServer

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
BOUND_SECONDS = 20.0  # the contract's 10 s, with a margin for a busy 2-core machine


@pytest.fixture
def proxied(own_postgres: PostgresServer) -> Iterator[tuple[str, FaultProxy]]:
    """A fresh database of this test's own server, reached through a fault-injecting proxy."""
    url = own_postgres.database()
    port = int(str(psycopg.conninfo.conninfo_to_dict(url)["port"]))
    proxy = FaultProxy("127.0.0.1", port)
    try:
        yield url.replace(f":{port}/", f":{proxy.port}/"), proxy
    finally:
        proxy.release()
        proxy.close()


def _initialize(url: str, auth: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{url}/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **auth}, timeout=60)


def _agent(url: str) -> dict[str, str]:
    made = httpx.post(f"{url}/api/v1/agents", json={"name": "ada"}, headers=ADMIN, timeout=60)
    assert made.status_code == 201, made.text
    return {"Authorization": f"Bearer {made.json()['token']}"}


def _assert_jsonrpc_503(r: httpx.Response) -> None:
    assert r.status_code == 503, r.text  # was a plain-text 500
    assert int(r.headers["retry-after"]) >= 1
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["error"]["data"]["code"] == "unavailable", body
    assert body["error"]["message"].startswith("unavailable: "), body
    assert PASSWORD not in r.text


def _until_answered(url: str, auth: dict[str, str]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        r = _initialize(url, auth)
        if r.status_code == 200:
            assert r.headers["mcp-session-id"]
            return
        assert r.status_code == 503, r.text  # never anything else on the way back
        time.sleep(0.5)
    raise AssertionError("/mcp did not answer again within 90 s of PostgreSQL's return")


@pytest.mark.slow
@pytest.mark.parametrize("outage", ["stopped", "silent"])
def test_mcp_answers_a_control_store_outage_with_a_jsonrpc_503(
    tmp_path: Path, own_postgres: PostgresServer, proxied: tuple[str, FaultProxy], outage: str
) -> None:
    url, proxy = proxied
    env = {"KBSERVER_CONTROL_URL": url, "KBSERVER_EMBEDDER": "none", "KBSERVER_SAMPLE": "false"}
    server = LiveServer(tmp_path / "data", env=env).start()
    try:
        auth = _agent(server.url)
        assert _initialize(server.url, auth).status_code == 200
        if outage == "stopped":
            own_postgres.pause()
        else:
            proxy.hold()
        for _ in range(2):  # the first call finds the outage, the next one fails sooner
            started = time.monotonic()
            r = _initialize(server.url, auth)
            took = time.monotonic() - started
            _assert_jsonrpc_503(r)
            assert took < BOUND_SECONDS, f"503 after {took:.1f} s"
        if outage == "stopped":
            own_postgres.resume()
        else:
            proxy.release()
        _until_answered(server.url, auth)
        assert "response already started" not in server.log.read_text(errors="replace")
    finally:
        server.stop()
