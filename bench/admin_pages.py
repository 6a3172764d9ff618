"""Benchmark of the web admin's pages, server side (in-process ASGI, no network): p50 and p90 over
`--runs` requests of each page of a KB with `--memories` memory files and `--writes` unreviewed agent
writes (each a version of its own), and the KB list.

    python -m bench.admin_pages [--memories 10000] [--writes 1000] [--long 2000] [--runs 15] [--keep DIR]
                                [--baseline TREE]

`--keep DIR` seeds the data folder there once and reuses it on later runs (seeding takes minutes).
`--baseline TREE` (another checkout, e.g. `git archive 935aae6 | tar -x -C /tmp/base`) measures the
same pages through that checkout's code side by side: each checkout serves its own copy of the
seeded folder in a worker process of its own, and the two take turns request by request, so both
see the same machine load. The table gives both p50s and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEMORY = (
    "---\nid: {id}\nagentId: bob\nmemory_type: fact\ncreatedAt: '2026-12-01T10:00:00Z'\n---\n\nMemory {n}.\n"
)


def seed(data: Path, memories: int, unreviewed: int, long: int) -> None:
    """One KB `notes`: `memories` memory files by bob (20 a write), reviewed, then `unreviewed`
    one-file writes by bob and by carol (every third). A KB `history`: `first.md`, then `long`
    appends to `long.md` (a file with a long history, and one whose last change is `long` back)."""
    from kbserver.config import Settings
    from kbserver.core.model import Append, Create, WriteRequest
    from kbserver.services import kbs
    from kbserver.services.access.auth import ADMIN, caller_for
    from kbserver.services.writing import writes
    from kbserver.wiring import open_services
    from tests.helpers import ADMIN_TOKEN, make_agent

    settings = Settings(data=data, admin_token=ADMIN_TOKEN, sample=False)
    services = open_services(settings.data, settings.options())
    services.start()
    kbs.create(services, ADMIN, "notes", "bench")
    make_agent(services, "bob", {"notes": "read_write"})
    make_agent(services, "carol", {"notes": "read_write"})
    bob, carol = caller_for(services, "bob"), caller_for(services, "carol")
    t = time.perf_counter()
    files = [
        Create(mode="create", path=f"memories/{n:016x}.md", content=MEMORY.format(id=f"{n:016x}", n=n))
        for n in range(memories)
    ]
    for start in range(0, len(files), 20):  # a write changes at most 20 files
        writes.submit(services, bob, "notes", WriteRequest(files=files[start : start + 20]))
    services.control.set_reviewed("notes", services.repos.repo("notes").head() or "", "admin")
    for i in range(unreviewed):
        change = Create(mode="create", path=f"notes/{i}.md", content=f"note {i}\n")
        writes.submit(services, carol if i % 3 == 2 else bob, "notes", WriteRequest(files=[change]))
    kbs.create(services, ADMIN, "history", "a long history")
    make_agent(services, "dave", {"history": "read_write"})
    dave = caller_for(services, "dave")
    writes.submit(
        services, dave, "history", WriteRequest(files=[Create(mode="create", path="first.md", content="1\n")])
    )
    writes.submit(
        services, dave, "history", WriteRequest(files=[Create(mode="create", path="long.md", content="0\n")])
    )
    for i in range(long):
        change = Append(mode="append", path="long.md", content=f"{i + 1}\n")
        writes.submit(services, dave, "history", WriteRequest(files=[change]))
    services.follower.catch_up("notes")
    services.follower.catch_up("history")
    services.close()
    print(
        f"seeded {memories} memories, {unreviewed} unreviewed writes and a {long}-version history"
        f" in {time.perf_counter() - t:.0f} s"
    )


def pages(head: str) -> list[str]:
    return [
        "/admin/",
        "/admin/kbs/notes",
        f"/admin/kbs/notes/files/memories/{1:016x}.md",
        "/admin/kbs/notes/files/notes/1.md",
        "/admin/kbs/notes/versions",
        f"/admin/kbs/notes/versions/{head}",
        "/admin/kbs/notes/review",
        "/admin/kbs/notes/review?prefix=notes/1",
        "/admin/kbs/notes/proposals",
        "/admin/kbs/notes/search?q=memory",
        "/admin/kbs/notes/week",
        "/admin/agents",
        "/admin/kbs/notes/versions?path=notes/1.md",
        f"/admin/kbs/notes/versions?path=memories/{1:016x}.md",
        "/admin/kbs/history/versions?path=long.md",
        "/admin/kbs/history/versions?path=first.md",
        "/admin/kbs/history/files/long.md",
    ]


def worker(data: Path) -> None:
    """Serve the admin of `data` in process; for each URL read on stdin, answer one line of JSON:
    {"status", "ms"} of one request (the first request of each URL warms it and is not timed)."""
    from starlette.testclient import TestClient

    from kbserver.app import create_app
    from kbserver.config import Settings
    from kbserver.wiring import open_services
    from tests.helpers import ADMIN_TOKEN
    from tests.web.session import log_in

    settings = Settings(data=data, admin_token=ADMIN_TOKEN, sample=False)
    services = open_services(settings.data, settings.options())
    services.start()
    services.follower.catch_up("notes")
    warm: set[str] = set()
    with TestClient(create_app(settings, services)) as client:
        log_in(client)
        print(json.dumps({"head": services.repos.repo("notes").head()}), flush=True)
        for line in sys.stdin:
            url = line.strip()
            if url not in warm:
                warm.add(url)
                client.get(url)
            t = time.perf_counter()
            status = client.get(url).status_code
            print(json.dumps({"status": status, "ms": (time.perf_counter() - t) * 1000}), flush=True)
    services.close()


class Worker:
    def __init__(self, tree: Path, data: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.tree = tree
        self.proc = subprocess.Popen(
            # run as code, not as a script: a script's folder (bench/, whose secrets.py would shadow the
            # standard library's) goes first on sys.path; `tree` must be the one kbserver comes from
            [sys.executable, "-c", _RUN_WORKER, str(ROOT / "bench" / "admin_pages.py"), str(data)],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.head = self._answer()["head"]

    def _answer(self) -> dict[str, object]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the worker of {self.tree} ended")
        answer: dict[str, object] = json.loads(line)
        return answer

    def get(self, url: str) -> tuple[int, float]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(url + "\n")
        self.proc.stdin.flush()
        a = self._answer()
        return int(str(a["status"])), float(str(a["ms"]))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


_RUN_WORKER = (
    "import runpy, sys; f, d = sys.argv[1:]; sys.argv = [f, '--worker', d]; "
    "runpy.run_path(f, run_name='__main__')"
)


def _p(took: list[float], q: float) -> float:
    took = sorted(took)
    return took[max(0, int(len(took) * q + 0.5) - 1)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--writes", type=int, default=1000)
    ap.add_argument("--long", type=int, default=2000, help="versions of the long history")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--keep", type=Path, help="seed the data folder here once, and reuse it")
    ap.add_argument("--baseline", type=Path, help="another checkout, measured side by side")
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker)
        return
    with tempfile.TemporaryDirectory() as tmp:
        seeded = args.keep or Path(tmp) / "seeded"
        if not (seeded / "control.db").exists():
            seed(seeded, args.memories, args.writes, args.long)
        trees = [("new", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
        workers = {}
        for name, tree in trees:
            copy = Path(tmp) / name
            shutil.copytree(seeded, copy, symlinks=True)
            workers[name] = Worker(tree, copy)
        head = str(workers["new"].head)
        took: dict[tuple[str, str], list[float]] = {}
        status: dict[tuple[str, str], int] = {}
        print(f"load before: {os.getloadavg()[0]:.1f}", flush=True)
        for url in pages(head):
            for _ in range(args.runs):
                for name, w in workers.items():  # turn by turn: both see the same load
                    code, ms = w.get(url)
                    status[(name, url)] = code
                    took.setdefault((name, url), []).append(ms)
        print(f"load after: {os.getloadavg()[0]:.1f}\n")
        if args.baseline:
            print(
                "| page | baseline p50 ms | new p50 ms | new p90 ms | baseline / new |\n|---|---|---|---|---|"
            )
        else:
            print("| page | p50 ms | p90 ms |\n|---|---|---|")
        for url in pages(head):
            shown = url.replace(head, "{head}")
            new = took[("new", url)]
            cells = [f"{statistics.median(new):.0f}", f"{_p(new, 0.9):.0f}"]
            if status[("new", url)] != 200:
                cells = [f"HTTP {status[('new', url)]}", "—"]
            if args.baseline:
                base = took[("baseline", url)]
                if status[("baseline", url)] == 200:
                    ratio = statistics.median(base) / statistics.median(new)
                    cells = [f"{statistics.median(base):.0f}", *cells, f"{ratio:.1f}x"]
                else:
                    cells = [f"HTTP {status[('baseline', url)]}", *cells, "—"]
            print(f"| {shown} | " + " | ".join(cells) + " |")
        for w in workers.values():
            w.close()


if __name__ == "__main__":
    main()
