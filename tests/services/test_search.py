"""Search follows main: writes, deletes, reverts, other processes; rebuilt when the index is lost."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from kbserver.changes import sha256_hex
from kbserver.core.errors import Forbidden, InvalidRequest, NotFound
from kbserver.core.model import Create, WriteRequest
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.reading import search
from kbserver.services.writing import writes
from kbserver.wiring import open_services
from tests.helpers import make_agent


def put(client: TestClient, kb: str, headers: dict[str, str], *files: dict[str, object]) -> str:
    r = client.post(f"/api/v1/kbs/{kb}/write", json={"files": list(files)}, headers=headers)
    assert r.status_code == 200, r.text
    version = str(r.json()["version"])
    w = client.get(f"/api/v1/kbs/{kb}/index", params={"wait_for": version, "timeout": 30}, headers=headers)
    assert w.status_code == 200 and w.json()["covered"] is True, w.text
    return version


def hits(client: TestClient, kb: str, headers: dict[str, str], q: str, **params: object) -> list[str]:
    r = client.get(f"/api/v1/kbs/{kb}/search", params={"q": q, **params}, headers=headers)
    assert r.status_code == 200, r.text
    return [h["path"] for h in r.json()["hits"]]


def test_search_follows_writes_deletes_and_reverts(
    client: TestClient, kb: str, agent: dict[str, str]
) -> None:
    v1 = put(
        client,
        kb,
        agent,
        {"path": "prefs/coffee.md", "mode": "create", "content": "用户喜欢喝美式咖啡，不加糖。"},
        {"path": "git.md", "mode": "create", "content": "团队约定：使用中文编写 Git 提交信息。"},
        {"path": "deploy.md", "mode": "create", "content": "Deploying requires two approvals.\n"},
    )
    assert hits(client, kb, agent, "咖啡") == ["prefs/coffee.md"]
    assert hits(client, kb, agent, "提交信息") == ["git.md"]
    assert hits(client, kb, agent, "deploy") == ["deploy.md"]  # stemming: deploying ~ deploy
    r = client.get(f"/api/v1/kbs/{kb}/search", params={"q": "咖啡"}, headers=agent).json()
    assert r["version"] == v1 and r["total"] == 1 and "咖啡" in r["hits"][0]["snippet"]
    [(start, end), *_] = r["hits"][0]["highlights"]
    assert "咖啡" in r["hits"][0]["snippet"][start:end]
    put(client, kb, agent, {"path": "prefs/coffee.md", "mode": "delete"})
    assert hits(client, kb, agent, "咖啡") == []
    r = client.post(f"/api/v1/kbs/{kb}/revert", json={"version": v1}, headers=agent)
    version = r.json()["version"]
    client.get(f"/api/v1/kbs/{kb}/index", params={"wait_for": version, "timeout": 30}, headers=agent)
    assert hits(client, kb, agent, "咖啡") == ["prefs/coffee.md"]


def test_pagination_prefix_and_errors(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    files = [
        {"path": f"{'a' if i % 2 else 'b'}/n{i}.md", "mode": "create", "content": f"kiwi note {i}\n"}
        for i in range(12)
    ]
    put(client, kb, agent, *files)
    first = client.get(f"/api/v1/kbs/{kb}/search", params={"q": "kiwi", "limit": 5}, headers=agent).json()
    second = client.get(
        f"/api/v1/kbs/{kb}/search", params={"q": "kiwi", "limit": 5, "offset": 5}, headers=agent
    ).json()
    assert first["total"] == second["total"] == 12
    assert not {h["path"] for h in first["hits"]} & {h["path"] for h in second["hits"]}
    assert set(hits(client, kb, agent, "kiwi", prefix="a/", limit=20)) == {
        f"a/n{i}.md" for i in range(1, 12, 2)
    }
    for params in (
        {"q": ""},
        {},
        {"q": "x", "limit": 0},
        {"q": "x", "offset": -1},
        {"q": "x", "limit": "many"},
    ):
        r = client.get(f"/api/v1/kbs/{kb}/search", params=params, headers=agent)
        assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request"), params
    outsider = make_agent(services, "outsider", {})
    r = client.get(f"/api/v1/kbs/{kb}/search", params={"q": "kiwi"}, headers=outsider)
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
    for q in ('"', "(", "AND", "path:", "*", "咖", "a" * 500):
        assert client.get(f"/api/v1/kbs/{kb}/search", params={"q": q}, headers=agent).status_code == 200


def test_concurrent_writes_leave_index_equal_to_main(services: Services, kb: str) -> None:
    def work(n: int) -> None:
        for i in range(8):
            req = WriteRequest(
                files=[Create(path=f"w{n}/{i}.md", mode="create", content=f"writer {n} item {i}")]
            )
            writes.submit(services, ADMIN, kb, req)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    repo = services.repos.repo(kb)
    head = repo.head()
    assert head is not None and services.progress.wait_blocking(kb, head, 60)
    expected = {p: sha256_hex(repo.view(head).read(p) or b"") for p, _ in repo.view(head).walk()}
    assert services.search_index.paths(kb) == expected


def test_commit_from_another_process_is_indexed(services: Services, kb: str, tmp_path: Path) -> None:
    script = (
        "import sys; from pathlib import Path\n"
        "from kbserver.services.writing import writes\n"
        "from kbserver.wiring import open_services\n"
        "from kbserver.services.access.auth import ADMIN\n"
        "from kbserver.core.model import WriteRequest, Create\n"
        "s = open_services(Path(sys.argv[1]))\n"
        "r = writes.submit(s, ADMIN, 'notes', WriteRequest(files=[Create(path='other.md', mode='create', "
        "content='written by a separate process about pelicans')]))\n"
        "print(r.version); s.close()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(services.data)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    version = out.stdout.strip().splitlines()[-1]
    assert services.progress.wait_blocking(kb, version, 60)  # from the feed: no notify from there
    result = services.search_index.search(kb, "pelicans")
    assert [h.path for h in result.hits] == ["other.md"]


def test_lost_index_is_rebuilt_at_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = open_services(data)
    kbs.create(first, ADMIN, "kb")
    v = writes.submit(
        first, ADMIN, "kb", WriteRequest(files=[Create(path="a.md", mode="create", content="zebra crossing")])
    ).version
    first.start()
    assert first.progress.wait_blocking("kb", v, 60)
    first.close()
    shutil.rmtree(data / "index")
    again = open_services(data)
    again.start()
    try:
        assert again.progress.wait_blocking("kb", v, 60)
        assert [h.path for h in again.search_index.search("kb", "zebra").hits] == ["a.md"]
    finally:
        again.close()
    (data / "index" / "kb").mkdir(parents=True, exist_ok=True)
    for f in (data / "index" / "kb").rglob("*"):
        if f.is_file():
            f.write_bytes(b"garbage")
    third = open_services(data)
    third.start()
    try:
        assert third.progress.wait_blocking("kb", v, 60)
        assert [h.path for h in third.search_index.search("kb", "zebra").hits] == ["a.md"]
    finally:
        third.close()


def test_only_the_admin_rebuilds_an_index_and_a_wait_names_a_version_on_main(
    services: Services, kb: str
) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    bob = caller_for(services, "bob")
    with pytest.raises(Forbidden):
        search.reindex(services, bob, kb)
    head = services.repos.repo(kb).head()
    assert search.reindex(services, ADMIN, kb) == head
    assert search.status(services, bob, kb, wait_for=head, timeout=30).covered is True
    with pytest.raises(NotFound):
        search.status(services, bob, kb, wait_for="0" * 40, timeout=30)  # not on main: at once
    with pytest.raises(InvalidRequest):
        search.status(services, bob, kb, wait_for="not-a-version")
    with pytest.raises(InvalidRequest):
        search.status(services, bob, kb, wait_for=head, timeout=61)
