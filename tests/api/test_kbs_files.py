"""HTTP: KBs, files, auth and visibility."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from kbserver.services import Services
from tests.helpers import git_fsck, make_agent


def test_healthz_and_unknown_route(client: TestClient) -> None:
    assert client.get("/healthz").status_code == 200
    r = client.get("/api/v1/nope")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"


def test_no_token_and_bad_token_are_401(client: TestClient, kb: str) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic abc"}):
        r = client.get("/api/v1/kbs", headers=headers)
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "unauthorized"
        assert "Bearer" in r.headers["www-authenticate"]


def test_admin_creates_kb_with_readme(client: TestClient, admin: dict[str, str], services: Services) -> None:
    r = client.post("/api/v1/kbs", json={"slug": "team", "description": "Team memory"}, headers=admin)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["slug"] == "team" and body["description"] == "Team memory" and body["file_count"] == 1
    assert len(body["head"]) == 40
    readme = client.get("/api/v1/kbs/team/files/README.md", headers=admin).json()
    assert readme["content"].startswith("# team")
    git_fsck(services.repos.path("team"))
    versions = client.get("/api/v1/kbs/team/versions", headers=admin).json()["versions"]
    assert [v["kind"] for v in versions] == ["create"]
    assert versions[0]["author"] == "admin" and versions[0]["paths"] == ["README.md"]


def test_kb_create_errors(client: TestClient, admin: dict[str, str], kb: str, agent: dict[str, str]) -> None:
    r = client.post("/api/v1/kbs", json={"slug": kb}, headers=admin)
    assert (r.status_code, r.json()["error"]["code"]) == (409, "already_exists")
    for bad in (
        {"slug": "Bad Slug"},
        {"slug": ""},
        {"slug": "-x"},
        {"slug": "a" * 64},
        {},
        {"slug": 3},
        {"slug": "ok", "extra": 1},
    ):
        r = client.post("/api/v1/kbs", json=bad, headers=admin)
        assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request"), bad
    r = client.post("/api/v1/kbs", json={"slug": "mine"}, headers=agent)
    assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden")
    r = client.post("/api/v1/kbs", content=b"{not json", headers=admin)
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request")


def test_visibility_hides_other_kbs(
    client: TestClient, services: Services, admin: dict[str, str], kb: str, agent: dict[str, str]
) -> None:
    client.post("/api/v1/kbs", json={"slug": "secret"}, headers=admin)
    listed = client.get("/api/v1/kbs", headers=agent).json()
    assert [k["slug"] for k in listed] == [kb]
    assert listed[0]["permission"] == "read_write" and len(listed[0]["head"]) == 40
    for url in (
        "/api/v1/kbs/secret",
        "/api/v1/kbs/secret/files",
        "/api/v1/kbs/secret/files/README.md",
        "/api/v1/kbs/secret/versions",
        "/api/v1/kbs/missing",
    ):
        r = client.get(url, headers=agent)
        assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found"), url
    admin_list = client.get("/api/v1/kbs", headers=admin).json()
    assert {k["slug"] for k in admin_list} == {kb, "secret"}


def test_files_list_and_read(client: TestClient, kb: str, agent: dict[str, str]) -> None:
    files = [
        {"path": p, "mode": "create", "content": f"# {p}\n"}
        for p in ("b.md", "a/x.md", "a/y.md", "笔记/咖啡.md")
    ]
    w = client.post(f"/api/v1/kbs/{kb}/write", json={"files": files}, headers=agent)
    assert w.status_code == 200, w.text
    listing = client.get(f"/api/v1/kbs/{kb}/files", headers=agent).json()
    assert [f["path"] for f in listing["files"]] == ["README.md", "a/x.md", "a/y.md", "b.md", "笔记/咖啡.md"]
    assert listing["version"] == w.json()["version"]
    prefixed = client.get(f"/api/v1/kbs/{kb}/files", params={"prefix": "a/"}, headers=agent).json()
    assert [f["path"] for f in prefixed["files"]] == ["a/x.md", "a/y.md"]
    f = client.get(f"/api/v1/kbs/{kb}/files/笔记/咖啡.md", headers=agent).json()
    assert f["content"] == "# 笔记/咖啡.md\n" and f["version"] == listing["version"]
    import hashlib

    assert f["sha256"] == hashlib.sha256(f["content"].encode()).hexdigest()
    entry = next(e for e in listing["files"] if e["path"] == "笔记/咖啡.md")
    assert entry["sha256"] == f["sha256"] and entry["size"] == len(f["content"].encode())


def test_read_errors(client: TestClient, kb: str, agent: dict[str, str]) -> None:
    cases = [
        (f"/api/v1/kbs/{kb}/files/missing.md", 404, "not_found"),
        (f"/api/v1/kbs/{kb}/files/README.md?version=zzz", 400, "invalid_request"),
        (f"/api/v1/kbs/{kb}/files/README.md?version={'0' * 40}", 404, "not_found"),
        (f"/api/v1/kbs/{kb}/files?version={'a' * 39}", 400, "invalid_request"),
        (f"/api/v1/kbs/{kb}/files/a%5Cb.md", 400, "invalid_request"),
        (f"/api/v1/kbs/{kb}/files/.git/config", 400, "invalid_request"),
        (f"/api/v1/kbs/{kb}/files?unknown=1", 400, "invalid_request"),
    ]
    for url, status, code in cases:
        r = client.get(url, headers=agent)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), url


def test_read_at_old_version(client: TestClient, kb: str, agent: dict[str, str]) -> None:
    first = client.post(
        f"/api/v1/kbs/{kb}/write",
        json={"files": [{"path": "n.md", "mode": "create", "content": "one"}]},
        headers=agent,
    ).json()
    client.post(
        f"/api/v1/kbs/{kb}/write",
        json={"files": [{"path": "n.md", "mode": "overwrite", "content": "two"}]},
        headers=agent,
    )
    old = client.get(
        f"/api/v1/kbs/{kb}/files/n.md", params={"version": first["version"]}, headers=agent
    ).json()
    assert old["content"] == "one" and old["version"] == first["version"]
    assert client.get(f"/api/v1/kbs/{kb}/files/n.md", headers=agent).json()["content"] == "two"


def test_read_only_agent_cannot_write(client: TestClient, services: Services, kb: str) -> None:
    reader = make_agent(services, "reader", {kb: "read"})
    head = client.get(f"/api/v1/kbs/{kb}", headers=reader).json()["head"]
    r = client.post(
        f"/api/v1/kbs/{kb}/write",
        json={"files": [{"path": "x.md", "mode": "create", "content": "x"}]},
        headers=reader,
    )
    assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden")
    assert client.get(f"/api/v1/kbs/{kb}", headers=reader).json()["head"] == head


def test_metrics_and_access_log(
    client: TestClient,
    kb: str,
    agent: dict[str, str],
    admin: dict[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    import json

    from kbserver.logs import JsonFormatter

    with caplog.at_level("INFO", logger="kbserver.access"):
        r = client.post(
            f"/api/v1/kbs/{kb}/write",
            headers=agent,
            json={"files": [{"path": "m.md", "mode": "create", "content": "x"}]},
        )
        assert r.status_code == 200
        client.get(f"/api/v1/kbs/{kb}/files/nope.md", headers=agent)
    lines = [json.loads(JsonFormatter().format(r)) for r in caplog.records if r.name == "kbserver.access"]
    assert lines[0]["route"] == "/api/v1/kbs/{slug}/write" and lines[0]["caller"] == "agent:bob"
    assert lines[1]["status"] == 404 and lines[1]["error"] == "not_found"
    text = client.get("/metrics", headers=admin).text
    assert (
        'kbserver_http_requests_total{method="POST",route="/api/v1/kbs/{slug}/write",status="200"} 1.0'
        in text
    )
    assert f'kbserver_commits_total{{kb="{kb}"}} 2.0' in text  # the KB's first version and the write
    assert "kbserver_write_seconds_count 1.0" in text
