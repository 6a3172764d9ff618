"""Benchmark of server memory: RSS of `kbserver serve` holding many KBs (issue 8 item 6, issue 37 item 6).

One command builds a fresh data folder of `--kbs` KBs of `--files` files each over HTTP (`--per-write`
files per write, `--clients` at once) and reads, from outside (/proc/PID/status VmRSS), the RSS of
the serving process and of its follower child (`kbserver serve`'s default) at four moments:

- started: the server answers `/healthz` on the empty data folder;
- after writing: every file written and indexed (`/index?wait_for=` says covered for every KB);
- after reading and searching each KB once: its page, its listing, one file and one search each
  (their wall times, p50 / p95, are printed beside it);
- after a restart that touches each: the server stopped and started again on the same folder, and
  every KB read and searched once more;
- with `--hot N`, then: the first N KBs touched three times, the last two timed (what a budget
  costs: a working set that fits the pool is read from open KBs, one that does not is reopened).

    python -m bench.memory [--kbs 100] [--files 1000] [--per-write 20] [--budget-mb N] [--hot N]
                           [--follower child|embedded|worker] [--data DIR] [--trace DIR]
                           [--env NAME=VALUE ...]

fsync is off (it changes time, not memory). `--data DIR` keeps the folder (and a second run on it
skips the writing). `--trace DIR` runs the serving process under tracemalloc (bench/traced_serve.py):
at each moment it dumps a snapshot and counts live objects by type, and the script prints what grew
since the start by source file and package (tracemalloc slows the server and adds to its RSS: read
those tables for where, not for how much). To measure another checkout with the same script, put it
first on PYTHONPATH (`PYTHONPATH=/path/to/old python -m bench.memory`).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

TOKEN = "bench-admin-token-of-the-memory-bench"
GOAL_MB = 150.0
WORDS = "alder birch cedar dogwood elm fir ginkgo hazel juniper larch maple oak pine rowan spruce yew".split()
MOMENTS = ("started", "after writing", "after reading and searching each KB", "after a restart, each touched")


def rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def mapped_mb(pid: int | None) -> dict[str, float]:
    """The process's RSS by what is mapped (from /proc/PID/smaps): the heap and other anonymous
    memory (malloc's arenas, Python's), shared libraries, index segments, git packs, other files."""
    out: dict[str, float] = {}
    if pid is None:
        return out
    kind = "anonymous"
    try:
        lines = Path(f"/proc/{pid}/smaps").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        head = line.split(None, 6)
        if head and "-" in head[0] and not head[0].endswith(":"):
            name = head[5] if len(head) > 5 else ""
            kind = (
                "heap"
                if name == "[heap]"
                else "anonymous"
                if not name or name.startswith("[")
                else "libraries"
                if ".so" in name or "/bin/python" in name
                else "index segments"
                if name.endswith(".seg") or "/index/" in name
                else "git packs"
                if "/objects/pack/" in name
                else "other files"
            )
        elif head and head[0] == "Rss:":
            out[kind] = out.get(kind, 0.0) + int(head[1]) / 1024
    return out


def child_of(pid: int) -> int | None:
    """The first live child process of `pid` (the follower `kbserver serve` starts), if any."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            return int(stat.parent.name)
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def content(kb: int, i: int) -> str:
    words = " ".join(WORDS[(kb + i + k) % len(WORDS)] for k in range(12))
    return f"# note {i} of kb {kb}\n\n{words}. Remember item {i * 7919 % 1000} for later.\n"


def client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url + "/api/v1", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=300)


def fill(url: str, kb: int, files: int, per_write: int) -> str:
    slug = f"kb{kb:03d}"
    with client(url) as c:
        c.post("/kbs", json={"slug": slug}).raise_for_status()
        for start in range(0, files, per_write):
            batch = [
                {"path": f"notes/{i // 100:02d}/n{i:04d}.md", "mode": "create", "content": content(kb, i)}
                for i in range(start, min(files, start + per_write))
            ]
            c.post(f"/kbs/{slug}/write", json={"files": batch}).raise_for_status()
    return slug


def settle(url: str, slugs: list[str]) -> None:
    with client(url) as c:
        for slug in slugs:
            head = c.get(f"/kbs/{slug}").json()["head"]
            for _ in range(20):
                r = c.get(f"/kbs/{slug}/index", params={"wait_for": head, "timeout": 60})
                if r.json().get("covered"):
                    break
            else:
                raise RuntimeError(f"index of {slug} did not catch up")


def touch_each(url: str, slugs: list[str]) -> tuple[list[float], list[float]]:
    """Read and search each KB once; the wall time of each read (page, listing, file) and search, ms."""
    reads: list[float] = []
    searches: list[float] = []
    with client(url) as c:
        for n, slug in enumerate(slugs):
            for path in (f"/kbs/{slug}", f"/kbs/{slug}/files", f"/kbs/{slug}/files/notes/00/n0001.md"):
                t = time.perf_counter()
                c.get(path).raise_for_status()
                reads.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            c.get(f"/kbs/{slug}/search", params={"q": WORDS[n % len(WORDS)]}).raise_for_status()
            searches.append((time.perf_counter() - t) * 1000)
    return reads, searches


