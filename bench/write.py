"""Benchmark of one-file writes: kbserver (service layer and HTTP) next to C git, and group commit.

Prints a table of p50/p95 per KB size (100, 10,000, 100,000 files in nested folders) and the
throughput of 1 vs 16 concurrent writers on one KB. Everything runs in this process's temp folder.

    python bench/write.py [--sizes 100,10000,100000] [--writes 200] [--no-http] [--follower worker]

HTTP rows run against `kbserver serve` with its follower in a child process (`child`, the default),
`embedded` in the server's threads or, with `--follower worker`, with `KBSERVER_FOLLOWER=worker` and
a `kbserver worker` process indexing.
"HTTP write->searchable" is the time from sending the write to `GET /index?wait_for=` answering
that the index covers it (the index task is done and a search finds the write).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from kbserver.core.model import Overwrite, WriteRequest
from kbserver.services import Services
from kbserver.services.access.auth import ADMIN
from kbserver.services.writing import writes
from kbserver.wiring import open_services

TOKEN = "bench-admin-token"


def layout(n: int) -> list[str]:
    """Nested folders like TECH-NOTES: dNNN/eN/fNNNNNN.md, 100 files per folder."""
    return [f"d{i // 1000:03d}/e{(i // 100) % 10}/f{i:06d}.md" for i in range(n)]


def fast_import(repo: Path, paths: list[str], bare: bool) -> None:
    """Build a repository with all `paths` in one commit on main using C git's fast-import."""
    subprocess.run(["git", "init", "-q", "-b", "main", *(["--bare"] if bare else []), str(repo)], check=True)
    lines: list[bytes] = [
        b"commit refs/heads/main\n",
        b"committer bench <b@x> 1700000000 +0000\n",
        b"data 5\nseed\n",
    ]
    for i, path in enumerate(paths):
        data = f"# note {i}\n\nsome text for note {i}\n".encode()
        lines.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=b"".join(lines), check=True)
    if not bare:
        subprocess.run(["git", "checkout", "-q", "main"], cwd=repo, check=True)


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def timed(n: int, step: Callable[[int], None]) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        step(i)
        out.append(time.perf_counter() - t)
    return out


