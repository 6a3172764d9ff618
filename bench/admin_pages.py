"""Benchmark of the web admin's pages, server side (in-process ASGI, no network): p50 and p90 over
`--runs` requests of each page of a KB with `--memories` memory files and `--writes` unreviewed agent
writes (each a version of its own), and the KB list.

    python -m bench.admin_pages [--memories 10000] [--writes 1000] [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from starlette.testclient import TestClient

from kbserver.app import create_app
from kbserver.config import Settings
from kbserver.core.model import Create, WriteRequest
from kbserver.services import kbs, writes
from kbserver.services.auth import ADMIN, caller_for
from kbserver.wiring import open_services
from tests.helpers import ADMIN_TOKEN, make_agent
from tests.web.session import log_in

MEMORY = (
    "---\nid: {id}\nagentId: bob\nmemory_type: fact\ncreatedAt: '2026-12-01T10:00:00Z'\n---\n\nMemory {n}.\n"
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--writes", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data=Path(tmp) / "data", admin_token=ADMIN_TOKEN, sample=False)
        services = open_services(settings.data, settings.options())
        services.start()
        kbs.create(services, ADMIN, "notes", "bench")
        make_agent(services, "bob", {"notes": "read_write"})
        bob = caller_for(services, "bob")
        t = time.perf_counter()
        files = [
            Create(mode="create", path=f"memories/{n:016x}.md", content=MEMORY.format(id=f"{n:016x}", n=n))
            for n in range(args.memories)
        ]
        for start in range(0, len(files), 20):  # a write changes at most 20 files
            writes.submit(services, bob, "notes", WriteRequest(files=files[start : start + 20]))
        services.control.set_reviewed("notes", services.repos.repo("notes").head() or "", "admin")
        for i in range(args.writes):
            change = Create(mode="create", path=f"notes/{i}.md", content=f"note {i}\n")
            writes.submit(services, bob, "notes", WriteRequest(files=[change]))
        head = services.repos.repo("notes").head()
        print(
            f"seeded {args.memories} memories and {args.writes} unreviewed writes"
            f" in {time.perf_counter() - t:.0f} s"
        )
        pages = [
            "/admin/",
            "/admin/kbs/notes",
            f"/admin/kbs/notes/files/memories/{1:016x}.md",
            "/admin/kbs/notes/versions",
            f"/admin/kbs/notes/versions/{head}",
            "/admin/kbs/notes/review",
            "/admin/kbs/notes/review?prefix=notes/1",
            "/admin/kbs/notes/proposals",
            "/admin/kbs/notes/search?q=memory",
            "/admin/agents",
        ]
        with TestClient(create_app(settings, services)) as client:
            log_in(client)
            print("| page | p50 ms | p90 ms |\n|---|---|---|")
            for url in pages:
                assert client.get(url).status_code == 200, url  # warm
                took = []
                for _ in range(args.runs):
                    t = time.perf_counter()
                    client.get(url)
                    took.append((time.perf_counter() - t) * 1000)
                took.sort()
                print(f"| {url} | {statistics.median(took):.0f} | {took[int(len(took) * 0.9) - 1]:.0f} |")
        services.close()


if __name__ == "__main__":
    main()