def _p50_p95(ms: list[float]) -> str:
    if not ms:
        return "-"
    ordered = sorted(ms)
    p95 = ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]  # nearest rank
    return f"{statistics.median(ordered):.1f} / {p95:.1f}"


@dataclass
class Row:
    moment: str
    serve_mb: float | None
    follower_mb: float | None
    serve_maps: dict[str, float]
    follower_maps: dict[str, float]
    touched: tuple[list[float], list[float]] = ([], [])  # ms of the reads and searches just before


def _mb(value: float | None) -> str:
    return f"{value:.0f}" if value is not None else "-"


class Server:
    """`kbserver serve` on `root` (optionally traced), its follower child and an optional worker."""

    def __init__(self, root: Path, env: dict[str, str], follower: str, trace: Path | None) -> None:
        self.root, self.env, self.follower, self.trace = root, env, follower, trace
        self.url = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self.worker: subprocess.Popen[bytes] | None = None

    @contextmanager
    def running(self) -> Iterator[Server]:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        run = [sys.executable, "-m", "bench.traced_serve", str(self.trace)] if self.trace else []
        cli = [sys.executable, "-m", "kbserver.cli"]
        self.proc = subprocess.Popen(
            [*(run or cli), "serve", "--data", str(self.root), "--port", str(port)],
            env=self.env,
            stdout=subprocess.DEVNULL,
        )
        if self.follower == "worker":
            self.worker = subprocess.Popen(
                [*cli, "worker", "--data", str(self.root)], env=self.env, stdout=subprocess.DEVNULL
            )
        try:
            for _ in range(1200):
                try:
                    if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if self.proc.poll() is not None:
                    raise RuntimeError("the server ended before answering")
                time.sleep(0.1)
            yield self
        finally:
            for proc in (self.proc, self.worker):
                if proc is not None and proc.poll() is None:
                    proc.terminate()
                    proc.wait(timeout=120)
            self.worker = None

    def follower_pid(self) -> int | None:
        if self.worker is not None:
            return self.worker.pid
        return child_of(self.proc.pid) if self.proc and self.follower == "child" else None

    def measure(self, moment: str) -> Row:
        assert self.proc is not None
        last = None
        for _ in range(
            60 if self.follower != "embedded" else 0
        ):  # a follower child just started is still importing: wait until it is steady
            now = rss_mb(self.follower_pid())
            if now is not None and last is not None and abs(now - last) < 0.5:
                break
            last = now
            time.sleep(0.5)
        if self.trace:  # the traced server dumps a snapshot for this moment
            done = self.trace / f"{len(list(self.trace.glob('*.done'))):02d}.done"
            os.kill(self.proc.pid, signal.SIGUSR1)
            for _ in range(6000):
                if done.exists():
                    break
                time.sleep(0.05)
            (self.trace / f"{done.stem}.moment").write_text(moment)
        follower = self.follower_pid()
        return Row(
            moment, rss_mb(self.proc.pid), rss_mb(follower), mapped_mb(self.proc.pid), mapped_mb(follower)
        )


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
    parser.add_argument("--follower", choices=("child", "embedded", "worker"), default="child")
    parser.add_argument("--clients", type=int, default=4, help="concurrent HTTP clients while writing")
    parser.add_argument(
        "--hot",
        type=int,
        default=0,
        help="then touch the first N KBs 3 times, timing the last 2 (a working set)",
    )
    parser.add_argument("--data", type=Path, default=None, help="keep the data folder here (reused if built)")
    parser.add_argument("--trace", type=Path, default=None, help="tracemalloc snapshots of the server here")
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="set in the server's environment"
    )
    args = parser.parse_args()

    root = args.data or Path(tempfile.mkdtemp(prefix="kbmem-"))
    built = (root / "kbs").is_dir() and any((root / "kbs").glob("*.git"))
    env = {
        **os.environ,
        "KBSERVER_ADMIN_TOKEN": TOKEN,
        "KBSERVER_SAMPLE": "false",
        "KBSERVER_FSYNC": "false",
        "KBSERVER_LOG_LEVEL": "WARNING",
        "KBSERVER_DRAIN_SECONDS": "0",
        "KBSERVER_FOLLOWER": args.follower,
    }
    env.update(item.split("=", 1) for item in args.env)
    if args.budget_mb is not None:
        env["KBSERVER_MEMORY_BUDGET_MB"] = str(args.budget_mb)
    if args.trace:
        shutil.rmtree(args.trace, ignore_errors=True)
        args.trace.mkdir(parents=True)
    server = Server(root, env, args.follower, args.trace)
    slugs = [f"kb{kb:03d}" for kb in range(args.kbs)]
    rows: list[Row] = []
    written = 0.0
    try:
        with server.running():
            rows.append(server.measure(MOMENTS[0]))
            t = time.perf_counter()
            if not built:
                with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
                    list(
                        pool.map(lambda kb: fill(server.url, kb, args.files, args.per_write), range(args.kbs))
                    )
            settle(server.url, slugs)
            written = time.perf_counter() - t
            rows.append(server.measure(MOMENTS[1]))
            touched = touch_each(server.url, slugs)
            rows.append(dataclasses.replace(server.measure(MOMENTS[2]), touched=touched))
        with server.running():
            settle(server.url, slugs)
            touched = touch_each(server.url, slugs)
            rows.append(dataclasses.replace(server.measure(MOMENTS[3]), touched=touched))
            if args.hot:  # the cost of a budget: a working set of `--hot` KBs, warmed once, then timed
                hot = slugs[: args.hot]
                touch_each(server.url, hot)
                again = [touch_each(server.url, hot) for _ in range(2)]
                touched = ([ms for r, _ in again for ms in r], [ms for _, s in again for ms in s])
                rows.append(
                    dataclasses.replace(server.measure(f"then {len(hot)} KBs touched 3x"), touched=touched)
                )
        print_tables(args, rows, written, built)
    finally:
        if args.data is None:
            shutil.rmtree(root, ignore_errors=True)


