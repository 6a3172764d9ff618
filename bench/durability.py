"""Commit latency with syncfs(2) (the old flush) against fsync of what the commit wrote (the new).

While unrelated writers keep dirty data on the same file system (what another program, or on
shared storage another node, does), syncfs makes each commit wait for all of it; fsync of the
commit's own files does not. Prints p50/p95 per scenario, both flushes side by side in one run.

    python -m bench.durability [--writes 60] [--dirty-mb 48]
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from kbserver.store import CommitPlan, Repos, TreeView
from kbserver.store import writer as writer_module
from kbserver.store.durable import sync_files

AUTHOR = "bench <bench@kbserver.invalid>"

# Another program writing without fsync: keeps about `mb` MB dirty in the page cache of `folder`.
DIRTY = """
import os, sys, time
folder, mb = sys.argv[1], int(sys.argv[2])
chunk = os.urandom(1 << 20)
n = 0
while True:
    path = os.path.join(folder, f"dirty-{n % 4}.bin")
    with open(path, "wb") as f:
        for _ in range(mb // 4):
            f.write(chunk)
    n += 1
    time.sleep(0.05)
"""


def _syncfs() -> Callable[[str, Iterable[str]], None]:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)

    def flush(anchor: str, paths: Iterable[str]) -> None:  # the flush before this change
        fd = os.open(anchor, os.O_RDONLY)
        try:
            if libc.syncfs(fd) != 0:
                raise OSError(ctypes.get_errno(), "syncfs failed")
        finally:
            os.close(fd)

    return flush


def _job(n: int) -> Callable[[TreeView], CommitPlan]:
    return lambda _tip: CommitPlan({f"notes/{n:05d}.md": f"note {n}\n".encode() * 20}, f"w{n}", AUTHOR)


Flush = Callable[[str, Iterable[str]], None]


def measure(repos: Repos, flush: Flush, writes: int, start: int) -> list[float]:
    _, writer = repos.get("bench")
    writer_module.sync_files = flush  # type: ignore[assignment]
    times = []
    for n in range(start, start + writes):
        t0 = time.perf_counter()
        writer.submit(_job(n))
        times.append((time.perf_counter() - t0) * 1000)
    return times


def row(name: str, old: list[float], new: list[float]) -> str:
    def q(v: list[float], p: int) -> float:
        return statistics.quantiles(v, n=20)[p // 5 - 1] if p < 100 else max(v)

    o50, n50 = statistics.median(old), statistics.median(new)
    return f"| {name} | {o50:.2f} | {q(old, 95):.2f} | {n50:.2f} | {q(new, 95):.2f} | {o50 / n50:.2f}x |"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--writes", type=int, default=60)
    ap.add_argument("--dirty-mb", type=int, default=48)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kb-durability-") as tmp:
        repos = Repos(Path(tmp) / "kbs")
        repos.create("bench", b"# bench\n", AUTHOR, "create")
        old, new = _syncfs(), sync_files
        measure(repos, new, 10, 0)  # warm up
        lines = [
            "| scenario | syncfs p50 ms | syncfs p95 ms | fsync p50 ms | fsync p95 ms | p50 ratio |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        n = 1000
        results = {}
        for scenario in ("quiet file system", f"{args.dirty_mb} MB dirtied by another program"):
            dirty = None
            if scenario != "quiet file system":
                folder = Path(tmp) / "other"
                folder.mkdir()
                cmd = [sys.executable, "-c", DIRTY, str(folder), str(args.dirty_mb)]
                dirty = subprocess.Popen(cmd)
                time.sleep(2.0)  # let it fill the page cache
            try:
                a, b = [], []
                for _ in range(3):  # interleaved, so both see the same background
                    a += measure(repos, old, args.writes // 3, n)
                    n += args.writes
                    b += measure(repos, new, args.writes // 3, n)
                    n += args.writes
                results[scenario] = (a, b)
            finally:
                if dirty is not None:
                    dirty.kill()
                    dirty.wait()
            lines.append(row(scenario, *results[scenario]))
        writer_module.sync_files = sync_files
        print(f"one-file commits, {args.writes} per flush and scenario, fsync on; loadavg {_load()}")
        print("\n".join(lines))
        repos.close()


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    main()
