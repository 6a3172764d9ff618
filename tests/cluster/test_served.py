"""Two nodes on PostgreSQL each index only the KBs they serve (`follow=served`, their default): a KB
written on one node and never searched on either is indexed nowhere; the first search of it on a
node waits for that node's catch-up and sees every write; unused past the idle bound it is no
longer followed, and its next search is correct again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cluster.harness import Node, migrate, node_env
from tests.helpers import ADMIN_TOKEN

pytestmark = pytest.mark.slow

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
IDLE_SECONDS = 3.0


@pytest.fixture
def nodes(tmp_path: Path, postgres_url: str) -> Iterator[list[Node]]:
    data, logs = tmp_path / "data", tmp_path / "logs"
    logs.mkdir()
    extra = {"KBSERVER_FOLLOW_IDLE_SECONDS": str(IDLE_SECONDS)}
    made = [
        Node(
            f"node{n}",
            data,
            logs,
            {**node_env(postgres_url, str(tmp_path / f"cache{n}"), ADMIN_TOKEN, ""), **extra},
        )
        for n in (1, 2)
    ]
    migrate(data, made[0].env)
    try:
        made[0].launch().wait_healthy()
        made[1].launch().wait_healthy()
        yield made
    finally:
        for node in made:
            node.stop()


def _write(node: Node, slug: str, path: str, text: str) -> str:
    body = {"files": [{"path": path, "mode": "create", "content": text}]}
    r = httpx.post(f"{node.url}/api/v1/kbs/{slug}/write", json=body, headers=ADMIN, timeout=60)
    assert r.status_code == 200, r.text
    return str(r.json()["version"])


def _wait(node: Node, slug: str, version: str) -> None:
    params: dict[str, str | float] = {"wait_for": version, "timeout": 30}
    r = httpx.get(f"{node.url}/api/v1/kbs/{slug}/index", params=params, headers=ADMIN, timeout=60)
    assert r.status_code == 200 and r.json()["covered"], r.text


def _search(node: Node, slug: str, q: str) -> tuple[list[str], str]:
    r = httpx.get(
        f"{node.url}/api/v1/kbs/{slug}/search", params={"q": q, "limit": 50}, headers=ADMIN, timeout=60
    )
    assert r.status_code == 200, r.text
    return sorted(h["path"] for h in r.json()["hits"]), str(r.json()["version"])


def _after_heads_so_far(writer: Node, reader: Node) -> None:
    """Once this returns, `reader`'s follower has heard of every head `writer` made before: a write
    to `near` (followed on `reader`) comes through the shared log after them, and is waited for."""
    _wait(reader, "near", _write(writer, "near", f"n{time.monotonic_ns()}.md", "flush\n"))


def test_a_node_indexes_only_what_it_serves_and_a_cold_kb_comes_back_correct(
    nodes: list[Node], tmp_path: Path
) -> None:
    node1, node2 = nodes
    for slug in ("far", "near"):
        r = httpx.post(f"{node1.url}/api/v1/kbs", json={"slug": slug}, headers=ADMIN, timeout=60)
        assert r.status_code == 201, r.text
    _after_heads_so_far(node1, node2)  # near: used on node2, so followed there

    written = [_write(node1, "far", f"f{n}.md", f"falcon {n}\n") for n in range(20)]
    _after_heads_so_far(node1, node2)
    for n in (1, 2):  # written on node1, searched nowhere: indexed nowhere
        assert not (tmp_path / f"cache{n}" / "index" / "far").exists(), n

    paths, version = _search(node2, "far", "falcon")  # the first search waits for the catch-up
    assert paths == sorted(f"f{n}.md" for n in range(20)) and version == written[-1]
    assert not (tmp_path / "cache1" / "index" / "far").exists()

    time.sleep(IDLE_SECONDS * 1.5)  # far unused on node2 past the bound: no longer followed there
    _after_heads_so_far(node1, node2)  # (near is used again: followed)
    later = [_write(node1, "far", f"g{n}.md", f"gannet {n}\n") for n in range(5)]
    _after_heads_so_far(node1, node2)
    r = httpx.get(f"{node2.url}/api/v1/kbs/far/index", headers=ADMIN, timeout=60)
    assert r.status_code == 200 and r.json()["indexed_version"] == written[-1], r.text  # passed over

    paths, version = _search(node2, "far", "gannet")  # used again: caught up before it answers
    assert paths == [f"g{n}.md" for n in range(5)] and version == later[-1]
    assert len(_search(node2, "far", "falcon")[0]) == 20
