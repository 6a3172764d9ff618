"""/healthz for a balancer: 503 while the node starts, drains (SIGTERM with a drain time) or cannot
reach its control store, 200 again once it can; and the node-local cache folder."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
from starlette.testclient import TestClient

from kbserver.app import create_app
from kbserver.config import Settings
from kbserver.core.model import Create, WriteRequest
from kbserver.services import kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.context import Options
from kbserver.services.reading import search
from kbserver.services.writing import writes
from kbserver.wiring import open_services
from tests.helpers import ADMIN_TOKEN, LiveServer, make_agent
from tests.pg import PASSWORD, PostgresServer


def test_healthz_is_503_until_the_node_has_started(settings: Settings) -> None:
    services = open_services(settings.data, settings.options())
    try:
        app = create_app(settings, services)
        early = TestClient(app).get("/healthz")  # no lifespan: the node has not started
        assert early.status_code == 503 and early.json() == {"status": "unavailable", "reason": "starting"}
        assert early.headers["retry-after"] == "5"
        with TestClient(app) as client:
            assert client.get("/healthz").json() == {"status": "ok"}
    finally:
        services.close()


def test_healthz_is_503_while_postgres_is_away_and_200_when_it_is_back(
    own_postgres: PostgresServer, tmp_path: Path
) -> None:
    url = own_postgres.database()
    settings = Settings(data=tmp_path / "data", admin_token=ADMIN_TOKEN, sample=False, embedder="none")
    services = open_services(settings.data, Options(embedder=None, control_url=url))
    try:
        kbs.create(services, ADMIN, "notes", "")
        bob = make_agent(services, "bob", {"notes": "read"})
        with TestClient(create_app(settings, services), raise_server_exceptions=False) as client:
            assert client.get("/healthz").status_code == 200
            own_postgres.pause()
            down = client.get("/healthz")
            assert down.status_code == 503 and down.json()["reason"] == "the control store does not answer"
            assert "127.0.0.1" not in down.text and PASSWORD not in down.text  # a public endpoint
            refused = client.get("/api/v1/kbs", headers=bob)  # a request needing the control store
            assert refused.status_code == 503 and refused.json()["error"]["code"] == "unavailable"
            assert PASSWORD not in refused.text
            own_postgres.resume()
            deadline = time.monotonic() + 60
            while client.get("/healthz").status_code != 200 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert client.get("/healthz").status_code == 200
            assert client.get("/api/v1/kbs", headers=bob).json()[0]["slug"] == "notes"
    finally:
        services.close()


def test_sigterm_drains_with_healthz_503_while_requests_are_still_served(tmp_path: Path) -> None:
    env = {"KBSERVER_SAMPLE": "false", "KBSERVER_EMBEDDER": "none", "KBSERVER_DRAIN_SECONDS": "5"}
    server = LiveServer(tmp_path / "data", env).start()
    try:
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        with httpx.Client(base_url=server.url, timeout=30) as client:
            health = client.get("/healthz")
            assert health.status_code == 503 and health.json()["reason"] == "draining"
            assert client.get("/api/v1/kbs", headers=auth).status_code == 200  # still serving
        assert server.proc.wait(timeout=60) in (143, -signal.SIGTERM)  # then a clean stop, as without a drain
    finally:
        server.stop()


def test_the_index_lives_in_the_cache_folder(tmp_path: Path) -> None:
    services = open_services(tmp_path / "data", Options(embedder=None, cache_dir=tmp_path / "cache"))
    services.start()
    try:
        kbs.create(services, ADMIN, "notes", "")
        req = WriteRequest(files=[Create(path="a.md", mode="create", content="the zebra\n")])
        version = writes.submit(services, ADMIN, "notes", req).version
        import asyncio

        assert asyncio.run(search.wait_for(services, ADMIN, "notes", version, 30))
        assert [h.path for h in search.query(services, ADMIN, "notes", "zebra").hits] == ["a.md"]
        assert (tmp_path / "cache" / "index").is_dir() and (tmp_path / "cache" / "feed.log").exists()
        assert not (tmp_path / "data" / "index").exists() and not (tmp_path / "data" / "feed.log").exists()
    finally:
        services.close()
