"""GET /kbs/{slug}/search?wait_for=: a search that sees the caller's own acknowledged write."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from kbserver.app import create_app
from kbserver.config import Settings
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.wiring import open_services
from tests.helpers import ADMIN_TOKEN, state

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def unfollowed(tmp_path: Path) -> Iterator[tuple[TestClient, Services]]:
    """The app with nobody following main (as `serve` beside a worker that has not started yet):
    nothing is indexed until the test calls the follower itself."""
    settings = Settings(data=tmp_path / "data", admin_token=ADMIN_TOKEN, sample=False, follower="worker")
    services = open_services(settings.data, settings.options())
    services.start()
    kbs.create(services, ADMIN, "birds", "Birds")
    services.follower.catch_up("birds")
    with TestClient(create_app(settings, services), raise_server_exceptions=False) as c:
        yield c, services
    services.close()


def _write(c: TestClient, path: str, text: str) -> str:
    r = c.post(
        "/api/v1/kbs/birds/write",
        json={"files": [{"path": path, "mode": "create", "content": text}]},
        headers=AUTH,
    )
    assert r.status_code == 200, r.text
    return str(r.json()["version"])


def test_search_waits_for_the_write_it_names(unfollowed: tuple[TestClient, Services]) -> None:
    c, services = unfollowed
    v = _write(c, "kestrel.md", "a kestrel hovered over the verge")
    plain = c.get("/api/v1/kbs/birds/search", params={"q": "kestrel"}, headers=AUTH)
    assert plain.status_code == 200 and plain.json()["hits"] == [] and plain.json()["version"] != v

    # Timed out: the answer comes from the index as it is, and its version says so.
    r = c.get(
        "/api/v1/kbs/birds/search", params={"q": "kestrel", "wait_for": v, "timeout": 0.2}, headers=AUTH
    )
    assert r.status_code == 200, r.text
    assert r.json()["hits"] == [] and r.json()["version"] != v

    def follow_later() -> None:
        time.sleep(0.3)
        services.follower.catch_up("birds")

    follower = threading.Thread(target=follow_later)
    follower.start()
    try:
        r = c.get(
            "/api/v1/kbs/birds/search", params={"q": "kestrel", "wait_for": v, "timeout": 60}, headers=AUTH
        )
    finally:
        follower.join(timeout=60)
    assert r.status_code == 200, r.text
    assert [h["path"] for h in r.json()["hits"]] == ["kestrel.md"]
    assert r.json()["version"] == v


def test_search_wait_for_errors_change_nothing(unfollowed: tuple[TestClient, Services]) -> None:
    c, services = unfollowed
    _write(c, "osprey.md", "an osprey dived")
    before = state(services, "birds")
    cases = [
        ({"wait_for": "xyz"}, 400, "invalid_request"),
        ({"wait_for": "0" * 40}, 404, "not_found"),  # not on main: at once, not after the timeout
        ({"wait_for": services.repos.repo("birds").head(), "timeout": 61}, 400, "invalid_request"),
        ({"wait_for": services.repos.repo("birds").head(), "timeout": -1}, 400, "invalid_request"),
    ]
    for params, status, code in cases:
        r = c.get("/api/v1/kbs/birds/search", params={"q": "osprey", **params}, headers=AUTH)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), (params, r.text)
    r = c.get("/api/v1/kbs/nowhere/search", params={"q": "osprey", "wait_for": "0" * 40}, headers=AUTH)
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
    assert state(services, "birds") == before


def test_the_schema_documents_wait_for(unfollowed: tuple[TestClient, Services]) -> None:
    c, _ = unfollowed
    spec = c.get("/openapi.json").json()
    params = {p["name"]: p for p in spec["paths"]["/api/v1/kbs/{slug}/search"]["get"]["parameters"]}
    assert {"wait_for", "timeout"} <= set(params)
