"""A version in a request must be on main: a pending proposal's commit, a tree or an unknown id is
not_found for every read (files, one file, archive, versions/{id}) and for revert."""

from __future__ import annotations

import subprocess
from pathlib import Path

from starlette.testclient import TestClient

from kbserver.core.errors import NotFound
from kbserver.services import Services
from kbserver.services.access.auth import ADMIN
from kbserver.services.reading import files
from kbserver.store import CommitPlan, Repos
from tests.helpers import git_fsck, make_agent, state


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def _pending_commit(client: TestClient, services: Services, kb: str) -> str:
    asker = make_agent(services, "asker", {kb: "read_write_ask"})
    run_id = client.post("/api/v1/runs", json={"interactive": True}, headers=asker).json()["id"]
    files_ = [{"path": "secret-plan.md", "mode": "create", "content": "pending content\n"}]
    r = client.post(f"/api/v1/kbs/{kb}/write", json={"files": files_, "run_id": run_id}, headers=asker)
    assert r.status_code == 202, r.text
    row = services.control.proposal(kb, r.json()["proposal"]["id"])
    assert row is not None
    return row.ref_commit


def test_a_pending_proposal_commit_is_not_a_version(
    client: TestClient, services: Services, kb: str, admin: dict[str, str]
) -> None:
    reader = make_agent(services, "reader", {kb: "read"})
    writer = make_agent(services, "writer", {kb: "read_write"})
    pending = _pending_commit(client, services, kb)
    repo = services.repos.path(kb)
    tree = _git(repo, "rev-parse", f"{pending}^{{tree}}")
    unknown = "0123456789abcdef" * 2 + "01234567"
    before = state(services, kb)
    for version in (pending, tree, unknown):
        for who in (reader, writer, admin):
            for url in (
                f"/api/v1/kbs/{kb}/files/secret-plan.md",
                f"/api/v1/kbs/{kb}/files",
                f"/api/v1/kbs/{kb}/archive",
            ):
                r = client.get(url, params={"version": version}, headers=who)
                assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found"), (url, r.text)
                assert "pending content" not in r.text
            r = client.get(f"/api/v1/kbs/{kb}/versions/{version}", headers=who)
            assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found"), r.text
            r = client.get(f"/api/v1/kbs/{kb}/versions", params={"cursor": version}, headers=who)
            assert r.status_code in (400, 404) and r.json()["error"]["code"] in (
                "invalid_request",
                "not_found",
            )
        r = client.post(f"/api/v1/kbs/{kb}/revert", json={"version": version}, headers=writer)
        assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found"), r.text
        r = client.post(f"/api/v1/kbs/{kb}/versions/{version}/undo", json={}, headers=writer)
        assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found"), r.text
    assert state(services, kb) == before
    git_fsck(repo)


def test_every_version_on_main_stays_readable_as_main_grows(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], tmp_path: Path
) -> None:
    seen = [services.repos.repo(kb).head()]
    for i in range(5):
        r = client.post(
            f"/api/v1/kbs/{kb}/write",
            json={"files": [{"path": f"n{i}.md", "mode": "create", "content": f"{i}\n"}]},
            headers=agent,
        )
        seen.append(r.json()["version"])
        for n, version in enumerate(seen):  # each new head is known at once, the old ones still are
            r = client.get(f"/api/v1/kbs/{kb}/files", params={"version": version}, headers=agent)
            assert r.status_code == 200 and len(r.json()["files"]) == 1 + n
    # `kbserver mount` refuses a proposal commit the same way
    pending = _pending_commit(client, services, kb)
    try:
        files.export(services, ADMIN, kb, tmp_path / "mnt", pending)
        raise AssertionError("export of a pending commit must fail")
    except NotFound:
        pass
    assert not (tmp_path / "mnt").exists()


def test_on_main_follows_a_rewritten_main(tmp_path: Path) -> None:
    repos = Repos(tmp_path / "kbs", fsync=False)
    repos.create("demo", b"# Demo\n", "admin <a@kbserver.invalid>", "create")
    repo, writer = repos.get("demo")
    root = repo.head()
    assert root is not None
    versions = [
        writer.submit(lambda _t, i=i: CommitPlan({f"{i}.md": b"x"}, "w", "admin <a@kbserver.invalid>"))[0]
        for i in range(3)
    ]
    assert all(repo.on_main(v) for v in [root, *versions])
    for step in (1, 2):  # a small eager step: heads far from the known range start it again, lazily
        repo.main_step = step
        more = [
            writer.submit(
                lambda _t, i=i, step=step: CommitPlan(
                    {f"m{step}{i}.md": b"x"}, "w", "admin <a@kbserver.invalid>"
                )
            )[0]
            for i in range(4)
        ]
        versions += more
        assert repo.on_main(versions[-1]) and all(repo.on_main(v) for v in [root, *versions][::-1])
    repo.main_step = 100
    _git(repos.path("demo"), "update-ref", "refs/heads/main", versions[0])  # by hand, with C git
    assert repo.on_main(versions[0]) and repo.on_main(root)
    assert not any(repo.on_main(v) for v in versions[1:])
    repos.close()