def git_worktree(root: Path, paths: list[str], n: int) -> list[float]:
    repo = root / "wt"
    fast_import(repo, paths, bare=False)
    target = paths[len(paths) // 2]

    def step(i: int) -> None:
        (repo / target).write_text(f"change {i}\n")
        subprocess.run(["git", "add", target], cwd=repo, check=True)
        subprocess.run(["git", "commit", "-q", "-m", f"w{i}"], cwd=repo, check=True)

    return timed(n, step)


def git_plumbing(root: Path, paths: list[str], n: int) -> list[float]:
    repo = root / "plumb.git"
    fast_import(repo, paths, bare=True)
    env = {**os.environ, "GIT_INDEX_FILE": str(root / "plumb.index")}
    subprocess.run(["git", "read-tree", "main"], cwd=repo, env=env, check=True)
    target = paths[len(paths) // 2]

    def run(*args: str, data: bytes | None = None) -> str:
        return (
            subprocess.run(["git", *args], cwd=repo, env=env, input=data, capture_output=True, check=True)
            .stdout.decode()
            .strip()
        )

    def step(i: int) -> None:
        blob = run("hash-object", "-w", "--stdin", data=f"change {i}\n".encode())
        run("update-index", "--cacheinfo", f"100644,{blob},{target}")
        tree = run("write-tree")
        head = run("rev-parse", "main")
        commit = run("commit-tree", tree, "-p", head, "-m", f"w{i}")
        run("update-ref", "refs/heads/main", commit, head)

    return timed(n, step)


def seed_kb(services: Services, slug: str, paths: list[str]) -> None:
    fast_import(services.repos.path(slug), paths, bare=True)
    services.control.add_kb(slug, "bench")


def service_writes(services: Services, slug: str, paths: list[str], n: int) -> list[float]:
    target = paths[len(paths) // 2]

    def step(i: int) -> None:
        req = WriteRequest(files=[Overwrite(path=target, mode="overwrite", content=f"change {i}\n")])
        writes.submit(services, ADMIN, slug, req)

    for i in range(20):  # warm up (imports, caches), as C git's rows are warmed by their setup
        step(-1 - i)
    return timed(n, step)


def wait_indexed(c: httpx.Client, slug: str) -> None:
    """Let the server finish its start-up index build, so HTTP writes are timed on a settled server."""
    head = c.get(f"/api/v1/kbs/{slug}").json()["head"]
    for _ in range(60):
        r = c.get(f"/api/v1/kbs/{slug}/index", params={"wait_for": head, "timeout": 60}, timeout=90)
        if r.json().get("covered"):
            return
    raise RuntimeError(f"index of {slug} not built within an hour")


def http_writes(url: str, slug: str, paths: list[str], n: int) -> list[float]:
    target = paths[len(paths) // 2 + 1]
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as c:
        for kb in c.get("/api/v1/kbs").json():  # every KB: a start-up build of another competes too
            wait_indexed(c, kb["slug"])

        def step(i: int) -> None:
            r = c.post(
                f"/api/v1/kbs/{slug}/write",
                json={"files": [{"path": target, "mode": "overwrite", "content": f"http {i}\n"}]},
            )
            r.raise_for_status()

        step(-1)  # warm the connection
        return timed(n, step)


def http_searchable(url: str, slug: str, paths: list[str], n: int) -> list[float]:
    """Seconds from sending a write until the index covers it, as an agent waiting for it sees."""
    target = paths[len(paths) // 2 + 2]
    out = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as c:
        for i in range(-1, n):
            t = time.perf_counter()
            r = c.post(
                f"/api/v1/kbs/{slug}/write",
                json={"files": [{"path": target, "mode": "overwrite", "content": f"searchable {i}\n"}]},
            )
            r.raise_for_status()
            w = c.get(f"/api/v1/kbs/{slug}/index", params={"wait_for": r.json()["version"], "timeout": 30})
            if not w.json().get("covered"):
                raise RuntimeError("the index did not cover a write within 30 s")
            if i >= 0:
                out.append(time.perf_counter() - t)
    return out


def start_server(data: Path, follower: str = "child") -> subprocess.Popen[bytes]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "KBSERVER_ADMIN_TOKEN": TOKEN,
        "KBSERVER_SAMPLE": "false",
        "KBSERVER_LOG_LEVEL": "WARNING",
        "KBSERVER_FOLLOWER": follower,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbserver.cli", "serve", "--data", str(data), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if follower == "worker":
        proc.worker = subprocess.Popen(  # type: ignore[attr-defined]
            [sys.executable, "-m", "kbserver.cli", "worker", "--data", str(data)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    proc.url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    for _ in range(600):
        try:
            if httpx.get(proc.url + "/healthz", timeout=2).status_code == 200:  # type: ignore[attr-defined]
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("server did not start")


def throughput(services: Services, slug: str, writers: int, per_writer: int) -> float:
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            for i in range(per_writer):
                req = WriteRequest(
                    files=[
                        Overwrite(
                            path=f"d000/e0/f{(w * 7) % 100:06d}.md",
                            mode="overwrite",
                            content=f"writer {w} write {i}\n",
                        )
                    ]
                )
                writes.submit(services, ADMIN, slug, req)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - t
    if errors:
        raise errors[0]
    return writers * per_writer / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100,10000,100000")
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--no-http", action="store_true")
    parser.add_argument("--follower", choices=["child", "embedded", "worker"], default="child")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    root = Path(tempfile.mkdtemp(prefix="kbbench-"))
    rows = []
    p50_by_size: dict[int, float] = {}
    try:
        data = root / "data"
        services = open_services(data)
        for size in sizes:
            paths = layout(size)
            slug = f"kb{size}"
            seed_kb(services, slug, paths)
            svc = service_writes(services, slug, paths, args.writes)
            p50_by_size[size] = pct(svc, 0.5)
            wt = git_worktree(root / f"g{size}", paths, min(args.writes, 100))
            pl = git_plumbing(root / f"g{size}", paths, min(args.writes, 100))
            rows.append((size, "kbserver service", svc))
            rows.append((size, "C git add+commit (work tree)", wt))
            rows.append((size, "C git plumbing (bare)", pl))
        services.close()
        if not args.no_http:
            server = start_server(data, args.follower)
            url: str = server.url  # type: ignore[attr-defined]
            try:
                for size in sizes:
                    rows.append(
                        (size, "kbserver HTTP", http_writes(url, f"kb{size}", layout(size), args.writes))
                    )
                    searchable = http_searchable(url, f"kb{size}", layout(size), 50)
                    rows.append((size, "kbserver HTTP write->searchable", searchable))
            finally:
                server.terminate()
                server.wait()
                worker = getattr(server, "worker", None)
                if worker is not None:
                    worker.terminate()
                    worker.wait()
        print(
            f"\none-file writes, fsync on ({args.writes} service/HTTP writes, <=100 C git commits per row), "
            f"follower {args.follower}\n"
        )
        print(f"{'files':>8} | {'what':<30} | {'p50 ms':>8} | {'p95 ms':>8} | {'p50 / C git plumbing':>20}")
        print("-" * 88)
        for size in sizes:
            base = next(pct(s, 0.5) for z, w, s in rows if z == size and w == "C git plumbing (bare)")
            for z, what, samples in sorted((r for r in rows if r[0] == size), key=lambda r: r[1]):
                print(
                    f"{z:>8} | {what:<30} | {pct(samples, 0.5):>8.2f} | {pct(samples, 0.95):>8.2f} | "
                    f"{pct(samples, 0.5) / base:>19.2f}x"
                )
        if len(sizes) > 1:
            print(
                f"\nservice p50 at {sizes[-1]} files / at {sizes[0]} files: "
                f"{p50_by_size[sizes[-1]] / p50_by_size[sizes[0]]:.2f}x"
            )
        services = open_services(data)
        rounds = [
            (throughput(services, f"kb{sizes[0]}", 1, 160), throughput(services, f"kb{sizes[0]}", 16, 10))
            for _ in range(3)
        ]
        repo = services.repos.repo(f"kb{sizes[0]}")
        versions = len(list(repo.first_parents(repo.head() or "")))
        services.close()
        expected = 1 + 20 + args.writes + (0 if args.no_http else args.writes + 1 + 51) + 3 * (160 + 160)
        print(f"\nthroughput on one KB ({sizes[0]} files), 3 rounds of 160 writes each way:")
        for single, many in rounds:
            ratio = many / single
            print(f"  1 writer {single:.0f} writes/s, 16 writers {many:.0f} writes/s, ratio {ratio:.2f}x")
        ratios = sorted(many / single for single, many in rounds)
        print(f"  median ratio {ratios[1]:.2f}x; versions {versions} (expected {expected}: nothing lost)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
