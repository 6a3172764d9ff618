"""Two app instances over one control store (SQLite file or PostgreSQL) and one data folder: what an
admin changes on node A holds on node B at the next request (agents, tokens, links, decisions,
logouts, the login limiter)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from kbserver.app import create_app
from kbserver.config import Settings
from kbserver.services import Services
from kbserver.wiring import open_services
from tests.helpers import ADMIN_TOKEN, LiveServer
from tests.web.session import csrf_of

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture(params=["sqlite", "postgres"])
def nodes(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[TestClient, TestClient]]:
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    settings = Settings(
        data=tmp_path / "data", admin_token=ADMIN_TOKEN, sample=False, embedder="none", control_url=url
    )
    opened: list[Services] = []
    clients: list[TestClient] = []
    try:
        for _ in range(2):
            services = open_services(settings.data, settings.options())
            opened.append(services)
            client = TestClient(create_app(settings, services), raise_server_exceptions=False)
            clients.append(client.__enter__())
        yield clients[0], clients[1]
    finally:
        for client in clients:
            client.__exit__(None, None, None)
        for services in opened:
            services.close()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_agents_tokens_links_and_decisions_hold_on_the_other_node(
    nodes: tuple[TestClient, TestClient],
) -> None:
    a, b = nodes
    assert a.post("/api/v1/kbs", json={"slug": "notes", "description": "x"}, headers=ADMIN).status_code == 201
    assert b.get("/api/v1/kbs/notes", headers=ADMIN).status_code == 200  # KB metadata
    made = a.post("/api/v1/agents", json={"name": "bob"}, headers=ADMIN)
    assert made.status_code == 201
    token = made.json()["token"]
    assert b.get("/api/v1/kbs", headers=_bearer(token)).json() == []  # known on B, no links yet
    link = {"kb": "notes", "permission": "read_write_ask"}
    assert a.post("/api/v1/agents/bob/links", json=link, headers=ADMIN).status_code == 200
    assert [k["permission"] for k in b.get("/api/v1/kbs", headers=_bearer(token)).json()] == [
        "read_write_ask"
    ]
    # a proposal made on B, approved on A: B sees it decided, and a second approval on B loses
    run = b.post("/api/v1/runs", json={"interactive": True}, headers=_bearer(token)).json()["id"]
    write = {"files": [{"path": "a.md", "mode": "create", "content": "hello\n"}], "run_id": run}
    proposed = b.post("/api/v1/kbs/notes/write", json=write, headers=_bearer(token) | {"Kb-Run": run})
    assert proposed.status_code == 202, proposed.text
    pid = proposed.json()["proposal"]["id"]
    approved = a.post(f"/api/v1/kbs/notes/proposals/{pid}/approve", headers=ADMIN)
    assert approved.status_code == 200, approved.text
    again = b.post(f"/api/v1/kbs/notes/proposals/{pid}/approve", headers=ADMIN)
    assert again.status_code == 409 and again.json()["error"]["code"] == "not_pending"
    listed = b.get("/api/v1/kbs/notes/proposals", headers=ADMIN).json()["proposals"]
    assert [(p["id"], p["status"]) for p in listed] == [(pid, "approved")]
    # a token rotated on A is refused on B at once; the new one works there
    rotated = a.post("/api/v1/agents/bob/token", headers=ADMIN).json()["token"]
    assert b.get("/api/v1/kbs", headers=_bearer(token)).status_code == 401
    assert b.get("/api/v1/kbs", headers=_bearer(rotated)).status_code == 200
    # a link removed on A: the KB is gone for the agent on B; an agent deleted on A is unknown on B
    assert a.delete("/api/v1/agents/bob/links/notes", headers=ADMIN).status_code == 200
    assert b.get("/api/v1/kbs/notes", headers=_bearer(rotated)).status_code == 404
    assert a.delete("/api/v1/agents/bob", headers=ADMIN).status_code == 200
    assert b.get("/api/v1/kbs", headers=_bearer(rotated)).status_code == 401


@pytest.mark.slow
@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_a_logout_on_one_server_ends_the_session_on_the_other(
    store: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    env = {"KBSERVER_SAMPLE": "false", "KBSERVER_EMBEDDER": "none"}
    if store == "postgres":
        env["KBSERVER_CONTROL_URL"] = request.getfixturevalue("postgres_url")
    servers = [LiveServer(tmp_path / "data", env) for _ in range(2)]  # two processes, one data folder
    try:
        for server in servers:
            server.start()
        a, b = (httpx.Client(base_url=s.url, timeout=60) for s in servers)
        page = a.get("/admin/login")
        r = a.post("/admin/login", data={"csrf": csrf_of(page.text), "token": ADMIN_TOKEN})
        assert r.status_code == 303, r.text
        cookie = a.cookies.get("kbserver_admin")
        assert cookie
        b.cookies.set("kbserver_admin", cookie, path="/admin")  # the balancer sends the next request to B
        assert b.get("/admin/").status_code == 200
        assert a.post("/admin/logout", data={"csrf": csrf_of(a.get("/admin/").text)}).status_code == 303
        # B never saw the logout request, yet the same cookie is refused there at the next request
        r = b.get("/admin/")
        assert r.status_code == 303 and r.headers["location"].startswith("/admin/login")
        a.close()
        b.close()
    finally:
        for server in servers:
            server.stop()


def test_the_login_limiter_counts_failures_of_every_node(nodes: tuple[TestClient, TestClient]) -> None:
    a, b = nodes
    for client in (a, b):  # a short window of the limiter on both nodes, no delay
        admin_app = next(r.app for r in client.app.routes if getattr(r, "path", "") == "/admin")  # type: ignore[attr-defined]
        limiter = admin_app.state.login_limiter
        limiter.cap, limiter.step = 4, 0.0
    for client in (a, b, a, b):
        csrf = csrf_of(client.get("/admin/login").text)
        assert client.post("/admin/login", data={"csrf": csrf, "token": "guess"}).status_code == 401
    # four failures spread over two nodes reach the cap of four: the right token is refused on both
    for client in (a, b):
        csrf = csrf_of(client.get("/admin/login").text)
        r = client.post("/admin/login", data={"csrf": csrf, "token": ADMIN_TOKEN}, follow_redirects=False)
        assert r.status_code == 401 and "too many attempts" in r.text
