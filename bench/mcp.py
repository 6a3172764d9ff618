"""Benchmark MCP tool calls over Streamable HTTP against a live `kbserver` app, next to a no-op tool.

    python -m bench.mcp [--calls 200] [--workers 4] [--docs 300] [--mode auto|legacy] [--auth-only]

Starts the full app (create_app, as `kbserver serve` builds it) under uvicorn in a subprocess on a free
loopback port, with one extra tool, `noop`, that only this benchmark registers. Then drives it with the
SDK's own client (httpx2): `--calls` calls per tool, first from one client in sequence, then from
`--workers` clients at once (each its own connection and session). Prints p50/p95/p99 latency and
calls/s per tool. write_context appends a line to a file of its own per client (one version per
call, fsync on); search_context searches a KB of `--docs` generated notes.

The same agent also holds an OAuth access token (a connection, as the consent page makes one): the
`noop` rows with each token, interleaved round by round, give the per-call cost of an OAuth token
against a static one; the token check alone is timed in this process too (`--auth-only`: just these).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script (`python bench/mcp.py`), this file's folder would come first on sys.path and shadow
# the `mcp` SDK package with this very module.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import asyncio
import os
import random
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

TOKEN = "bench-admin-token"
PUBLIC = "http://localhost:9"  # the public URL (loopback http may be an issuer): tokens bound to PUBLIC/mcp
WORDS = (
    "memory agent note user prefers tea meeting project deadline review branch merge commit deploy server "
    "client request response cache token session schedule morning evening weekly report design test failure "
    "retry queue worker index search query result version history change file folder path document summary"
).split()


def noop() -> str:
    """Does nothing (benchmark baseline: the cost of one MCP round trip)."""
    return "ok"


def _serve(data: str, port: int) -> None:
    """The server process: the production app plus the `noop` tool."""
    import uvicorn

    from kbserver.app import create_app
    from kbserver.config import Settings
    from kbserver.wiring import open_services

    follower = (
        "worker" if os.environ.get("KBBENCH_FOLLOWER") == "worker" else "embedded"
    )  # bench/search_qa.py
    settings = Settings.from_env(  # KBSERVER_* variables set for a variant (bench/memory_mcp.py) apply
        data=Path(data), port=port, admin_token=TOKEN, sample=False, log_level="WARNING", follower=follower
    )
    services = open_services(settings.data, settings.options())
    app = create_app(settings, services, mcp_extra_tools=[noop])  # the shipped app has no noop tool
    try:
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    finally:
        services.close()


def _oauth_token(services: Any, agent: str) -> str:
    """An OAuth access token of a connection acting as `agent` (what Allow on the consent page and
    the token endpoint make), bound to PUBLIC/mcp."""
    from urllib.parse import parse_qs, urlsplit

    from kbserver.services.access import connections
    from kbserver.services.access.auth import ADMIN

    callback = "http://127.0.0.1:9/callback"
    connections.register(
        services, {"client_id": "bench", "client_name": "Bench", "redirect_uris": [callback]}
    )
    pending = connections.Pending("bench", callback, True, "c", None, PUBLIC + "/mcp", (), time.time() + 60)
    url = connections.allow(services, ADMIN, pending, PUBLIC, agent, "", {})
    code = parse_qs(urlsplit(url).query)["code"][0]
    return connections.exchange_code(services, code, ()).access


def _setup(data: Path, docs: int, workers: int) -> tuple[str, str]:
    """KB `bench` with `docs` notes and a file per client; returns the agent's static and OAuth tokens."""
    from kbserver.services import kbs
    from kbserver.services.access import agents
    from kbserver.services.access.auth import ADMIN
    from kbserver.wiring import open_services

    services = open_services(data)
    try:
        rng = random.Random(7)
        folder = data.parent / "corpus"
        for i in range(docs):
            path = folder / f"notes/{i // 100:02d}/n{i:05d}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            words = [rng.choice(WORDS) for _ in range(rng.randint(15, 40))]
            if i % 50 == 0:
                words.append("zebra")
            path.write_text(f"# note {i}\n\n{' '.join(words)}\n")
        for w in range(workers):
            (folder / f"log/worker-{w}.md").parent.mkdir(parents=True, exist_ok=True)
            (folder / f"log/worker-{w}.md").write_text(f"# worker {w}\n")
        kbs.import_folder(services, ADMIN, "bench", folder, description="benchmark KB")
        _, token = agents.create(services, ADMIN, "bencher")
        agents.link(services, ADMIN, "bencher", "bench", "read_write")
        return token, _oauth_token(services, "bencher")
    finally:
        services.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    import httpx2

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            if httpx2.get(url + "/healthz", timeout=2).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit("server did not become healthy within 60 s")


