"""Benchmark the memory dialects through MCP (the SDK's in-memory client, real services and git).

    python -m bench.dialects [--sizes 100,1000] [--repeat 30]

For each size N, a fresh KB gets N typed records (topics) and N archived days through the tools,
then p50/p95 are measured for: `save_memory` (an update in place, which recompiles CONTEXT.md from
all N topics in the same version), `query_index`, `recall_raw` by words and by a date range,
`add_memory` (auto), and the memory tool's `str_replace` and `view`. Every call is a real MCP call
whose changes are real commits. Progress goes to stderr, the table to stdout; temp folders are
removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client

from kbserver.mcp import Binding, build_server
from kbserver.services import kbs
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.wiring import open_services


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
        kbs.create(services, ADMIN, "bench", "dialect benchmark")
        agents.create(services, ADMIN, "agent", tools=["auto", "typed", "memory_tool"])
        agents.link(services, ADMIN, "agent", "bench", "read_write")
        server = build_server(Binding(services, lambda: caller_for(services, "agent")))
        async with Client(server) as c:
            day0 = datetime.date(2020, 1, 1)
            for i in range(size):
                await c.call_tool(
                    "save_memory", {"type": "topic", "name": f"topic {i}", "summary": f"notes {i}"}
                )
                date = (day0 + datetime.timedelta(days=i)).isoformat()
                await c.call_tool(
                    "archive_day", {"date": date, "summary": f"day {i}", "facts": [f"fact {i}"]}
                )
                if i % 100 == 99:
                    print(f"  seeded {i + 1}/{size}", file=sys.stderr)
            await c.call_tool("memory", {"command": "create", "path": "/memories/a.md", "file_text": "x0\n"})
            rows = []

            def row(name: str, timing: tuple[float, float]) -> None:
                rows.append((name, size, *timing))

            row(
                "save_memory (update, recompiles CONTEXT.md)",
                await _timed(
                    repeat,
                    lambda i: c.call_tool(
                        "save_memory", {"type": "topic", "name": f"topic {i}", "summary": f"changed {i}"}
                    ),
                ),
            )
            row(
                "query_index",
                await _timed(repeat, lambda i: c.call_tool("query_index", {"query": f"changed {i}"})),
            )
            row(
                "recall_raw (query)",
                await _timed(repeat, lambda i: c.call_tool("recall_raw", {"query": f"day {i}"})),
            )
            row(
                "recall_raw (31-day range)",
                await _timed(
                    repeat,
                    lambda i: c.call_tool("recall_raw", {"startDate": "2020-01-01", "endDate": "2020-01-31"}),
                ),
            )
            row(
                "add_memory",
                await _timed(min(repeat, 15), lambda i: c.call_tool("add_memory", {"content": f"fact {i}"})),
            )
            row(
                "memory str_replace",
                await _timed(
                    repeat,
                    lambda i: c.call_tool(
                        "memory",
                        {
                            "command": "str_replace",
                            "path": "/memories/a.md",
                            "old_str": f"x{i}",
                            "new_str": f"x{i + 1}",
                        },
                    ),
                ),
            )
            row(
                "memory view",
                await _timed(
                    repeat, lambda i: c.call_tool("memory", {"command": "view", "path": "/memories"})
                ),
            )
            return rows
    finally:
        services.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        print(f"size {size}", file=sys.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            rows += asyncio.run(_run(size, args.repeat, Path(tmp)))
    print("| call | records and days | p50 ms | p95 ms |")
    print("| --- | --- | --- | --- |")
    for name, size, p50, p95 in rows:
        print(f"| {name} | {size} | {p50:.1f} | {p95:.1f} |")


if __name__ == "__main__":
    main()
