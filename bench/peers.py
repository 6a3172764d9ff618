"""Side by side with a peer: a live `kbserver serve` and the official reference memory server, over MCP.

    python -m bench.peers [--notes 300] [--writes 300] [--searches 200] [--rounds 3]
                          [--neighbour-cpus 2] [--server-memory DIR] [--variant NAME:SETTING=VALUE,...]...
                          [--workload english|mix|english,mix] [--appends 100]

kbserver runs as users run it (`python -m kbserver.cli serve`, every KBSERVER_* setting of a
variant in its environment) and is called with the official SDK client over Streamable HTTP in its
default mode (protocol 2026-07-28, sessionless): `write_context` (a new file per call, fsync on,
one version each) and `search_context`. `@modelcontextprotocol/server-memory` (a JSONL file
rewritten per call, no fsync, no versions; stdio only) is called with the same client over stdio:
`create_entities` (one entity per call) and `search_nodes`. It is used only when present: this
script installs nothing. Add it with `npm install @modelcontextprotocol/server-memory` in some
folder and pass that folder as `--server-memory` (default: $KBBENCH_SERVER_MEMORY, else /work/peers).

Each server gets `--notes` generated notes first. Then `--rounds` rounds, the servers alternating
within each round (the machine's load varies more between runs than between servers): a burst of
`--writes` writes, sequential from one client; the time from the last write's answer until a search
finds its one word (polled every 20 ms: "last write searchable after"); the server's CPU until it
is idle again (its process and every child, from /proc/PID/stat: the write's share of indexing and
embedding included, the lag polls' searches taken out; once with the server's idle rate taken out,
once with it left in); then `--searches` searches. Prints p50/p95
per call, server CPU per call, the lag (median and worst round) and each variant's ratio to
server-memory. A variant's `source=DIR` runs the kbserver checkout in DIR (e.g. `git archive main`
unpacked) instead of this one: code before and after a change, side by side in one run.
`--neighbour-cpus N` runs `stress-ng --cpu N` (a CPU-bound neighbour) throughout. `--workload mix`
(or `english,mix`: both, one table each) runs bench.peers_mix's mixed workload instead: half Chinese
notes in nested folders, `--appends` appends and one- or two-word questions each round.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.mcp import TOKEN, WORDS, _free_port, _setup, _wait_healthy, _wait_indexed, percentiles, table
from bench.peer_memory import SERVER_MEMORY, ServerMemory

TICK = os.sysconf("SC_CLK_TCK")
POLL = 0.02


def _tree(pid: int) -> list[int]:
    """`pid` and every process below it."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return found


def cpu_seconds(pid: int) -> float:
    """CPU (user + system) used so far by `pid` and the processes below it."""
    total = 0
    for p in _tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICK


def _word(r: int, i: int) -> str:
    """A word no note has: letters only (the analyzers split digits off)."""
    letters = "bcdfghjklmnpqrstvwxz"
    n, out = r * 100_000 + i, ""
    while True:
        n, d = divmod(n, len(letters))
        out += letters[d]
        if n == 0:
            return "qx" + out


@dataclass
class Samples:
    write: list[float] = field(default_factory=list)
    search: list[float] = field(default_factory=list)
    lag: list[float] = field(default_factory=list)
    write_cpu: list[float] = field(default_factory=list)  # seconds per call, one per round
    write_cpu_total: list[float] = field(default_factory=list)  # the same, the idle rate not taken out
    idle: float = 0.0  # CPU seconds per second doing nothing
    search_cpu: list[float] = field(default_factory=list)
    append: list[float] = field(default_factory=list)  # the mix's appends
    append_cpu: list[float] = field(default_factory=list)
    found: list[int] = field(default_factory=list)  # hits of each of the mix's questions


