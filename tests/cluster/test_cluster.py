"""Three nodes, one data folder, PostgreSQL, HAProxy in front; one node SIGKILLed mid-run.

16 writers (HTTP agents, MCP agents through the official client in its default sessionless mode,
and ask-before-write agents whose proposals an admin approves) write through the balancer while
node2 is killed and restarted. Then: every acknowledged write is on main and `git fsck --strict` is
clean, no proposal is applied twice, every node's search finds every acknowledged write within
INDEX_BOUND_SECONDS of the last write, a token deleted on one node is refused by all, and an older
MCP client with a session works through the balancer's stickiness rule (deploy/haproxy.cfg).
"""

from __future__ import annotations

import asyncio
import random
import string
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster.harness import Balancer, Node, migrate, node_env
from tests.helpers import ADMIN_TOKEN, git_fsck
from tests.mcp.clients import http_client

pytestmark = pytest.mark.slow

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
KB = "team"
HTTP_WRITERS, MCP_WRITERS, ASKERS = 10, 4, 2  # 16 writers
WRITES_EACH = 5
DEADLINE_SECONDS = 120.0  # a writer retries an unanswered write until then
INDEX_BOUND_SECONDS = 30.0  # every node's search finds every acknowledged write this soon after the last
RETRY = (502, 503, 504)  # the balancer found no node, or a node is busy or going away


@dataclass
class Ledger:
    """What the writers were told: acknowledged writes (path -> content) and the failures they saw."""

    acked: dict[str, str] = field(default_factory=dict)
    proposals: list[str] = field(default_factory=list)
    failed_requests: int = 0
    problems: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ack(self, path: str, content: str) -> None:
        with self.lock:
            self.acked[path] = content

    def failed(self) -> None:
        with self.lock:
            self.failed_requests += 1

    def problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)


@dataclass
class Cluster:
    nodes: list[Node]
    balancer: Balancer
    data: Path


@pytest.fixture
def cluster(tmp_path: Path, postgres_url: str) -> Iterator[Cluster]:
    data = tmp_path / "data"  # the shared folder of repositories
    logs = tmp_path / "logs"
    logs.mkdir()
    ports = [_port() for _ in range(3)]
    balancer_port = _port()
    host = f"127.0.0.1:{balancer_port}"
    nodes = [
        Node(
            f"node{n}",
            data,
            logs,
            node_env(postgres_url, str(tmp_path / f"cache{n}"), ADMIN_TOKEN, host),
            port,
        )
        for n, port in enumerate(ports, 1)
    ]
    balancer = Balancer(logs, nodes, balancer_port)
    migrate(data, nodes[0].env)  # as deploy/compose.yaml does before its nodes start
    try:
        nodes[0].launch().wait_healthy()  # the first start makes the data folder
        for node in nodes[1:]:
            node.launch()
        for node in nodes[1:]:
            node.wait_healthy()
        balancer.start()
        yield Cluster(nodes, balancer, data)
    finally:
        balancer.stop()
        for node in nodes:
            node.stop()


def _port() -> int:
    from tests.helpers import free_port

    return free_port()


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(12))


def _create_agent(http: httpx.Client, name: str, permission: str) -> dict[str, str]:
    r = http.post("/api/v1/agents", json={"name": name}, headers=ADMIN)
    assert r.status_code == 201, r.text
    token = r.json()["token"]
    r = http.post(f"/api/v1/agents/{name}/links", json={"kb": KB, "permission": permission}, headers=ADMIN)
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {token}"}


def _settle(http: httpx.Client, ledger: Ledger, path: str, content: str) -> bool:
    """After `already_exists`: the write landed in an attempt whose answer was lost, if main has it."""
    r = http.get(f"/api/v1/kbs/{KB}/files/{path}", headers=ADMIN)
    if r.status_code == 200 and r.json().get("content") == content:
        ledger.ack(path, content)
        return True
    ledger.problem(f"{path}: already_exists but main holds {r.status_code} {r.text[:200]}")
    return True


def _write(
    http: httpx.Client, body: dict[str, Any], auth: dict[str, str], ledger: Ledger, deadline: float
) -> httpx.Response | None:
    """POST a write until the answer is no transport error and no RETRY status; None at `deadline`."""
    while time.monotonic() < deadline:
        try:
            r = http.post(f"/api/v1/kbs/{KB}/write", json=body, headers=auth)
        except httpx.TransportError:
            ledger.failed()
            time.sleep(0.2)
            continue
        if r.status_code not in RETRY:
            return r
        ledger.failed()
        time.sleep(0.2)
    return None


