"""Review findings: concurrent creates of one slug, revert across a file <-> folder change, and
failures after main moved (a commit hook, the fsync of the ref folder) that must not fail a write."""

from __future__ import annotations

import concurrent.futures
import os
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from kbserver.services import Services
from kbserver.store import writer as writer_module
from tests.helpers import ADMIN_TOKEN, LiveServer, git_fsck, state


def _files(
    client: TestClient, kb: str, headers: dict[str, str], version: str | None = None
) -> dict[str, str]:
    params = {"version": version} if version else {}
    listing = client.get(f"/api/v1/kbs/{kb}/files", params=params, headers=headers).json()
    return {f["path"]: f["sha256"] for f in listing["files"]}


def _write(client: TestClient, kb: str, headers: dict[str, str], *files: dict[str, str]) -> str:
    r = client.post(f"/api/v1/kbs/{kb}/write", json={"files": list(files)}, headers=headers)
    assert r.status_code == 200, r.text
    return str(r.json()["version"])


@pytest.mark.slow
def test_concurrent_creates_of_one_slug_make_exactly_one_kb(live: LiveServer) -> None:
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    for round_ in range(3):
        slug = f"race-{round_}"

        def create(_: int, slug: str = slug) -> tuple[int, str]:
            r = httpx.post(live.url + "/api/v1/kbs", json={"slug": slug}, headers=auth, timeout=60)
            return r.status_code, r.json().get("error", {}).get("code", "")

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            results = list(pool.map(create, range(6)))
        assert sorted(results) == [(201, "")] + [(409, "already_exists")] * 5, results
        got = httpx.get(live.url + f"/api/v1/kbs/{slug}", headers=auth, timeout=30)
        assert got.status_code == 200 and got.json()["file_count"] == 1
        git_fsck(live.data / "kbs" / f"{slug}.git")
    assert not [p for p in (live.data / "kbs").iterdir() if p.name.startswith(".")]  # no half-made repos


def test_revert_across_a_file_folder_change(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    v1 = _write(client, kb, agent, {"path": "notes/x.md", "mode": "create", "content": "x\n"})
    at_v1 = _files(client, kb, agent)
    _write(client, kb, agent, {"path": "notes/x.md", "mode": "delete"})
    v3 = _write(client, kb, agent, {"path": "notes", "mode": "create", "content": "now a file\n"})
    at_v3 = _files(client, kb, agent)
    r = client.post(f"/api/v1/kbs/{kb}/revert", json={"version": v1}, headers=agent)  # file -> folder
    assert r.status_code == 200, r.text
    assert _files(client, kb, agent) == at_v1 == _files(client, kb, agent, v1)
    r = client.post(f"/api/v1/kbs/{kb}/revert", json={"version": v3}, headers=agent)  # folder -> file
    assert r.status_code == 200, r.text
    assert _files(client, kb, agent) == at_v3
    assert {
        c["path"]: c["change"]
        for c in client.get(f"/api/v1/kbs/{kb}/versions/{r.json()['version']}", headers=agent).json()["diff"]
    } == {"notes": "added", "notes/x.md": "deleted"}
    git_fsck(services.repos.path(kb))


def test_a_write_is_not_an_error_when_a_commit_hook_fails(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    def broken(_slug: str, _version: str) -> None:
        raise RuntimeError("a hook with a bug")

    services.commit_hooks.append(broken)
    r = client.post(
        f"/api/v1/kbs/{kb}/write",
        json={"files": [{"path": "hooked.md", "mode": "create", "content": "kept\n"}]},
        headers=agent,
    )
    assert r.status_code == 200, r.text
    assert state(services, kb)[0] == r.json()["version"]
    assert _files(client, kb, agent)["hooked.md"] == r.json()["files"][0]["sha256"]


def test_a_write_is_not_an_error_when_the_ref_fsync_fails(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Main has moved when the fsync of its folder fails: the write is done and is answered as done."""
    real = writer_module.fsync_path
    hit: list[bool] = []

    def flaky(path: str) -> None:
        if path.endswith(os.path.join("refs", "heads")):
            hit.append(True)
            raise OSError(5, "Input/output error")
        real(path)

    monkeypatch.setattr(writer_module, "fsync_path", flaky)
    r = client.post(
        f"/api/v1/kbs/{kb}/write",
        json={"files": [{"path": "synced.md", "mode": "create", "content": "kept\n"}]},
        headers=agent,
    )
    assert r.status_code == 200, r.text
    assert hit and state(services, kb)[0] == r.json()["version"]
    git_fsck(Path(services.repos.path(kb)))