def print_tables(args: argparse.Namespace, rows: list[Row], written: float, built: bool) -> None:
    budget = f"{args.budget_mb} MB" if args.budget_mb is not None else "default"
    print(
        f"\nRSS, {args.kbs} KBs x {args.files} files ({args.per_write} per write, written and indexed in "
        f"{written:.0f} s{', reused' if built else ''}), memory budget {budget}, follower {args.follower}, "
        f"load {os.getloadavg()[0]:.1f}\n"
    )
    head = (
        f"{'when':<38} | {'serve MB':>8} | {'follower MB':>11} | {'goal MB':>7} | "
        f"{'read p50 / p95 ms':>17} | {'search p50 / p95 ms':>19}"
    )
    print(head)
    print("-" * len(head))
    for row in rows:
        reads, searches = row.touched
        print(
            f"{row.moment:<38} | {_mb(row.serve_mb):>8} | {_mb(row.follower_mb):>11} | {GOAL_MB:>7.0f} | "
            f"{_p50_p95(reads):>17} | {_p50_p95(searches):>19}"
        )
    kinds = ("heap", "anonymous", "libraries", "index segments", "git packs", "other files")
    for who in ("serve", "follower"):
        print(f"\n{who} RSS by mapping (MB)\n")
        head = f"{'when':<38} | " + " | ".join(f"{k:>14}" for k in kinds)
        print(head)
        print("-" * len(head))
        for row in rows:
            maps = row.serve_maps if who == "serve" else row.follower_maps
            print(f"{row.moment:<38} | " + " | ".join(f"{_mb(maps.get(k)):>14}" for k in kinds))
    if args.trace:
        report(args.trace)


def _package(filename: str) -> str:
    """`kbserver/index`, `whoosh`, `dulwich`, `mcp`, ... for a source file, `<other>` otherwise."""
    parts = Path(filename).parts
    for anchor in ("site-packages", "kbserver"):
        if anchor in parts:
            rest = parts[parts.index(anchor) + (1 if anchor == "site-packages" else 0) :]
            if rest and rest[0] == "kbserver" and len(rest) > 2:
                return "/".join(rest[:2])
            return rest[0] if rest else "<other>"
    return "<stdlib>" if "python3" in filename else "<other>"


def report(trace: Path) -> None:
    """What grew in the traced server since it started: by package and by file, and object counts."""
    import tracemalloc

    snaps = sorted(trace.glob("*.snapshot"))
    if len(snaps) < 2:
        return
    first = tracemalloc.Snapshot.load(str(snaps[0]))
    counts0 = json.loads(snaps[0].with_suffix(".types").read_text())
    for snap in snaps[1:]:
        moment = snap.with_suffix(".moment").read_text()
        now = tracemalloc.Snapshot.load(str(snap))
        diff = now.compare_to(first, "filename")
        by_package: dict[str, int] = {}
        for stat in diff:
            key = _package(stat.traceback[0].filename)
            by_package[key] = by_package.get(key, 0) + stat.size_diff
        total = sum(s.size for s in now.statistics("filename"))
        print(f"\ntraced Python memory {moment}: {total / 2**20:.1f} MB; grown since start, by package:")
        for key, size in sorted(by_package.items(), key=lambda kv: -kv[1])[:12]:
            print(f"  {size / 2**20:8.2f} MB  {key}")
        print("  by file:")
        for stat in diff[:12]:
            print(f"  {stat.size_diff / 2**20:8.2f} MB  {stat.traceback[0].filename}")
        counts = json.loads(snap.with_suffix(".types").read_text())
        grown = sorted(((counts[t] - counts0.get(t, 0), t) for t in counts), reverse=True)[:15]
        print("  live objects grown since start, by type: " + ", ".join(f"{t} +{n}" for n, t in grown))


if __name__ == "__main__":
    main()
