"""Benchmark the `semantic` tool set through MCP (the SDK's in-memory client, real services and git).

    python -m bench.semantic [--sizes 100,500] [--repeat 30] [--vector-sizes 1000,10000]

For each size N, a fresh KB gets N memories of one user through `store_memory` (each compared with
every live memory of that user and type for supersede), then the follower is waited for and p50/p95
are measured for: `store_memory` (a new memory among N: one passage embedded on the spot, N cosines,
one version), `search_memories_by_semantics` and `recall_related` (N cosines, retrieval counted in the
control plane), `update_memory_importance` (one version) and `list_due_memories`. Then, for each
of `--vector-sizes`, the vector side alone at sizes too big to embed here: the cosines of a query to
N stored vectors (random unit vectors of a stand-in embedder), as a search computes them. Progress
goes to stderr, the table to stdout; temp folders are removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
from mcp import Client

from kbserver.mcp import Binding, build_server
from kbserver.services import kbs
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.reading import search
from kbserver.vectors import PassageCache, VectorStore, content_digest, similarities
from kbserver.wiring import open_services

_SUBJECTS = ["Ana", "Bob", "Chen", "Dara", "Emil", "Fei", "Gus", "Hana", "Ivo", "Jun"]
_THINGS = ["tea", "the piano", "hiking", "Lisbon", "chess", "sushi", "jazz", "running", "Go", "gardening"]
_CHINESE = ["喜欢喝绿茶", "每周三练钢琴", "住在杭州", "周末去爬山", "对花生过敏"]


def _content(i: int) -> str:
    """Distinct, varied facts (so that none supersedes another)."""
    if i % 5 == 4:
        return f"{_SUBJECTS[i % 10]}{_CHINESE[(i // 5) % 5]}，编号{i}。"
    return f"{_SUBJECTS[i % 10]} talked about {_THINGS[(i // 10) % 10]} on day {i} of the project."


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _timed(repeat: int, call: Callable[[int], Awaitable[Any]]) -> tuple[float, float]:
    took = []
    for i in range(repeat):
        start = time.perf_counter()
        result = await call(i)
        took.append((time.perf_counter() - start) * 1000)
        assert not result.is_error, result.content
    return statistics.median(took), _pct(took, 0.95)


async def _run(size: int, repeat: int, folder: Path) -> list[tuple[str, int, float, float]]:
    services = open_services(folder / "data")
    services.start()
    try:
        kbs.create(services, ADMIN, "bench", "semantic benchmark")
        agents.create(services, ADMIN, "agent", tools=["semantic"])
        agents.link(services, ADMIN, "agent", "bench", "read_write")
        server = build_server(Binding(services, lambda: caller_for(services, "agent")))
        async with Client(server) as c:
            ids = []
            for i in range(size):
                out = await c.call_tool(
                    "store_memory",
                    {"content": _content(i), "remind_at": "2026-12-01T09:00:00Z"}
                    if i % 20 == 0
                    else {"content": _content(i)},
                )
                assert not out.is_error, out.content
                ids.append(out.structured_content["id"])  # type: ignore[index]
                if i % 100 == 99:
                    print(f"  stored {i + 1}/{size}", file=sys.stderr)
            head = services.repos.repo("bench").head()
            assert head is not None
            for _ in range(10):  # the follower's vectors (each wait at most a minute)
                if await search.wait_for(services, ADMIN, "bench", head, 60.0):
                    break
            rows = []

            def row(name: str, timing: tuple[float, float]) -> None:
                rows.append((name, size, *timing))

            queries = ["who likes music", "谁对花生过敏", "what did Chen talk about", "mountain walks"]
            row(
                "search_memories_by_semantics",
                await _timed(
                    repeat,
                    lambda i: c.call_tool(
                        "search_memories_by_semantics", {"query": queries[i % len(queries)]}
                    ),
                ),
            )
            row(
                "recall_related",
                await _timed(
                    repeat, lambda i: c.call_tool("recall_related", {"query": queries[i % len(queries)]})
                ),
            )
            row(
                "list_due_memories",
                await _timed(
                    repeat, lambda i: c.call_tool("list_due_memories", {"before": "2027-01-01T00:00:00Z"})
                ),
            )
            row(
                "update_memory_importance (one version)",
                await _timed(
                    repeat,
                    lambda i: c.call_tool(
                        "update_memory_importance", {"id": ids[i], "importance": 0.5 + (i % 2) / 4}
                    ),
                ),
            )
            row(
                "store_memory (embed + N cosines + one version)",
                await _timed(repeat, lambda i: c.call_tool("store_memory", {"content": _content(size + i)})),
            )
        return rows
    finally:
        services.close()


class _Random:
    """A stand-in embedder: a fixed random unit vector per text (no model, so 10^4 texts are cheap)."""

    name = "random-bench"
    dim = 384

    def passages(self, texts: Any) -> Any:
        out = np.stack([self.query(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)
        return out.astype(np.float32)

    def query(self, text: str) -> Any:
        rng = np.random.default_rng(abs(hash(text)) % (1 << 32))
        vector = rng.standard_normal(self.dim).astype(np.float32)
        return vector / np.linalg.norm(vector)


def _vector_side(size: int, repeat: int, folder: Path) -> tuple[str, int, float, float]:
    embedder = _Random()
    store = VectorStore(folder / "vectors", embedder)
    try:
        texts = {f"memories/{i:016x}.md": _content(i) for i in range(size)}
        store.update("1" * 40, texts, [])
        contents = list(texts.values())
        took = []
        for i in range(repeat):
            start = time.perf_counter()
            known = store.known([content_digest(c) for c in contents])
            similarities(
                embedder, PassageCache(), f"query {i}", contents, as_query=True, known=known, embed_limit=0
            )
            took.append((time.perf_counter() - start) * 1000)
        return (
            "cosines of a query to N memories (vectors only)",
            size,
            statistics.median(took),
            _pct(took, 0.95),
        )
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,500")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--vector-sizes", default="1000,10000")
    args = parser.parse_args()
    rows = []
    for size in (int(s) for s in args.sizes.split(",") if s):
        print(f"size {size}", file=sys.stderr)
        with tempfile.TemporaryDirectory() as folder:
            rows += asyncio.run(_run(size, args.repeat, Path(folder)))
    for size in (int(s) for s in args.vector_sizes.split(",") if s):
        with tempfile.TemporaryDirectory() as folder:
            rows.append(_vector_side(size, args.repeat, Path(folder)))
    print("| tool | memories | p50 ms | p95 ms |\n| --- | --- | --- | --- |")
    for name, size, p50, p95 in rows:
        print(f"| {name} | {size} | {p50:.1f} | {p95:.1f} |")


if __name__ == "__main__":
    main()
