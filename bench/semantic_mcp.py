"""Latency of the `semantic` tool set through MCP over Streamable HTTP, at 200 and 10,000 memories.

    python -m bench.semantic_mcp [--sizes 200,10000] [--calls 50] [--follower embedded,worker]
                                 [--vectors-cache DIR]

The same corpus and live server as bench/memory_mcp.py (the recall set's memories, then generated
facts, imported as one folder), written as `semantic` memories of one user (`memory_type: fact`,
`user_id: default`, no agent: seen by every agent of the KB); the follower embeds every memory before
measuring. Then, sequentially from one SDK client: no-op calls (the baseline),
`search_memories_by_semantics` and `recall_related` with the recall set's questions (each compares
the query with every live memory of the user and counts the retrieval in the control plane),
`list_due_memories`, and `store_memory` (the new content is embedded on the spot, since supersede
must be decided in the same version, and compared with every live memory of its type and user).
Prints p50/p95 per tool.

`--vectors-cache DIR` is shared with bench/memory_mcp.py: the contents are the same, so one cache
serves both (vectors are keyed by the content's sha256).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from bench.mcp import live_server, percentiles, table
from bench.memory_mcp import _corpus, _keep_vectors, _seed_vectors, bench_client, timer
from bench.recall_set import QUESTIONS


def _setup(data: Path, size: int) -> str:
    """KB `bench` holding `size` semantic memories; returns the token of agent `bencher`."""
    from kbserver.dialects.memory_records import Memory, new_id, now_iso, render_memory
    from kbserver.services import kbs
    from kbserver.services.access import agents
    from kbserver.services.access.auth import ADMIN
    from kbserver.wiring import open_services

    folder = data.parent / "corpus" / "memories"
    folder.mkdir(parents=True)
    now = now_iso()
    for i, text in enumerate(_corpus(size)):
        memory = Memory(
            id=new_id(),
            content=text,
            createdAt=now,
            updatedAt=now,
            memory_type="fact",
            user_id="default",
            importance=round(0.2 + 0.6 * ((i * 37) % 100) / 100, 2),
        )
        (folder / f"{memory.id}.md").write_text(render_memory(memory))
    services = open_services(data)
    try:
        kbs.import_folder(services, ADMIN, "bench", folder.parent, description="semantic memory benchmark")
        _, token = agents.create(services, ADMIN, "bencher", tools=["semantic", "memory"])  # memory_task_wait
        agents.link(services, ADMIN, "bencher", "bench", "read_write")
        return token
    finally:
        services.close()


async def _measure(url: str, token: str, calls: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {}
    async with bench_client(url, token) as (client, _head):
        questions = [q for q, _ in QUESTIONS]
        timed = timer(client, samples)
        for q in questions[-5:]:  # warm up (connections, the catalogue) with questions not measured
            await timed("warm-up", "search_memories_by_semantics", {"query": q})
        for _ in range(calls):
            await timed("noop (baseline)", "noop", {})
        for i in range(calls):
            q = questions[i % (len(questions) - 5)]
            await timed("search_memories_by_semantics", "search_memories_by_semantics", {"query": q})
        for i in range(calls):
            q = questions[(i + calls) % (len(questions) - 5)]
            await timed("recall_related", "recall_related", {"query": q})
        for _ in range(calls):
            await timed("list_due_memories", "list_due_memories", {})
        for i in range(calls):
            content = f"Benchmark fact number {i}: the {i}th build of the tea-tracker shipped."
            await timed("store_memory", "store_memory", {"content": content})
    samples.pop("warm-up")
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="200,10000", help="memories in the KB, comma-separated")
    parser.add_argument("--calls", type=int, default=50, help="measured calls per tool")
    parser.add_argument("--follower", default="embedded", help="embedded and/or worker, comma-separated")
    parser.add_argument("--vectors-cache", type=Path, help="keep and reuse the corpus' vectors here")
    args = parser.parse_args()
    rows: list[tuple[object, ...]] = []
    runs = [(int(size), follower) for size in args.sizes.split(",") for follower in args.follower.split(",")]
    for size, follower in runs:
        with tempfile.TemporaryDirectory(prefix="kbbench-") as tmp:
            data = Path(tmp) / "data"
            token = _setup(data, size)
            _seed_vectors(args.vectors_cache, size, data)
            with live_server(data, follower) as url:
                t0 = time.perf_counter()
                samples = asyncio.run(_measure(url, token, args.calls))
                took = time.perf_counter() - t0
                print(
                    f"{size} memories, {follower} follower: embedded and measured in {took:.0f} s", flush=True
                )
            _keep_vectors(args.vectors_cache, size, data)
        for name, values in samples.items():
            rows.append((size, follower, name, *percentiles(values, 50, 95)))
    print(f"\n{args.calls} sequential calls per row through MCP (Streamable HTTP), {os.cpu_count()} CPUs")
    print(table(("memories", "follower", "tool", "p50 ms", "p95 ms"), rows))


if __name__ == "__main__":
    main()