class Kbserver:
    """A live `kbserver serve` on a data folder of its own."""

    def __init__(self, name: str, data: Path, token: str, settings: dict[str, str]) -> None:
        self.name, self.data, self.token = name, data, token
        self.settings = {k: v for k, v in settings.items() if k != "source"}
        self.source = settings.get("source")  # a checkout of kbserver to run instead of this one
        self.client: Any = None
        self.pid = 0
        self.idle = 0.0  # CPU seconds per second doing nothing

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        env = {
            **os.environ,
            "KBSERVER_ADMIN_TOKEN": TOKEN,
            "KBSERVER_SAMPLE": "false",
            "KBSERVER_LOG_LEVEL": "WARNING",
            **{f"KBSERVER_{k.upper()}": v for k, v in self.settings.items()},
        }
        if self.source:  # the server and its child import kbserver from there
            env["PYTHONPATH"] = self.source + os.pathsep + env.get("PYTHONPATH", "")
        command = [
            sys.executable,
            "-m",
            "kbserver.cli",
            "serve",
            "--data",
            str(self.data),
            "--port",
            str(port),
        ]
        # `python -m` puts the working directory first on sys.path, before PYTHONPATH: run a
        # `source` from its own folder, or a checkout there (this one) would shadow it.
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, cwd=self.source)
        self.pid = proc.pid
        try:
            _wait_healthy(url, proc)
            _wait_indexed(url)
            headers = {"Authorization": f"Bearer {self.token}"}
            async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60)) as hc:
                async with Client(streamable_http_client(f"{url}/mcp", http_client=hc)) as client:
                    self.client = client
                    yield
        finally:
            proc.terminate()
            proc.wait(timeout=60)

    async def write(self, r: int, i: int, text: str) -> None:
        args = {
            "files": [{"path": f"peers/r{r}/w{i:05d}.md", "mode": "create", "content": f"# fact\n\n{text}\n"}]
        }
        result = await self.client.call_tool("write_context", args)
        assert not result.is_error, result.content

    async def create(self, path: str, text: str) -> None:
        result = await self.client.call_tool(
            "write_context", {"files": [{"path": path, "mode": "create", "content": text}]}
        )
        assert not result.is_error, result.content

    async def append(self, path: str, text: str, sha256: str) -> None:
        change = {"path": path, "mode": "append", "content": text, "expected_sha256": sha256}
        result = await self.client.call_tool("write_context", {"files": [change]})
        assert not result.is_error, result.content

    async def search(self, query: str) -> int:
        result = await self.client.call_tool("search_context", {"query": query, "limit": 5})
        assert not result.is_error, result.content
        return len((result.structured_content or {}).get("hits", []))

    async def preload(self, texts: list[str]) -> None:
        pass  # bench.mcp._setup imported the notes before the server started


async def _settle(server: Any, quiet: float = 3.0, limit: float = 300.0) -> float:
    """Wait until `server`'s tree used no more CPU in `quiet` seconds than when idle (its polls of
    the feed, timers) plus 30 ms; its CPU then."""
    deadline = time.monotonic() + limit
    last = cpu_seconds(server.pid)
    while time.monotonic() < deadline:
        await asyncio.sleep(quiet)
        now = cpu_seconds(server.pid)
        if now - last <= server.idle * quiet + 0.03:
            return now
        last = now
    return last


async def _idle_rate(server: Any, window: float = 5.0) -> float:
    """CPU seconds per second `server` uses doing nothing (settled after its start first)."""
    server.idle = 0.05
    await _settle(server)
    start, cpu = time.monotonic(), cpu_seconds(server.pid)
    await asyncio.sleep(window)
    return (cpu_seconds(server.pid) - cpu) / (time.monotonic() - start)