def _http_writer(url: str, auth: dict[str, str], name: str, ledger: Ledger, seed: int) -> None:
    rng = random.Random(seed)
    deadline = time.monotonic() + DEADLINE_SECONDS
    with httpx.Client(base_url=url, timeout=60) as http:
        for i in range(WRITES_EACH):
            path, content = f"w/{name}/{i}.md", f"{_word(rng)} from {name}\n"
            body = {"files": [{"path": path, "mode": "create", "content": content}]}
            r = _write(http, body, auth, ledger, deadline)
            if r is None:
                ledger.problem(f"{name}: {path} unanswered after {DEADLINE_SECONDS:g} s")
            elif r.status_code == 200:
                ledger.ack(path, content)
            elif r.status_code == 409 and r.json()["error"]["code"] == "already_exists":
                _settle(http, ledger, path, content)
            else:
                ledger.problem(f"{name}: {r.status_code} {r.text[:300]}")


def _asker(url: str, auth: dict[str, str], name: str, ledger: Ledger, seed: int) -> None:
    """A read_write_ask agent: each write becomes a proposal an admin approves."""
    rng = random.Random(seed)
    deadline = time.monotonic() + DEADLINE_SECONDS
    with httpx.Client(base_url=url, timeout=60) as http:
        run = None
        while run is None and time.monotonic() < deadline:
            try:
                r = http.post("/api/v1/runs", json={"interactive": True}, headers=auth)
                run = r.json()["id"] if r.status_code == 201 else None
            except httpx.TransportError:
                ledger.failed()
            if run is None:
                time.sleep(0.2)
        for i in range(WRITES_EACH):
            path, content = f"p/{name}/{i}.md", f"{_word(rng)} proposed by {name}\n"
            body = {"files": [{"path": path, "mode": "create", "content": content}], "run_id": run}
            # keyed, as a client that retries must be: an ask whose answer died with its node would
            # otherwise leave a second proposal, stale once the first is approved
            keyed = {**auth, "Idempotency-Key": f"{name}-{i}"}
            r = _write(http, body, keyed, ledger, deadline)
            if r is not None and r.status_code == 202:
                with ledger.lock:
                    ledger.proposals.append(r.json()["proposal"]["id"])
            elif r is not None:
                ledger.problem(f"{name}: {r.status_code} {r.text[:300]}")


def _approver(url: str, ledger: Ledger, done: threading.Event) -> None:
    """The admin: approves every pending proposal through the balancer until the askers are done.

    A proposal whose approval is refused for its content (it stays pending, stale) is a problem, and
    is not tried again: waiting for it to leave the pending list would never end."""
    refused: set[str] = set()
    with httpx.Client(base_url=url, timeout=60) as http:
        while True:
            finished = done.is_set()
            try:
                r = http.get(f"/api/v1/kbs/{KB}/proposals", params={"status": "pending"}, headers=ADMIN)
                listed = [p["id"] for p in r.json()["proposals"]] if r.status_code == 200 else []
                pending = [pid for pid in listed if pid not in refused]
                for pid in pending:
                    a = http.post(f"/api/v1/kbs/{KB}/proposals/{pid}/approve", headers=ADMIN)
                    if a.status_code in RETRY:
                        ledger.failed()
                    elif a.status_code == 409 and a.json()["error"]["code"] == "not_pending":
                        pass  # decided meanwhile, or being approved through another node
                    elif a.status_code != 200:
                        refused.add(pid)
                        ledger.problem(f"approve {pid}: {a.status_code} {a.text[:300]}")
            except httpx.TransportError:
                ledger.failed()
                time.sleep(0.2)
                continue
            if finished and not pending:
                return
            time.sleep(0.1)


def _mcp_writer(url: str, auth: dict[str, str], name: str, ledger: Ledger, seed: int) -> None:
    asyncio.run(_mcp_writes(url, auth, name, ledger, seed))


async def _mcp_writes(url: str, auth: dict[str, str], name: str, ledger: Ledger, seed: int) -> None:
    rng = random.Random(seed)
    deadline = time.monotonic() + DEADLINE_SECONDS
    for i in range(WRITES_EACH):
        path, content = f"m/{name}/{i}.md", f"{_word(rng)} from {name}\n"
        args = {"kb": KB, "files": [{"path": path, "mode": "create", "content": content}]}
        while time.monotonic() < deadline:
            try:
                async with http_client(url, auth) as client:  # default: sessionless, any node
                    result = await client.call_tool("write_context", args)
            except Exception:  # the node died under the call: the SDK raises its own errors
                ledger.failed()
                await asyncio.sleep(0.2)
                continue
            if not result.is_error:
                ledger.ack(path, content)
                break
            code = _code(result.structured_content)
            if code == "already_exists":
                with httpx.Client(base_url=url, timeout=60) as http:
                    _settle(http, ledger, path, content)
                break
            if code in ("busy", "unavailable"):
                ledger.failed()
                await asyncio.sleep(0.2)
                continue
            ledger.problem(f"{name}: {result.content}")
            break


