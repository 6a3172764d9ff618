"""Latency of the `memory` tool set through MCP over Streamable HTTP, at 200 and 10,000 memories.

    python -m bench.memory_mcp [--sizes 200,10000] [--calls 100] [--follower embedded,worker]
                               [--vectors-cache DIR] [--variant NAME:SETTING=VALUE,...]...

For each size: a KB of that many memories (the 208 of bench/recall_set.py, then generated facts),
imported as one folder; a live server (create_app under uvicorn in a subprocess, as `kbserver serve`
runs it, plus a no-op tool as the baseline), following main itself (embedded) or beside a
`kbserver worker` that does (worker: indexing and embedding then never compete with requests for
the GIL); the follower embeds every memory before measuring
(memory_task_wait). Then, sequentially from one SDK client: `--calls` no-op calls, `memory_add`
calls (the embedding is made after the commit, never on this path) and `memory_search` calls in
hybrid and keyword mode with the recall set's questions (hybrid twice: questions new to the server,
whose embedding is made on the call's path, then questions asked before, whose embedding the query
cache holds). Prints p50/p95 per tool. `--caught-up` waits for the follower to cover the adds
before the searches (a row says how long that took), so they are measured without its work on
the adds beside them.

`--variant` (repeatable) runs every size and follower once per variant, each with its settings
(e.g. `--variant before:follower_nice=0,follower_batch_ms=0 --variant after:`), alternating on the
same corpus, and prints their rows side by side: the machine's load varies more between runs than
most changes do. Without it there is one variant, `default`, with the settings' defaults.

Embedding 10,000 memories takes ~10 minutes on 2 cores. `--vectors-cache DIR` keeps each size's
vectors (keyed by the content's sha256, which the generated corpus repeats exactly) in DIR and
seeds the next run with them, so the follower only re-maps paths instead of embedding again.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sqlite3
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bench.mcp import TOKEN, live_server, percentiles, table
from bench.recall_set import MEMORIES, QUESTIONS

SUBJECTS = "Mia Sam Lily Raj Elena Tom Karen Diego Noor Chloe Ana Pepper".split()
VERBS = "likes prefers dislikes booked moved cancelled reviewed finished started planned".split()
OBJECTS = (
    "the quarterly report|a trip to Lisbon|green tea|the new dashboard|piano lessons|the offsite agenda|"
    "a dentist appointment|the Kafka migration|weekend hikes|the budget review|a birthday cake|the VPN setup"
).split("|")
WHEN = "on Monday|last week|in March|every Friday|before lunch|after stand-up|next spring|at night".split("|")


def _corpus(size: int) -> list[str]:
    texts = list(MEMORIES.values())[:size]
    rng = random.Random(size)
    while len(texts) < size:
        texts.append(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(WHEN)}.")
    return texts


def _setup(data: Path, size: int) -> str:
    """KB `bench` holding `size` memories; returns the token of agent `bencher` (tools: memory)."""
    from kbserver.dialects.memory_records import Memory, new_id, now_iso, render_memory
    from kbserver.services import kbs
    from kbserver.services.access import agents
    from kbserver.services.access.auth import ADMIN
    from kbserver.wiring import open_services

    folder = data.parent / "corpus" / "memories"
    folder.mkdir(parents=True)
    now = now_iso()
    for text in _corpus(size):
        memory = Memory(id=new_id(), content=text, createdAt=now, updatedAt=now)
        (folder / f"{memory.id}.md").write_text(render_memory(memory))
    services = open_services(data)
    try:
        kbs.import_folder(services, ADMIN, "bench", folder.parent, description="memory benchmark")
        _, token = agents.create(services, ADMIN, "bencher", tools=["memory"])
        agents.link(services, ADMIN, "bencher", "bench", "read_write")
        return token
    finally:
        services.close()


async def wait_done(client: Any, task: str, deadline: float) -> None:
    """Until the follower covers version `task` (memory_task_wait answers done) or `deadline`."""
    while time.monotonic() < deadline:
        waited = await client.call_tool("memory_task_wait", {"taskId": task, "timeout": 60})
        if (waited.structured_content or {}).get("status") == "done":
            return


@asynccontextmanager
async def bench_client(url: str, token: str) -> AsyncIterator[tuple[Any, str]]:
    """An SDK client of the agent of `token` over Streamable HTTP, once the follower covers KB
    `bench` (it embeds every memory first), and the version it covers."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    admin = {"Authorization": f"Bearer {TOKEN}"}
    head = httpx2.get(f"{url}/api/v1/kbs/bench", headers=admin, timeout=30).json()["head"]
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=120)) as hc:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=hc)) as client:
            await wait_done(client, head, time.monotonic() + 1800)
            yield client, head


def timer(
    client: Any, samples: dict[str, list[float]]
) -> Callable[[str, str, dict[str, Any]], Awaitable[None]]:
    """`timed(row, tool, args)`: call the tool, add its latency to `samples[row]`, fail on a tool error."""

    async def timed(name: str, tool: str, args: dict[str, Any]) -> None:
        start = time.perf_counter()
        result = await client.call_tool(tool, args)
        samples.setdefault(name, []).append(time.perf_counter() - start)
        assert not result.is_error, result.content

    return timed