async def _round(server: Any, r: int, writes: int, searches: int, out: Samples) -> None:
    t0, cpu0 = time.monotonic(), await _settle(server)
    word = ""
    for i in range(writes):
        word = _word(r, i)
        words = " ".join(WORDS[(r * 31 + i * 7 + k) % len(WORDS)] for k in range(12))
        start = time.perf_counter()
        await server.write(r, i, f"{words} {word}")
        out.write.append(time.perf_counter() - start)
    acked = time.perf_counter()
    polls = 0
    while not await server.search(word):
        polls += 1
        if time.perf_counter() - acked > 300:
            raise SystemExit(f"{server.name}: the last write was not searchable after 300 s")
        await asyncio.sleep(POLL)
    out.lag.append(time.perf_counter() - acked)
    cpu1 = await _settle(server)
    used = cpu1 - cpu0
    busy = used - server.idle * (time.monotonic() - t0)  # what doing nothing costs is no write's
    for i in range(searches):
        start = time.perf_counter()
        await server.search(WORDS[(r * 13 + i) % len(WORDS)])
        out.search.append(time.perf_counter() - start)
    cpu2 = cpu_seconds(server.pid)
    per_search = (cpu2 - cpu1) / searches  # the idle cost over a few seconds: well under a tick
    out.search_cpu.append(per_search)
    out.write_cpu.append(max(0.0, busy - (polls + 1) * per_search) / writes)
    # Taking the idle rate out credits the writes with whatever a variant spends doing nothing over
    # the burst and both settling windows (9 s or more): a change of idle cost would show as a
    # change of write cost. This figure keeps it in, so the two together tell them apart.
    out.write_cpu_total.append(max(0.0, used - (polls + 1) * per_search) / writes)


def _variant(spec: str) -> tuple[str, dict[str, str]]:
    """`NAME:SETTING=VALUE,...` as (NAME, {SETTING: VALUE})."""
    name, _, rest = spec.partition(":")
    settings = dict(item.split("=", 1) for item in rest.split(",") if item.strip())
    return name or "kbserver", {key.strip(): value.strip() for key, value in settings.items()}


def _notes(count: int) -> list[str]:
    """The texts bench.mcp._setup writes (for server-memory's preload: the same words)."""
    import random

    rng = random.Random(7)
    texts = []
    for i in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(15, 40))]
        if i % 50 == 0:
            words.append("zebra")
        texts.append(" ".join(words))
    return texts


async def _run(
    servers: list[Any], args: argparse.Namespace, workload: str, texts: list[str]
) -> dict[str, Samples]:
    from bench.peers_mix import MIX, mix_round

    results = {s.name: Samples() for s in servers}
    async with AsyncExitStack() as stack:
        for server in servers:
            await stack.enter_async_context(server.running())
            await server.preload(texts)
        for server in servers:
            server.idle = results[server.name].idle = await _idle_rate(server)
            print(f"{server.name}: {server.idle * 1000:.1f} ms of CPU per second when idle", flush=True)
        for r in range(args.rounds):
            batch = MIX.batch(r, args.writes, args.appends, args.searches) if workload == "mix" else None
            for server in servers if r % 2 == 0 else servers[::-1]:
                if batch is None:
                    await _round(server, r, args.writes, args.searches, results[server.name])
                else:
                    await mix_round(server, batch, results[server.name])
            print(f"{workload}: round {r + 1}/{args.rounds} done (load {os.getloadavg()[0]:.1f})", flush=True)
    return results