def _code(content: Any) -> str | None:
    return content.get("error", {}).get("code") if isinstance(content, dict) else None


def _on_main(repo: Path, paths: list[str]) -> dict[str, str]:
    """The content of each of `paths` on main, read by C git in one process."""
    out = subprocess.run(
        ["git", "cat-file", "--batch"],
        input="".join(f"main:{p}\n" for p in paths).encode(),
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    found, pos = {}, 0
    for path in paths:
        header_end = out.index(b"\n", pos)
        header = out[pos:header_end].split()
        if header[-1] == b"missing":
            pos = header_end + 1
            continue
        size = int(header[2])
        found[path] = out[header_end + 1 : header_end + 1 + size].decode()
        pos = header_end + 1 + size + 1
    return found


def _trailers(repo: Path, key: str) -> list[str]:
    out = subprocess.run(
        ["git", "log", "--first-parent", f"--format=%(trailers:key={key},valueonly)", "main"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def test_three_nodes_lose_no_acknowledged_write_when_one_dies(cluster: Cluster) -> None:
    lb = cluster.balancer.url
    with httpx.Client(base_url=lb, timeout=60) as http:
        assert http.post("/api/v1/kbs", json={"slug": KB}, headers=ADMIN).status_code == 201
        writers = [_create_agent(http, f"h{n}", "read_write") for n in range(HTTP_WRITERS)]
        mcps = [_create_agent(http, f"m{n}", "read_write") for n in range(MCP_WRITERS)]
        askers = [_create_agent(http, f"a{n}", "read_write_ask") for n in range(ASKERS)]
    ledger = Ledger()
    threads = [
        threading.Thread(target=_http_writer, args=(lb, auth, f"h{n}", ledger, n), daemon=True)
        for n, auth in enumerate(writers)
    ]
    threads += [
        threading.Thread(target=_mcp_writer, args=(lb, auth, f"m{n}", ledger, 100 + n), daemon=True)
        for n, auth in enumerate(mcps)
    ]
    asking = [
        threading.Thread(target=_asker, args=(lb, auth, f"a{n}", ledger, 200 + n), daemon=True)
        for n, auth in enumerate(askers)
    ]
    askers_done = threading.Event()
    # daemons: a failed assert below must end the test run, not leave pytest waiting for them at exit
    approver = threading.Thread(target=_approver, args=(lb, ledger, askers_done), daemon=True)
    for t in [*threads, *asking, approver]:
        t.start()

    total = (HTTP_WRITERS + MCP_WRITERS) * WRITES_EACH
    deadline = time.monotonic() + DEADLINE_SECONDS
    while len(ledger.acked) < total // 3:  # a third of the writes in: kill a node mid-run
        assert time.monotonic() < deadline, f"only {len(ledger.acked)} writes acknowledged: {ledger.problems}"
        time.sleep(0.05)
    victim = cluster.nodes[1]
    victim.kill()
    assert len(ledger.acked) < total  # mid-run: writes were still coming
    time.sleep(1.0)
    victim.launch().wait_healthy()
    for t in [*threads, *asking]:
        t.join(timeout=DEADLINE_SECONDS + 60)
        assert not t.is_alive()
    askers_done.set()
    approver.join(timeout=DEADLINE_SECONDS)
    assert not approver.is_alive()
    assert ledger.problems == []
    assert len(ledger.acked) == total  # every write was acknowledged in the end (retries)

    # every acknowledged write is on main, the repository is sound
    repo = cluster.data / "kbs" / f"{KB}.git"
    on_main = _on_main(repo, sorted(ledger.acked))
    assert {p: on_main.get(p) for p in ledger.acked} == ledger.acked
    git_fsck(repo)

    # no proposal applied twice; every approved one is on main
    with httpx.Client(base_url=lb, timeout=60) as http:
        r = http.get(f"/api/v1/kbs/{KB}/proposals", params={"status": "approved"}, headers=ADMIN)
    approved = {p["id"] for p in r.json()["proposals"]}
    landed = _trailers(repo, "Kb-Proposal")
    assert len(landed) == len(set(landed)) and approved <= set(landed) and approved

    # every node's own search finds every acknowledged write, within the bound
    head = subprocess.run(
        ["git", "rev-parse", "main"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    for node in cluster.nodes:
        with httpx.Client(base_url=node.url, timeout=INDEX_BOUND_SECONDS + 30) as http:
            r = http.get(
                f"/api/v1/kbs/{KB}/index",
                params={"wait_for": head, "timeout": INDEX_BOUND_SECONDS},
                headers=ADMIN,
            )
            assert r.status_code == 200 and r.json()["indexed_version"] == head, (node.name, r.text)
            for path, content in ledger.acked.items():
                word = content.split()[0]
                hits = http.get(f"/api/v1/kbs/{KB}/search", params={"q": word}, headers=ADMIN).json()["hits"]
                assert [h["path"] for h in hits] == [path], (node.name, word)

    for n in (1, 2, 3):  # each node searched its own index, in its own cache folder
        assert any((cluster.data.parent / f"cache{n}").rglob("*.seg")), n
    assert not (cluster.data / "index").exists()

    # a token deleted on one node is refused by every node at its next request
    first, last = cluster.nodes[0], cluster.nodes[2]
    with httpx.Client(base_url=first.url, timeout=60) as http:
        temp = _create_agent(http, "temp", "read")
    for node in cluster.nodes:
        assert httpx.get(f"{node.url}/api/v1/kbs/{KB}", headers=temp, timeout=60).status_code == 200
    assert httpx.delete(f"{last.url}/api/v1/agents/temp", headers=ADMIN, timeout=60).status_code == 200
    for node in cluster.nodes:
        assert httpx.get(f"{node.url}/api/v1/kbs/{KB}", headers=temp, timeout=60).status_code == 401, (
            node.name
        )


def test_an_mcp_client_with_a_session_sticks_to_its_node(cluster: Cluster) -> None:
    """Older clients keep an Mcp-Session-Id; the balancer's stick table sends them to its node."""
    with httpx.Client(base_url=cluster.balancer.url, timeout=60) as http:
        assert http.post("/api/v1/kbs", json={"slug": KB}, headers=ADMIN).status_code == 201
        auth = _create_agent(http, "legacy", "read_write")

    async def calls() -> list[bool]:
        outcomes = []
        async with http_client(cluster.balancer.url, auth, mode="legacy") as client:
            for n in range(6):  # round robin would spread these over all three nodes
                args = {"kb": KB, "files": [{"path": f"l/{n}.md", "mode": "create", "content": f"n{n}\n"}]}
                outcomes.append(not (await client.call_tool("write_context", args)).is_error)
                outcomes.append(not (await client.call_tool("list_context_files", {"kb": KB})).is_error)
        return outcomes

    assert asyncio.run(calls()) == [True] * 12


def test_the_balancer_sends_each_kbs_requests_to_one_node(cluster: Cluster) -> None:
    """KB affinity: /api/v1/kbs/<slug>/... hashes to one node (its writes share a group commit); with
    that node gone, another serves the KB (the hash moves only the lost node's KBs)."""
    slugs = [f"aff{n}" for n in range(6)]
    with httpx.Client(base_url=cluster.balancer.url, timeout=60) as http:
        for slug in slugs:
            assert http.post("/api/v1/kbs", json={"slug": slug}, headers=ADMIN).status_code == 201
        for slug in slugs:  # a KB's writes one after another: round robin would spread each over nodes
            for n in range(4):
                body = {"files": [{"path": f"f{n}.md", "mode": "create", "content": f"{slug} {n}\n"}]}
                assert http.post(f"/api/v1/kbs/{slug}/write", json=body, headers=ADMIN).status_code == 200

    def served(slug: str) -> dict[str, int]:
        line = f"/api/v1/kbs/{slug}/write"
        counts = {node.name: node.log.read_text(errors="replace").count(line) for node in cluster.nodes}
        return {name: count for name, count in counts.items() if count}

    homes = {slug: served(slug) for slug in slugs}
    assert all(len(home) == 1 for home in homes.values()), homes  # each KB logged by one node only
    assert len({next(iter(home)) for home in homes.values()}) > 1, homes  # KBs spread over nodes

    slug = slugs[0]
    home = next(node for node in cluster.nodes if node.name in homes[slug])
    home.kill()
    body = {"files": [{"path": "after.md", "mode": "create", "content": "after the node died\n"}]}
    deadline = time.monotonic() + 60
    with httpx.Client(base_url=cluster.balancer.url, timeout=60) as http:
        while True:  # until the balancer's health checks take the dead node out (about 2 s)
            status = http.post(f"/api/v1/kbs/{slug}/write", json=body, headers=ADMIN).status_code
            if status == 200:
                break
            assert status in (502, 503) and time.monotonic() < deadline, status
            time.sleep(0.2)