async def _measure(url: str, token: str, calls: int, caught_up: bool = False) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {}
    async with bench_client(url, token) as (client, head):
        deadline = time.monotonic() + 1800
        questions = [q for q, _ in QUESTIONS]
        timed = timer(client, samples)

        for q in questions[-5:]:  # warm up (connections, the catalogue) with questions not measured
            await timed("warm-up", "memory_search", {"search": q})
        for _ in range(calls):
            await timed("noop (baseline)", "noop", {})
        task = head
        for i in range(calls):
            args = {"content": f"Benchmark fact number {i} about tea."}
            start = time.perf_counter()
            added = await client.call_tool("memory_add", args)
            samples.setdefault("memory_add", []).append(time.perf_counter() - start)
            assert not added.is_error, added.content
            task = (added.structured_content or {}).get("taskId", task)
        if caught_up:  # the searches below then run without the follower's work on the adds
            start = time.perf_counter()
            await wait_done(client, task, deadline)
            samples["follower caught up after the adds (one wait)"] = [time.perf_counter() - start] * 2
        for i in range(calls):  # each question new to the server: its embedding is made
            q = questions[i % (len(questions) - 5)]
            await timed("memory_search hybrid", "memory_search", {"search": q})
        for i in range(calls):  # questions asked before: their embeddings are cached
            q = questions[i % min(calls, 20)]
            await timed("memory_search hybrid, asked before", "memory_search", {"search": q})
        for i in range(calls):
            q = questions[i % len(questions)]
            await timed("memory_search keyword", "memory_search", {"search": q, "mode": "keyword"})
    samples.pop("warm-up")
    return samples


def _seed_vectors(cache: Path | None, size: int, data: Path) -> None:
    """Copy the cached vectors of this corpus into the data folder (the follower re-maps paths)."""
    source = cache / f"vectors-{size}.db" if cache else None
    if source is not None and source.exists():
        target = data / "vectors" / "bench"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target / "vectors.db")


def _keep_vectors(cache: Path | None, size: int, data: Path) -> None:
    if cache is None:
        return
    cache.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(data / "vectors" / "bench" / "vectors.db") as db:  # one file, WAL folded in
        db.execute(f"VACUUM INTO '{cache / f'vectors-{size}.tmp'}'")
    os.replace(cache / f"vectors-{size}.tmp", cache / f"vectors-{size}.db")


def _variant(spec: str) -> tuple[str, dict[str, str]]:
    """`NAME:SETTING=VALUE,...` as (NAME, {SETTING: VALUE})."""
    name, _, rest = spec.partition(":")
    settings = dict(item.split("=", 1) for item in rest.split(",") if item.strip())
    return name or "default", {key.strip(): value.strip() for key, value in settings.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="200,10000", help="memories in the KB, comma-separated")
    parser.add_argument("--calls", type=int, default=100, help="measured calls per tool")
    parser.add_argument("--follower", default="embedded", help="embedded and/or worker, comma-separated")
    parser.add_argument("--vectors-cache", type=Path, help="keep and reuse the corpus' vectors here")
    parser.add_argument(
        "--variant", action="append", default=[], help="NAME:SETTING=VALUE,... (repeatable): to compare"
    )
    parser.add_argument(
        "--caught-up",
        action="store_true",
        help="wait until the follower covers the adds before measuring searches (and report that wait)",
    )
    args = parser.parse_args()
    variants = [_variant(v) for v in args.variant] or [("default", {})]
    results: dict[tuple[int, str, str], dict[str, list[float]]] = {}
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="kbbench-") as tmp:
            base = Path(tmp) / "base"
            token = _setup(base, size)
            _seed_vectors(args.vectors_cache, size, base)
            for follower in args.follower.split(","):
                for name, settings in variants:  # alternating, on copies of one corpus
                    data = Path(tmp) / "data"
                    shutil.copytree(base, data)
                    with live_server(data, follower, settings) as url:
                        t0 = time.perf_counter()
                        measured = _measure(url, token, args.calls, args.caught_up)
                        results[size, follower, name] = asyncio.run(measured)
                        took = time.perf_counter() - t0
                    load = os.getloadavg()[0]
                    print(
                        f"{size} memories, {follower} follower, {name}: embedded and measured in {took:.0f} s"
                        f" (load {load:.1f})",
                        flush=True,
                    )
                    _keep_vectors(args.vectors_cache, size, data)
                    shutil.rmtree(data)
    header: tuple[str, ...] = ("memories", "follower", "tool")
    for name, _ in variants:
        header += (f"{name} p50 ms", f"{name} p95 ms")
    rows: list[tuple[object, ...]] = []
    for (size, follower, first), samples in results.items():
        if first != variants[0][0]:
            continue
        for tool in samples:
            row: tuple[object, ...] = (size, follower, tool)
            for name, _ in variants:
                row += tuple(percentiles(results[size, follower, name][tool], 50, 95))
            rows.append(row)
    print(f"\n{args.calls} sequential calls per row through MCP (Streamable HTTP), {os.cpu_count()} CPUs")
    for name, settings in variants:
        print(f"{name}: {', '.join(f'{k}={v}' for k, v in settings.items()) or 'the defaults'}")
    print(table(header, rows))


if __name__ == "__main__":
    main()