def _wait_indexed(url: str) -> None:
    """Let the server index the KB before measuring (it builds the index in the background at start)."""
    import httpx2

    headers = {"Authorization": f"Bearer {TOKEN}"}
    head = httpx2.get(f"{url}/api/v1/kbs/bench", headers=headers, timeout=30).json()["head"]
    params = {"wait_for": head, "timeout": 60}
    httpx2.get(f"{url}/api/v1/kbs/bench/index", params=params, headers=headers, timeout=90).raise_for_status()


def percentiles(samples: list[float], *which: int) -> list[float]:
    """The `which` percentiles (e.g. 50, 95) of `samples` (seconds), in milliseconds."""
    q = statistics.quantiles(sorted(s * 1000 for s in samples), n=100, method="inclusive")
    return [q[p - 1] for p in which]


def table(header: tuple[str, ...], rows: list[tuple[object, ...]]) -> str:
    """A Markdown table (floats with one decimal)."""
    cells = [[f"{c:.1f}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in cells])


@contextmanager
def live_server(
    data: Path, follower: str = "embedded", settings: dict[str, str] | None = None
) -> Iterator[str]:
    """The app (plus `noop`) serving `data` under uvicorn in a subprocess; yields its URL.

    `follower` embedded: the server follows main itself; worker: a `kbserver worker` beside it does.
    `settings` (name: value) are handed to both processes as KBSERVER_* variables.
    """
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    root = str(Path(__file__).resolve().parent.parent)
    env = {
        **os.environ,
        **{f"KBSERVER_{name.upper()}": value for name, value in (settings or {}).items()},
        "KBBENCH_FOLLOWER": follower,
        "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    command = [sys.executable, "-m", "bench.mcp", "--serve", str(data), str(port)]
    procs = [subprocess.Popen(command, cwd=root, env=env)]
    try:
        if follower == "worker":
            worker = [sys.executable, "-m", "kbserver.cli", "worker", "--data", str(data)]
            procs.append(subprocess.Popen(worker, cwd=root, env=env, stdout=subprocess.DEVNULL))
        _wait_healthy(url, procs[0])
        yield url
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=60)


def _stats(samples: list[float], wall: float) -> str:
    p50, p95, p99 = percentiles(samples, 50, 95, 99)
    return f"{p50:.1f} | {p95:.1f} | {p99:.1f} | {len(samples) / wall:.0f}"


Call = Callable[[Any, int, int], Awaitable[Any]]


async def _drive(
    url: str, token: str, mode: str, calls: int, workers: int, call: Call
) -> tuple[list[float], float]:
    """`calls` calls split over `workers` clients running at once; (latencies, wall seconds)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    samples: list[float] = []
    ready = asyncio.Barrier(workers + 1)
    done = asyncio.Barrier(workers + 1)

    async def worker(w: int, n: int) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60)) as hc:
            async with Client(streamable_http_client(f"{url}/mcp", http_client=hc), mode=mode) as client:
                for i in range(3):  # warm-up
                    await call(client, w, -1 - i)
                await ready.wait()
                for i in range(n):
                    start = time.perf_counter()
                    result = await call(client, w, i)
                    samples.append(time.perf_counter() - start)
                    if getattr(result, "is_error", False):
                        raise SystemExit(f"tool error: {result.content}")
                await done.wait()

    per = [calls // workers + (1 if w < calls % workers else 0) for w in range(workers)]
    tasks = [asyncio.create_task(worker(w, per[w])) for w in range(workers)]
    await ready.wait()
    start = time.perf_counter()
    await done.wait()
    wall = time.perf_counter() - start
    await asyncio.gather(*tasks)
    return samples, wall


async def _noop_call(client: Any, w: int, i: int) -> Any:
    return await client.call_tool("noop", {})


async def _tokens_side_by_side(url: str, tokens: dict[str, str], mode: str, calls: int) -> list[str]:
    """`noop` with each token, sequentially, in 10 interleaved rounds (so drift hits both alike)."""
    samples: dict[str, list[float]] = {name: [] for name in tokens}
    for _ in range(10):
        for name, token in tokens.items():
            got, _wall = await _drive(url, token, mode, max(1, calls // 10), 1, _noop_call)
            samples[name] += got
    rows = []
    for name, got in samples.items():
        p50, p95 = percentiles(got, 50, 95)
        rows.append(
            f"| noop, {name} | sequential | {p50:.2f} | {p95:.2f} | {statistics.mean(got) * 1000:.2f} |"
        )
    return rows


def _check_cost(data: Path, tokens: dict[str, str], rounds: int = 2000) -> list[str]:
    """The token check alone (KBTokenVerifier._verify, what /mcp runs per request), in this process,
    on the same control store: microseconds per check, median of 5 runs of `rounds` checks."""
    from kbserver.mcp.http import KBTokenVerifier
    from kbserver.wiring import open_services

    services = open_services(data)
    try:
        verifier = KBTokenVerifier(services, TOKEN, PUBLIC + "/mcp")
        rows = []
        for name, token in tokens.items():
            runs = []
            for _ in range(5):
                start = time.perf_counter()
                for _ in range(rounds):
                    verifier._verify(token, None)
                runs.append((time.perf_counter() - start) / rounds * 1e6)
            rows.append(f"| check, {name} | {statistics.median(runs):.0f} µs |")
        return rows
    finally:
        services.close()


async def _bench(url: str, token: str, mode: str, calls: int, workers: int) -> list[str]:
    noop_call = _noop_call

    async def write_call(client: Any, w: int, i: int) -> Any:
        return await client.call_tool(
            "write_context",
            {"files": [{"path": f"log/worker-{w}.md", "mode": "append", "content": f"- entry {i}\n"}]},
        )

    async def search_call(client: Any, w: int, i: int) -> Any:
        return await client.call_tool(
            "search_context", {"query": WORDS[(w * 7 + i) % len(WORDS)], "limit": 10}
        )

    async def read_call(client: Any, w: int, i: int) -> Any:
        return await client.call_tool("read_context_file", {"path": "log/worker-0.md"})

    rows = []
    for name, call in (
        ("noop (baseline)", noop_call),
        ("read_context_file", read_call),
        ("search_context", search_call),
        ("write_context", write_call),
    ):
        for n_workers in (1, workers):
            samples, wall = await _drive(url, token, mode, calls, n_workers, call)
            label = "sequential" if n_workers == 1 else f"{n_workers} concurrent clients"
            rows.append(f"| {name} | {label} | {_stats(samples, wall)} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="measured calls per tool and scenario")
    parser.add_argument("--workers", type=int, default=4, help="clients in the concurrent scenario")
    parser.add_argument("--docs", type=int, default=300, help="notes in the KB that search_context searches")
    parser.add_argument(
        "--mode", default="auto", help="client mode: auto (2026-07-28, sessionless) or legacy"
    )
    parser.add_argument("--auth-only", action="store_true", help="only the static-against-OAuth-token rows")
    parser.add_argument("--serve", nargs=2, metavar=("DATA", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve[0], int(args.serve[1]))
        return

    with tempfile.TemporaryDirectory(prefix="kbbench-") as tmp:
        data = Path(tmp) / "data"
        token, oauth = _setup(data, args.docs, args.workers)
        tokens = {"static token": token, "OAuth token": oauth}
        with live_server(data, settings={"public_url": PUBLIC}) as url:
            _wait_indexed(url)
            side = asyncio.run(_tokens_side_by_side(url, tokens, args.mode, args.calls))
            rows = (
                [] if args.auth_only else asyncio.run(_bench(url, token, args.mode, args.calls, args.workers))
            )
        checks = _check_cost(data, tokens)
    print(f"\n{args.calls} calls per row, client mode {args.mode}, {args.docs} notes, {os.cpu_count()} CPUs")
    print("| call | clients | p50 ms | p95 ms | mean ms |")
    print("|---|---|---|---|---|")
    for row in side:
        print(row)
    print("\n| token check alone (in process) | per check |")
    print("|---|---|")
    for row in checks:
        print(row)
    if rows:
        print("\n| tool | clients | p50 ms | p95 ms | p99 ms | calls/s |")
        print("|---|---|---|---|---|---|")
        for row in rows:
            print(row)


if __name__ == "__main__":
    main()
