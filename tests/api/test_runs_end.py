"""HTTP: `POST /runs/{id}/end` ends the caller's own run; reads through an ended or expired run are
`not_found`, and their words say which (both control stores)."""

from __future__ import annotations

import time

import pytest
from starlette.testclient import TestClient

from kbserver.config import Settings
from kbserver.control import RunRow
from kbserver.services import Services
from tests.helpers import make_agent, state


@pytest.fixture
def settings(settings_on_both_stores: Settings) -> Settings:
    return settings_on_both_stores


def _not_found(r: object, *words: str) -> None:
    status, body = r.status_code, r.json()  # type: ignore[attr-defined]
    assert (status, body["error"]["code"]) == (404, "not_found"), body
    for word in words:
        assert word in body["error"]["message"], body


def _reads(client: TestClient, run: str, kb: str, who: dict[str, str]) -> list[object]:
    return [
        client.get(f"/api/v1/runs/{run}", headers=who),
        client.get(f"/api/v1/runs/{run}/kbs/{kb}/files", headers=who),
        client.get(f"/api/v1/runs/{run}/kbs/{kb}/files/README.md", headers=who),
    ]


def test_an_ended_run_reads_nothing_and_says_it_was_ended(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    started = client.post("/api/v1/runs", json={"kbs": [kb]}, headers=agent)
    assert started.status_code == 201
    run = started.json()
    assert set(run) == {"id", "mounts", "interactive", "expires_at"}  # no duplicate keys (run, expires)
    shown = client.get(f"/api/v1/runs/{run['id']}", headers=agent)
    assert shown.status_code == 200 and shown.json() == run
    for r in _reads(client, run["id"], kb, agent):
        assert r.status_code == 200  # type: ignore[attr-defined]
    ended = client.post(f"/api/v1/runs/{run['id']}/end", headers=agent)
    assert ended.status_code == 200, ended.text
    assert set(ended.json()) == {"id", "ended_at"} and ended.json()["id"] == run["id"]
    for r in _reads(client, run["id"], kb, agent):
        _not_found(r, "was ended", run["id"])
    before = state(services, kb)
    write = {"run_id": run["id"], "files": [{"path": "x.md", "mode": "create", "content": "x"}]}
    _not_found(client.post(f"/api/v1/kbs/{kb}/write", json=write, headers=agent), "was ended")
    assert state(services, kb) == before  # a write through an ended run changes nothing
    again = client.post(f"/api/v1/runs/{run['id']}/end", json={}, headers=agent)
    assert again.status_code == 200 and again.json() == ended.json()  # a retry: the first end stands


def test_only_its_own_agent_ends_a_run(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], admin: dict[str, str]
) -> None:
    eve = make_agent(services, "eve", {kb: "read_write"})
    run = client.post("/api/v1/runs", json={}, headers=agent).json()["id"]
    for who in (eve, admin):
        _not_found(client.post(f"/api/v1/runs/{run}/end", headers=who), "does not exist")
        for r in _reads(client, run, kb, who):
            _not_found(r, "does not exist")  # never "ended" or "expired": nothing said of another's run
    _not_found(client.post("/api/v1/runs/run_nope/end", headers=agent), "does not exist")
    for r in _reads(client, run, kb, agent):
        assert r.status_code == 200  # type: ignore[attr-defined]  # still live for its agent
    r = client.post(f"/api/v1/runs/{run}/end", json={"now": True}, headers=agent)
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request")
    assert client.get(f"/api/v1/runs/{run}", headers=agent).status_code == 200  # the bad call ended nothing
    r = client.post(f"/api/v1/runs/{run}/end")
    assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized")
    r = client.get(f"/api/v1/runs/{run}/end", headers=agent)
    assert r.status_code == 405 and r.headers["allow"] == "POST"


def test_an_expired_run_says_it_expired(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    now = time.time()
    bob = services.control.agent("bob")
    assert bob is not None
    old = RunRow(
        id="run_" + "1" * 24,
        agent="bob",
        created=now - 90,
        expires=now - 60,
        interactive=False,
        mounts={kb: services.repos.repo(kb).head() or ""},
        agent_id=bob.id,
    )
    services.control.add_run(old)
    client.post("/api/v1/runs", json={}, headers=agent)  # another start: its cleanup keeps the recent one
    for r in _reads(client, old.id, kb, agent):
        _not_found(r, "expired", old.id)
    _not_found(client.post(f"/api/v1/runs/{old.id}/end", headers=agent), "expired")
    row = services.control.run(old.id)
    assert row is not None and row.ended is None  # ending an expired run changed nothing
