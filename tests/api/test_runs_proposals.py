"""HTTP: runs read pinned snapshots; read_write_ask writes become proposals that an admin decides."""

from __future__ import annotations

import io
import subprocess
import tarfile
from typing import Any

import pytest
from starlette.testclient import TestClient

from kbserver.config import Settings
from kbserver.services import Services
from tests.helpers import git_fsck, make_agent, state


@pytest.fixture
def settings(settings_on_both_stores: Settings) -> Settings:
    """Every test here runs on both control stores (SQLite and PostgreSQL)."""
    return settings_on_both_stores


def write(client: TestClient, kb: str, headers: dict[str, str], *files: dict[str, Any], **extra: Any) -> Any:
    return client.post(f"/api/v1/kbs/{kb}/write", json={"files": list(files), **extra}, headers=headers)


def create(path: str, content: str) -> dict[str, Any]:
    return {"path": path, "mode": "create", "content": content}


def test_run_reads_its_snapshot_while_writes_go_on(
    client: TestClient, kb: str, agent: dict[str, str]
) -> None:
    write(client, kb, agent, create("a.md", "before\n"))
    run = client.post("/api/v1/runs", json={}, headers=agent)
    assert run.status_code == 201, run.text
    body = run.json()
    head = client.get(f"/api/v1/kbs/{kb}", headers=agent).json()["head"]
    assert body["mounts"] == {kb: head}
    w = write(
        client,
        kb,
        agent,
        {"path": "a.md", "mode": "overwrite", "content": "after\n"},
        create("b.md", "new"),
        run_id=body["id"],
    )
    assert w.status_code == 200
    pinned = client.get(f"/api/v1/runs/{body['id']}/kbs/{kb}/files/a.md", headers=agent).json()
    assert pinned["content"] == "before\n" and pinned["version"] == head
    listing = client.get(f"/api/v1/runs/{body['id']}/kbs/{kb}/files", headers=agent).json()
    assert [f["path"] for f in listing["files"]] == ["README.md", "a.md"]
    current = client.get(f"/api/v1/kbs/{kb}/files/a.md", headers=agent).json()
    assert current["content"] == "after\n"  # the current file includes the run's own write
    top = client.get(f"/api/v1/kbs/{kb}/versions", headers=agent).json()["versions"][0]
    assert top["run"] == body["id"]
    r = client.get(f"/api/v1/runs/{body['id']}/kbs/{kb}/files/b.md", headers=agent)
    assert r.status_code == 404


def test_runs_belong_to_their_agent(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], admin: dict[str, str]
) -> None:
    other = make_agent(services, "eve", {kb: "read_write"})
    run_id = client.post("/api/v1/runs", json={"kbs": [kb]}, headers=agent).json()["id"]
    for url in (
        f"/api/v1/runs/{run_id}/kbs/{kb}/files",
        f"/api/v1/runs/{run_id}/kbs/{kb}/files/README.md",
        f"/api/v1/runs/nope/kbs/{kb}/files",
    ):
        r = client.get(url, headers=other)
        assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
    before = state(services, kb)
    r = write(client, kb, other, create("x.md", "x"), run_id=run_id)
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
    assert state(services, kb) == before
    r = client.post("/api/v1/runs", json={"kbs": ["secret-kb"]}, headers=agent)
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
    r = client.post("/api/v1/runs", json={}, headers=admin)
    assert r.status_code == 403
    r = client.post(f"/api/v1/runs/{run_id}/kbs/{kb}/files/README.md", headers=agent)
    assert (r.status_code, r.json()["error"]["code"]) == (
        405,
        "invalid_request",
    )  # nothing under /runs writes


