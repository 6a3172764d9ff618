"""Two nodes on one data folder and one PostgreSQL; node A reaches it through a fault-injecting proxy.

The proxy stops forwarding while every socket stays open (packets dropped, nothing reset): node A's
requests that need the control store answer 503 with Retry-After, and its /healthz 503, within the
contract's 10 s; node B's writes go on; once the proxy forwards again, node A answers again by
itself. The same with PostgreSQL stopped and started. Nothing acknowledged is lost, `git fsck
--strict` is clean. Timing is asserted only against the contract's bound, with a 2x margin
(BOUND_SECONDS) for a busy 2-core machine.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.cluster.harness import Node, migrate, node_env, writer_agent
from tests.faultproxy import FaultProxy
from tests.helpers import ADMIN_TOKEN, git_fsck
from tests.pg import PostgresServer

pytestmark = pytest.mark.slow

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
KB = "team"
CONTRACT_SECONDS = 10.0  # a request on a node cut off from PostgreSQL answers 503 this soon
BOUND_SECONDS = 2 * CONTRACT_SECONDS  # what the tests assert: the contract with a margin for CI
RECOVER_SECONDS = 90.0  # how long a node may take to answer again once PostgreSQL is back


@dataclass
class Pair:
    a: Node  # through the proxy
    b: Node  # straight to PostgreSQL
    proxy: FaultProxy
    data: Path


def _through(url: str, port: int) -> str:
    """`url` with another port (the proxy's)."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    return url.replace(f":{info['port']}/", f":{port}/")


@pytest.fixture
def pair(tmp_path: Path, postgres_url: str) -> Iterator[Pair]:
    info = psycopg.conninfo.conninfo_to_dict(postgres_url)
    proxy = FaultProxy("127.0.0.1", int(str(info["port"])))
    data, logs = tmp_path / "data", tmp_path / "logs"
    logs.mkdir()
    a = Node(
        "a",
        data,
        logs,
        node_env(_through(postgres_url, proxy.port), str(tmp_path / "ca"), ADMIN_TOKEN, "127.0.0.1"),
    )
    b = Node("b", data, logs, node_env(postgres_url, str(tmp_path / "cb"), ADMIN_TOKEN, "127.0.0.1"))
    migrate(data, b.env)
    try:
        b.launch().wait_healthy()
        a.launch().wait_healthy()
        yield Pair(a, b, proxy, data)
    finally:
        proxy.release()
        for node in (a, b):
            node.stop()
        proxy.close()


def _write(url: str, auth: dict[str, str], path: str, timeout: float = 60) -> httpx.Response:
    body = {"files": [{"path": path, "mode": "create", "content": f"content of {path}\n"}]}
    with httpx.Client(base_url=url, timeout=timeout) as http:
        return http.post(f"/api/v1/kbs/{KB}/write", json=body, headers=auth)


def _timed(call: object) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    r = call()  # type: ignore[operator]
    return r, time.monotonic() - started


def _healthz(url: str) -> int:
    try:
        return httpx.get(f"{url}/healthz", timeout=BOUND_SECONDS).status_code
    except httpx.TransportError:
        return 0


def _until(url: str, status: int, seconds: float) -> float:
    """Poll /healthz until it answers `status` (bounded); returns how long it took."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if _healthz(url) == status:
            return time.monotonic() - started
        time.sleep(0.25)
    raise AssertionError(f"{url}/healthz did not answer {status} within {seconds:g} s")


def _assert_unavailable(r: httpx.Response, took: float) -> None:
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] in ("unavailable", "busy"), r.text
    assert int(r.headers["Retry-After"]) >= 1
    assert took < BOUND_SECONDS, f"503 after {took:.1f} s (contract: {CONTRACT_SECONDS:g} s)"


def _on_main(data: Path, acked: list[str]) -> None:
    repo = data / "kbs" / f"{KB}.git"
    for path in acked:
        shown = subprocess.run(["git", "show", f"main:{path}"], cwd=repo, capture_output=True, text=True)
        assert shown.stdout == f"content of {path}\n", path
    git_fsck(repo)


def test_a_silent_network_is_bounded_and_heals_by_itself(pair: Pair) -> None:
    auth = writer_agent(pair.b.url, KB, ADMIN_TOKEN)
    acked = []
    for node in (pair.a, pair.b):
        r = _write(node.url, auth, f"before-{node.name}.md")
        assert r.status_code == 200, r.text
        acked.append(f"before-{node.name}.md")

    pair.proxy.hold()
    # many requests at once on the cut-off node: more than its pool; every one answers in the bound
    answers: list[tuple[httpx.Response, float]] = []
    calls = [lambda n=n: _write(pair.a.url, auth, f"cut-{n}.md") for n in range(12)]
    threads = [threading.Thread(target=lambda c=c: answers.append(_timed(c))) for c in calls]
    for t in threads:
        t.start()
    # meanwhile the healthy node keeps writing
    for n in range(10):
        r, took = _timed(lambda n=n: _write(pair.b.url, auth, f"during-{n}.md"))
        assert r.status_code == 200, r.text
        assert took < BOUND_SECONDS, f"node B's write took {took:.1f} s while node A was cut off"
        acked.append(f"during-{n}.md")
    for t in threads:
        t.join(timeout=120)
    assert len(answers) == 12
    for r, took in answers:
        _assert_unavailable(r, took)
    _assert_unavailable(*_timed(lambda: httpx.get(f"{pair.a.url}/api/v1/agents", headers=ADMIN, timeout=60)))
    assert _until(pair.a.url, 503, BOUND_SECONDS) < BOUND_SECONDS

    pair.proxy.release()
    _until(pair.a.url, 200, RECOVER_SECONDS)
    r = _write(pair.a.url, auth, "after-a.md")
    assert r.status_code == 200, r.text
    acked.append("after-a.md")
    with httpx.Client(base_url=pair.a.url, timeout=60) as http:  # node A indexes node B's writes again
        head = subprocess.run(
            ["git", "rev-parse", "main"], cwd=pair.data / "kbs" / f"{KB}.git", capture_output=True, text=True
        ).stdout.strip()
        r = http.get(f"/api/v1/kbs/{KB}/index", params={"wait_for": head, "timeout": 30}, headers=ADMIN)
        assert r.status_code == 200 and r.json()["indexed_version"] == head, r.text
        hits = http.get(f"/api/v1/kbs/{KB}/search", params={"q": "during"}, headers=ADMIN).json()["hits"]
        assert {h["path"] for h in hits} >= {f"during-{n}.md" for n in range(10)}
    _on_main(pair.data, acked)


def test_postgres_stopped_and_started_is_bounded_and_heals(
    tmp_path: Path, own_postgres: PostgresServer
) -> None:
    data, logs = tmp_path / "data", tmp_path / "logs"
    logs.mkdir()
    url = own_postgres.database()
    node = Node("n", data, logs, node_env(url, str(tmp_path / "cn"), ADMIN_TOKEN, "127.0.0.1"))
    migrate(data, node.env)
    try:
        node.launch().wait_healthy()
        auth = writer_agent(node.url, KB, ADMIN_TOKEN)
        assert _write(node.url, auth, "before.md").status_code == 200
        own_postgres.pause()
        _assert_unavailable(*_timed(lambda: _write(node.url, auth, "down.md")))
        assert _until(node.url, 503, BOUND_SECONDS) < BOUND_SECONDS
        own_postgres.resume()
        _until(node.url, 200, RECOVER_SECONDS)
        r = _write(node.url, auth, "after.md")
        assert r.status_code == 200, r.text
        _on_main(data, ["before.md", "after.md"])
    finally:
        node.stop()
