"""Benchmark of server memory: RSS of `kbserver serve` holding many KBs (issue 8 item 6).

Starts a real server on a fresh data folder, creates `--kbs` KBs and writes `--files` files into
each over HTTP (`--per-write` files per write), waits until the index covers every KB, and reads
the server's RSS; then lists, reads and searches every KB once and reads it again. Prints a table
next to the baseline measured before the LRU pool (issue 8: 389 MB / 418 MB; target 200 MB).

    python bench/memory.py [--kbs 100] [--files 1000] [--per-write 20] [--budget-mb N] [--worker]

fsync is off (it changes time, not memory). With `--worker` the index is built by a
`kbserver worker` process, whose RSS is shown on its own row. To measure another checkout with
the same script, put it first on PYTHONPATH (`PYTHONPATH=/path/to/old python bench/memory.py`).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

TOKEN = "bench-admin-token"
BASELINE = {"after writing": 389.0, "after reading and searching each KB once": 418.0}
TARGET_MB = 200.0
WORDS = "alder birch cedar dogwood elm fir ginkgo hazel juniper larch maple oak pine rowan spruce yew".split()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def content(kb: int, i: int) -> str:
    words = " ".join(WORDS[(kb + i + k) % len(WORDS)] for k in range(12))
    return f"# note {i} of kb {kb}\n\n{words}. Remember item {i * 7919 % 1000} for later.\n"


def fill(url: str, kb: int, files: int, per_write: int) -> str:
    slug = f"kb{kb:03d}"
    with httpx.Client(
        base_url=url + "/api/v1", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120
    ) as c:
        r = c.post("/kbs", json={"slug": slug})
        r.raise_for_status()
        for start in range(0, files, per_write):
            batch = [
                {"path": f"notes/{i // 100:02d}/n{i:04d}.md", "mode": "create", "content": content(kb, i)}
                for i in range(start, min(files, start + per_write))
            ]
            c.post(f"/kbs/{slug}/write", json={"files": batch}).raise_for_status()
    return slug


def settle(url: str, slugs: list[str]) -> None:
    with httpx.Client(
        base_url=url + "/api/v1", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120
    ) as c:
        for slug in slugs:
            head = c.get(f"/kbs/{slug}").json()["head"]
            for _ in range(20):
                r = c.get(f"/kbs/{slug}/index", params={"wait_for": head, "timeout": 60})
                if r.json().get("covered"):
                    break
            else:
                raise RuntimeError(f"index of {slug} did not catch up")


def touch_each(url: str, slugs: list[str]) -> None:
    with httpx.Client(
        base_url=url + "/api/v1", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120
    ) as c:
        for n, slug in enumerate(slugs):
            c.get(f"/kbs/{slug}").raise_for_status()
            c.get(f"/kbs/{slug}/files").raise_for_status()
            c.get(f"/kbs/{slug}/files/notes/00/n0001.md").raise_for_status()
            c.get(f"/kbs/{slug}/search", params={"q": WORDS[n % len(WORDS)]}).raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kbs", type=int, default=100)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--per-write", type=int, default=20)
    parser.add_argument(
        "--budget-mb", type=int, default=None, help="KBSERVER_MEMORY_BUDGET_MB for the server"
    )
    parser.add_argument("--worker", action="store_true", help="index in a `kbserver worker` process")
    parser.add_argument("--clients", type=int, default=4, help="concurrent HTTP clients while writing")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="kbmem-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "KBSERVER_ADMIN_TOKEN": TOKEN,
        "KBSERVER_SAMPLE": "false",
        "KBSERVER_FSYNC": "false",
        "KBSERVER_LOG_LEVEL": "WARNING",
    }
    if args.budget_mb is not None:
        env["KBSERVER_MEMORY_BUDGET_MB"] = str(args.budget_mb)
    if args.worker:
        env["KBSERVER_FOLLOWER"] = "worker"
    cmd = [sys.executable, "-m", "kbserver.cli"]
    server = subprocess.Popen(
        [*cmd, "serve", "--data", str(root), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = (
        subprocess.Popen([*cmd, "worker", "--data", str(root)], env=env, stdout=subprocess.DEVNULL)
        if args.worker
        else None
    )
    rows: list[tuple[str, float, float | None]] = []
    try:
        for _ in range(600):
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        rows.append(("started", rss_mb(server.pid), rss_mb(worker.pid) if worker else None))
        t = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
            slugs = list(pool.map(lambda kb: fill(url, kb, args.files, args.per_write), range(args.kbs)))
        settle(url, slugs)
        written = time.perf_counter() - t
        rows.append(("after writing", rss_mb(server.pid), rss_mb(worker.pid) if worker else None))
        touch_each(url, slugs)
        rows.append(
            (
                "after reading and searching each KB once",
                rss_mb(server.pid),
                rss_mb(worker.pid) if worker else None,
            )
        )
    finally:
        for proc in (server, worker):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=60)
        shutil.rmtree(root, ignore_errors=True)

    budget = f"{args.budget_mb} MB" if args.budget_mb is not None else "default"
    mode = "worker" if args.worker else "embedded"
    print(
        f"\nserver RSS, {args.kbs} KBs x {args.files} files ({args.per_write} per write, written and "
        f"indexed in {written:.0f} s), memory budget {budget}, follower {mode}\n"
    )
    head = f"{'when':<42} | {'baseline MB':>11} | {'serve MB':>8} | {'worker MB':>9} | {'target MB':>9}"
    print(head)
    print("-" * len(head))
    for when, serve_mb, worker_mb in rows:
        base = BASELINE.get(when)
        print(
            f"{when:<42} | {base if base is not None else '':>11} | {serve_mb:>8.0f} | "
            f"{f'{worker_mb:.0f}' if worker_mb is not None else '-':>9} | {TARGET_MB if base else '':>9}"
        )


if __name__ == "__main__":
    main()