def test_expired_runs_are_gone(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    run_id = client.post("/api/v1/runs", json={}, headers=agent).json()["id"]
    with services.control._write() as db:  # type: ignore[attr-defined]  # age the run past its expiry
        db.execute("UPDATE runs SET expires = 0 WHERE id = ?", (run_id,))
    r = client.get(f"/api/v1/runs/{run_id}/kbs/{kb}/files", headers=agent)
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")


def test_archive_of_a_version(client: TestClient, kb: str, agent: dict[str, str]) -> None:
    v = write(client, kb, agent, create("n/a.md", "alpha")).json()["version"]
    write(client, kb, agent, create("n/b.md", "beta"))
    r = client.get(f"/api/v1/kbs/{kb}/archive", params={"version": v}, headers=agent)
    assert r.status_code == 200 and r.headers["content-type"] == "application/gzip"
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:gz") as tar:
        names = sorted(tar.getnames())
        assert names == [f"{kb}/README.md", f"{kb}/n/a.md"]
        member = tar.extractfile(f"{kb}/n/a.md")
        assert member is not None and member.read() == b"alpha"


@pytest.fixture
def asker(services: Services, kb: str) -> dict[str, str]:
    return make_agent(services, "cautious", {kb: "read_write_ask"})


def test_ask_agent_outside_interactive_run_cannot_write(
    client: TestClient, services: Services, kb: str, asker: dict[str, str]
) -> None:
    before = state(services, kb)
    r = write(client, kb, asker, create("x.md", "x"))
    assert (r.status_code, r.json()["error"]["code"]) == (403, "approval_unavailable")
    run_id = client.post("/api/v1/runs", json={"interactive": False}, headers=asker).json()["id"]
    r = write(client, kb, asker, create("x.md", "x"), run_id=run_id)
    assert (r.status_code, r.json()["error"]["code"]) == (403, "approval_unavailable")
    assert state(services, kb) == before


def test_proposal_lifecycle(
    client: TestClient,
    services: Services,
    kb: str,
    asker: dict[str, str],
    admin: dict[str, str],
    agent: dict[str, str],
) -> None:
    run_id = client.post("/api/v1/runs", json={"interactive": True}, headers=asker).json()["id"]
    before = state(services, kb)
    bad = write(client, kb, asker, create("README.md", "x"), run_id=run_id)
    assert (bad.status_code, bad.json()["error"]["code"]) == (409, "already_exists")  # validated at once
    r = write(client, kb, asker, create("idea.md", "an idea\n"), message="propose idea", run_id=run_id)
    assert r.status_code == 202, r.text
    prop = r.json()["proposal"]
    assert prop["status"] == "pending"
    assert state(services, kb) == before  # nothing changes on main
    listed = client.get(f"/api/v1/kbs/{kb}/proposals", params={"status": "pending"}, headers=admin).json()
    assert [p["id"] for p in listed["proposals"]] == [prop["id"]]
    item = listed["proposals"][0]
    assert item["agent"] == "cautious" and item["files"] == [{"path": "idea.md", "mode": "create"}]
    assert "+an idea" in item["diff"][0]["patch"]
    # the agent cannot approve its own proposal; another agent cannot see it
    r = client.post(f"/api/v1/kbs/{kb}/proposals/{prop['id']}/approve", headers=asker)
    assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden")
    r = client.get(f"/api/v1/kbs/{kb}/proposals/{prop['id']}", headers=agent)
    assert r.status_code == 404
    r = client.post(f"/api/v1/kbs/{kb}/proposals/{prop['id']}/approve", headers=admin)
    assert r.status_code == 200, r.text
    version = r.json()["version"]
    top = client.get(f"/api/v1/kbs/{kb}/versions", headers=admin).json()["versions"][0]
    assert (top["version"], top["kind"], top["author"], top["run"]) == (
        version,
        "approval",
        "agent:cautious",
        run_id,
    )
    log = subprocess.run(
        ["git", "log", "-1", "--format=%B", "main"],
        cwd=services.repos.path(kb),
        capture_output=True,
        text=True,
    ).stdout
    assert f"Kb-Proposal: {prop['id']}" in log and "Kb-Approver: admin" in log
    before = state(services, kb)
    for action in ("approve", "reject"):
        again = client.post(f"/api/v1/kbs/{kb}/proposals/{prop['id']}/{action}", headers=admin)
        error = again.json()["error"]
        assert (again.status_code, error["code"], error["status"]) == (409, "not_pending", "approved")
    assert state(services, kb) == before
    assert client.get(f"/api/v1/kbs/{kb}/files/idea.md", headers=admin).json()["content"] == "an idea\n"
    git_fsck(services.repos.path(kb))


def test_stale_proposal_stays_pending_then_rejected(
    client: TestClient, services: Services, kb: str, asker: dict[str, str], admin: dict[str, str]
) -> None:
    readme = client.get(f"/api/v1/kbs/{kb}/files/README.md", headers=asker).json()
    run_id = client.post("/api/v1/runs", json={"interactive": True}, headers=asker).json()["id"]
    r = write(
        client,
        kb,
        asker,
        {"path": "README.md", "mode": "append", "content": "more\n", "expected_sha256": readme["sha256"]},
        run_id=run_id,
    )
    pid = r.json()["proposal"]["id"]
    write(client, kb, admin, {"path": "README.md", "mode": "append", "content": "admin was first\n"})
    before = state(services, kb)
    r = client.post(f"/api/v1/kbs/{kb}/proposals/{pid}/approve", headers=admin)
    assert (r.status_code, r.json()["error"]["code"]) == (409, "stale")
    assert state(services, kb) == before
    p = client.get(f"/api/v1/kbs/{kb}/proposals/{pid}", headers=asker).json()
    assert p["status"] == "pending" and p["reason"].startswith("stale")
    r = client.post(f"/api/v1/kbs/{kb}/proposals/{pid}/reject", json={"reason": "superseded"}, headers=admin)
    assert r.status_code == 200 and r.json()["status"] == "rejected"
    p = client.get(f"/api/v1/kbs/{kb}/proposals/{pid}", headers=asker).json()
    assert (p["status"], p["reason"]) == ("rejected", "superseded")
    for action in ("approve", "reject"):
        r = client.post(f"/api/v1/kbs/{kb}/proposals/{pid}/{action}", headers=admin)
        error = r.json()["error"]
        assert (r.status_code, error["code"], error["status"]) == (409, "not_pending", "rejected")
    r = client.post(f"/api/v1/kbs/{kb}/proposals/nope/approve", headers=admin)
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
    r = client.get(f"/api/v1/kbs/{kb}/proposals", params={"status": "bogus"}, headers=admin)
    assert r.status_code == 400
    assert state(services, kb) == before


def test_snapshot_holds_under_concurrent_writes(client: TestClient, kb: str, agent: dict[str, str]) -> None:
    import threading

    write(client, kb, agent, create("shared.md", "v0\n"))
    run = client.post("/api/v1/runs", json={}, headers=agent).json()
    pinned = run["mounts"][kb]
    stop = threading.Event()

    def writer() -> None:
        for i in range(30):
            if stop.is_set():
                return
            write(
                client,
                kb,
                agent,
                {"path": "shared.md", "mode": "append", "content": f"v{i + 1}\n"},
                create(f"new/{i}.md", "x"),
            )

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in range(30):
            f = client.get(f"/api/v1/runs/{run['id']}/kbs/{kb}/files/shared.md", headers=agent).json()
            assert (f["content"], f["version"]) == ("v0\n", pinned)
            listing = client.get(f"/api/v1/runs/{run['id']}/kbs/{kb}/files", headers=agent).json()
            assert [x["path"] for x in listing["files"]] == ["README.md", "shared.md"]
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    assert client.get(f"/api/v1/kbs/{kb}/files/shared.md", headers=agent).json()["content"] != "v0\n"


def test_a_run_takes_a_label(client: TestClient, services: Services, kb: str) -> None:
    bob = make_agent(services, "bob", {kb: "read"})
    r = client.post("/api/v1/runs", json={"label": "weekly digest"}, headers=bob)
    assert r.status_code == 201, r.text
    assert services.control.run(r.json()["id"]).label == "weekly digest"  # type: ignore[union-attr]
    for bad in ({"label": "x" * 201}, {"label": 3}, {"label": "tab\there"}):
        r = client.post("/api/v1/runs", json=bad, headers=bob)
        assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request"), bad