def _rows(results: dict[str, Samples], peer: str | None) -> list[tuple[object, ...]]:
    def ms(values: list[float]) -> float:
        return statistics.median(values) * 1000

    rows: list[tuple[object, ...]] = []
    measures = [
        ("write p50 ms", lambda s: percentiles(s.write, 50)[0]),
        ("write p95 ms", lambda s: percentiles(s.write, 95)[0]),
        ("server CPU per write ms", lambda s: ms(s.write_cpu)),
        ("server CPU per write, idle included, ms", lambda s: ms(s.write_cpu_total)),
        ("server CPU when idle, ms per s", lambda s: s.idle * 1000),
        ("append p50 ms", lambda s: percentiles(s.append, 50)[0] if s.append else 0.0),
        ("server CPU per append ms", lambda s: ms(s.append_cpu) if s.append_cpu else 0.0),
        ("search p50 ms", lambda s: percentiles(s.search, 50)[0]),
        ("search p95 ms", lambda s: percentiles(s.search, 95)[0]),
        ("server CPU per search ms", lambda s: ms(s.search_cpu)),
        ("last write searchable after, median ms", lambda s: ms(s.lag)),
        ("last write searchable after, worst ms", lambda s: max(s.lag) * 1000),
        (
            "questions with a hit, %",
            lambda s: 100.0 * sum(1 for n in s.found if n) / len(s.found) if s.found else 0.0,
        ),
    ]
    for label, measure in measures:
        row: tuple[object, ...] = (label,)
        values = {name: measure(s) for name, s in results.items()}
        row += tuple(values.values())
        if not any(values.values()):
            continue  # the English workload has no appends, no questions
        if peer is not None:
            base = values[peer]
            row += tuple(f"{v / base:.1f}x" if base else "-" for name, v in values.items() if name != peer)
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=300, help="notes each server holds before measuring")
    parser.add_argument("--writes", type=int, default=300, help="writes per burst (one burst a round)")
    parser.add_argument("--searches", type=int, default=200, help="searches per round")
    parser.add_argument("--appends", type=int, default=100, help="appends per round (the mix)")
    parser.add_argument(
        "--workload", default="english", help="english, mix, or both side by side: english,mix"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the servers alternating in each")
    parser.add_argument("--neighbour-cpus", type=int, default=0, help="run `stress-ng --cpu N` throughout")
    parser.add_argument(
        "--server-memory", type=Path, default=None, help="folder with server-memory installed"
    )
    parser.add_argument("--no-peer", action="store_true", help="kbserver variants only")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME:SETTING=VALUE,... (repeatable): kbserver variants",
    )
    args = parser.parse_args()
    variants = [_variant(v) for v in args.variant] or [("kbserver", {})]
    folder = args.server_memory or Path(os.environ.get("KBBENCH_SERVER_MEMORY", "/work/peers"))
    script = folder / SERVER_MEMORY
    peer = None
    if not args.no_peer:
        if shutil.which("node") and script.is_file():
            peer = "server-memory"
        else:
            print(
                f"server-memory not found ({script}): `npm install @modelcontextprotocol/server-memory`"
                " in a folder and pass it as --server-memory; measuring kbserver alone",
                flush=True,
            )
    workloads = [w.strip() for w in args.workload.split(",") if w.strip()]
    if not workloads or set(workloads) - {"english", "mix"}:
        parser.error("--workload: english, mix or both (english,mix)")
    neighbour = None
    results: dict[str, dict[str, Samples]] = {}
    if args.neighbour_cpus:
        neighbour = subprocess.Popen(["stress-ng", "--cpu", str(args.neighbour_cpus), "--quiet"])
    try:
        for workload in workloads:
            results[workload] = _workload(workload, variants, peer, script, args)
    finally:
        if neighbour is not None:
            neighbour.terminate()
            neighbour.wait(timeout=60)
    with open("/proc/loadavg") as f:
        load = f.read().strip()
    print(
        f"\n{args.rounds} rounds of {args.writes} writes and {args.searches} searches per server"
        f" (the mix: {args.appends} appends too), {args.notes} notes first, {os.cpu_count()} CPUs,"
        f" neighbour: stress-ng --cpu {args.neighbour_cpus or 0};"
        f" /proc/loadavg at the end: {load}"
    )
    for name, settings in variants:
        print(f"{name}: {', '.join(f'{k}={v}' for k, v in settings.items()) or 'the defaults'}")
    for workload, found in results.items():
        header: tuple[str, ...] = (f"{workload}, per call", *found)
        if peer is not None:
            header += tuple(f"{name} / {peer}" for name in found if name != peer)
        print(f"\n{table(header, _rows(found, peer))}")


def _workload(
    workload: str, variants: list[tuple[str, dict[str, str]]], peer: str | None, script: Path, args: Any
) -> dict[str, Samples]:
    """Every server through `workload`'s rounds, each on a data folder of its own."""
    from bench.peers_mix import MIX, setup

    with tempfile.TemporaryDirectory(prefix="kbpeers-") as tmp:
        base = Path(tmp) / "base"
        if workload == "mix":
            token, texts = setup(base, MIX, args.notes)
        else:
            token, texts = _setup(base, args.notes, 1)[0], _notes(args.notes)  # the static token
        servers: list[Any] = []
        for name, settings in variants:
            shutil.copytree(base, Path(tmp) / name)
            servers.append(Kbserver(name, Path(tmp) / name, token, settings))
        if peer is not None:
            (Path(tmp) / "peer").mkdir()
            servers.append(ServerMemory(script, Path(tmp) / "peer"))
        return asyncio.run(_run(servers, args, workload, texts))


if __name__ == "__main__":
    main()
