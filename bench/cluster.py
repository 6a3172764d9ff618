"""Several nodes against one: writes/s, index lag per node, and requests lost while a node dies.

Runs a throwaway PostgreSQL (tests/pg.py), kbserver nodes on one data folder with their own cache
folders, and HAProxy with deploy/haproxy.cfg in front (tests/cluster/harness.py), then prints, in
one run, side by side:
- writes/s through the balancer, 1 node vs 3 nodes, with the writers on distinct KBs and on one KB;
- each node's index lag (a write acknowledged -> that node's search covers it), p50/p95, after
  one write and wait that make the KB used on every node (`follow=served` follows only those);
- what the first search of a KB cold on its node waits (50 writes on node1, none searched there,
  then one search on node2 and on node3), against the search after it;
- requests that failed (no retry) while node2 was SIGKILLed and restarted, of all sent;
- where the CPU went while writing to distinct KBs: ms of CPU per acknowledged write of each
  process (each node's server and its follower child, HAProxy, PostgreSQL, this client), from
  /proc (utime + stime), and the cores all of them kept busy.

Each KB written to distinct is searched once through the balancer first, so its node serves it.

    python -m bench.cluster [--writers 12] [--seconds 6] [--set KBSERVER_X=value ...] [--only distinct]

`--only distinct` leaves out the writes to one KB and the node killed mid-run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from tests.cluster.harness import Balancer, Node, migrate, node_env
from tests.helpers import free_port
from tests.pg import PostgresServer, find_bindir

TOKEN = "bench-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds so far) of a live process, from /proc/PID/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK


def _descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            parents[int(entry.name)] = st[0]
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        kids = [p for p, parent in parents.items() if parent == pid]
        found += kids
        todo += kids
    return found


def _cpu(pids: list[int]) -> float:
    return sum(st[1] for pid in pids if (st := _stat(pid)) is not None)


def cpu_snapshot(nodes: list[Node], balancer: Balancer, pg: PostgresServer) -> dict[str, float]:
    """CPU seconds so far of each process of the run (a process that ended meanwhile is not counted)."""
    out: dict[str, float] = {}
    for node in nodes:
        assert node.proc is not None
        out[f"{node.name} server"] = _cpu([node.proc.pid])
        out[f"{node.name} follower"] = _cpu(_descendants(node.proc.pid))
    assert balancer.proc is not None
    out["haproxy"] = _cpu([balancer.proc.pid])
    postmaster = int(Path(pg.pgdata, "postmaster.pid").read_text().split()[0])
    out["postgres"] = _cpu([postmaster, *_descendants(postmaster)])
    out["bench client"] = _cpu([os.getpid()])
    return out


def start(folder: Path, url: str, count: int, extra: dict[str, str]) -> tuple[list[Node], Balancer]:
    data, logs = folder / "data", folder / "logs"
    logs.mkdir(parents=True)
    lb_port = free_port()
    nodes = [
        Node(
            f"node{n}",
            data,
            logs,
            {**node_env(url, str(folder / f"cache{n}"), TOKEN, f"127.0.0.1:{lb_port}"), **extra},
        )
        for n in range(1, count + 1)
    ]
    migrate(data, nodes[0].env)
    nodes[0].launch().wait_healthy()
    for node in nodes[1:]:
        node.launch()
    for node in nodes[1:]:
        node.wait_healthy()
    balancer = Balancer(logs, [nodes[n % count] for n in range(3)], lb_port).start()
    return nodes, balancer


def stop(nodes: list[Node], balancer: Balancer) -> None:
    balancer.stop()
    for node in nodes:
        node.stop()


def writes_per_second(
    url: str, slugs: list[str], writers: int, seconds: float, tag: str
) -> tuple[float, int]:
    """Writers creating files through the balancer for `seconds`; (acknowledged writes/s, failures)."""
    done, failed = [0], [0]
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def write(n: int) -> None:
        slug = slugs[n % len(slugs)]
        i = 0
        with httpx.Client(base_url=url, headers=AUTH, timeout=60) as http:
            while time.monotonic() < stop_at:
                body = {"files": [{"path": f"{tag}/{n}/{i}.md", "mode": "create", "content": f"w {n} {i}\n"}]}
                i += 1
                try:
                    ok = http.post(f"/api/v1/kbs/{slug}/write", json=body).status_code == 200
                except httpx.HTTPError:
                    ok = False
                with lock:
                    done[0] += ok
                    failed[0] += not ok

    t0 = time.monotonic()
    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done[0] / (time.monotonic() - t0), failed[0]


def index_lag(url: str, nodes: list[Node], slug: str, samples: int) -> dict[str, list[float]]:
    """For each write (one at a time): how long until each node's index covers it, in ms. The first
    write is not counted: its waits make the KB used on every node."""
    lags: dict[str, list[float]] = {n.name: [] for n in nodes}
    with httpx.Client(base_url=url, headers=AUTH, timeout=60) as http:
        for i in range(-1, samples):
            body = {"files": [{"path": f"lag/{i}.md", "mode": "create", "content": f"lag {i}\n"}]}
            r = http.post(f"/api/v1/kbs/{slug}/write", json=body)
            acked = time.monotonic()
            version = r.json()["version"]

            threads = [threading.Thread(target=_wait, args=(n, slug, version, acked, lags)) for n in nodes]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if i < 0:
                lags = {n.name: [] for n in nodes}
    return lags


def cold_search(nodes: list[Node], writes: int) -> str:
    """`writes` writes to a new KB on node1, then the first search of it on each other node (where
    it is cold: never searched there) against the second; every write must be found."""
    slug = "cold"
    lines = []
    with httpx.Client(base_url=nodes[0].url, headers=AUTH, timeout=60) as http:
        http.post("/api/v1/kbs", json={"slug": slug}).raise_for_status()
        for i in range(writes):
            body = {"files": [{"path": f"c/{i}.md", "mode": "create", "content": f"cormorant {i}\n"}]}
            http.post(f"/api/v1/kbs/{slug}/write", json=body).raise_for_status()
    for node in nodes[1:]:
        took = []
        for _ in range(2):
            t0 = time.monotonic()
            r = httpx.get(
                f"{node.url}/api/v1/kbs/{slug}/search", params={"q": "cormorant"}, headers=AUTH, timeout=90
            )
            took.append((time.monotonic() - t0) * 1000)
            total = r.json()["total"] if r.status_code == 200 else f"HTTP {r.status_code}"
        lines.append(f"| {node.name} | {took[0]:.0f} | {took[1]:.0f} | {total} of {writes} |")
    head = f"| node (KB cold there, {writes} writes on node1) | first search ms | next search ms | found |"
    return "\n".join([head, "| --- | --- | --- | --- |", *lines])


def _wait(node: Node, slug: str, version: str, acked: float, lags: dict[str, list[float]]) -> None:
    q: dict[str, str | float] = {"wait_for": version, "timeout": 30}
    httpx.get(f"{node.url}/api/v1/kbs/{slug}/index", params=q, headers=AUTH, timeout=60)
    lags[node.name].append((time.monotonic() - acked) * 1000)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--writers", type=int, default=12)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--lag-samples", type=int, default=30)
    ap.add_argument("--cold-writes", type=int, default=50)
    ap.add_argument("--set", action="append", default=[], help="KBSERVER_X=value for every node")
    ap.add_argument("--only", choices=["distinct"], help="measure writes/s on distinct KBs only")
    args = ap.parse_args()
    extra = dict(item.split("=", 1) for item in args.set)
    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("needs PostgreSQL's binaries: apt-get install -y postgresql")
    pg = PostgresServer(bindir).start()
    rows: dict[str, dict[str, str]] = {}
    lags: dict[str, list[float]] = {}
    outage = cold = ""
    cpu: dict[int, tuple[dict[str, float], int, float]] = {}  # nodes -> (CPU s per process, writes, s)
    try:
        for count in (1, 3):
            with tempfile.TemporaryDirectory(prefix=f"kb-cluster-{count}-") as tmp:
                nodes, balancer = start(Path(tmp), pg.database(), count, extra)
                try:
                    slugs = [f"kb{n}" for n in range(6)]
                    for slug in [*slugs, "one"]:
                        httpx.post(
                            f"{balancer.url}/api/v1/kbs", json={"slug": slug}, headers=AUTH, timeout=60
                        )
                    for slug in slugs:  # each KB used on its node (the balancer sends it there)
                        httpx.get(
                            f"{balancer.url}/api/v1/kbs/{slug}/search",
                            params={"q": "x"},
                            headers=AUTH,
                            timeout=60,
                        )
                    before, t0 = cpu_snapshot(nodes, balancer, pg), time.monotonic()
                    distinct, _ = writes_per_second(balancer.url, slugs, args.writers, args.seconds, "d")
                    wall = time.monotonic() - t0
                    after = cpu_snapshot(nodes, balancer, pg)
                    used = {name: after[name] - before.get(name, 0.0) for name in after}
                    cpu[count] = (used, int(distinct * wall), wall)
                    one = 0.0
                    if args.only is None:
                        one, _ = writes_per_second(balancer.url, ["one"], args.writers, args.seconds, "o")
                    rows[f"{count} node{'s' if count > 1 else ''}"] = {
                        "distinct": f"{distinct:.1f}",
                        "one": f"{one:.1f}",
                    }
                    if count == 3:
                        lags = index_lag(balancer.url, nodes, "kb0", args.lag_samples)
                        cold = cold_search(nodes, args.cold_writes)
                    if count == 3 and args.only is None:
                        outage = _outage(balancer.url, nodes[1], slugs, args.writers, args.seconds)
                finally:
                    stop(nodes, balancer)
    finally:
        pg.stop()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"{args.writers} writers, {args.seconds:g} s per row, fsync on, through HAProxy; loadavg {load}")
    print("| nodes | writes/s, 6 distinct KBs | writes/s, one KB |")
    print("| --- | --- | --- |")
    for name, row in rows.items():
        print(f"| {name} | {row['distinct']} | {row['one']} |")
    base, three = rows["1 node"], rows["3 nodes"]
    one_ratio = float(three["one"]) / float(base["one"]) if float(base["one"]) else 0.0
    print(f"| ratio 3/1 | {float(three['distinct']) / float(base['distinct']):.2f}x | {one_ratio:.2f}x |")
    print()
    print_cpu(cpu)
    print()
    print("| node | index lag p50 ms | p95 ms |")
    print("| --- | --- | --- |")
    for name, values in lags.items():
        p95 = statistics.quantiles(values, n=20)[18] if len(values) >= 2 else values[0]
        print(f"| {name} | {statistics.median(values):.1f} | {p95:.1f} |")
    print()
    print(cold)
    if outage:
        print()
        print(outage)


def print_cpu(cpu: dict[int, tuple[dict[str, float], int, float]]) -> None:
    """Where the CPU went while writing to distinct KBs: ms per acknowledged write, per process."""
    print("| process | " + " | ".join(f"{n} node{'s' if n > 1 else ''}: CPU ms/write" for n in cpu) + " |")
    print("| --- |" + " --- |" * len(cpu))
    names = list(dict.fromkeys(name for used, _, _ in cpu.values() for name in used))
    for name in names:
        cells = [
            f"{used[name] * 1000 / max(writes, 1):.2f}" if name in used else ""
            for used, writes, _ in cpu.values()
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    totals = [f"{sum(used.values()) * 1000 / max(writes, 1):.2f}" for used, writes, _ in cpu.values()]
    print("| all | " + " | ".join(totals) + " |")
    cores = [f"{sum(used.values()) / wall:.2f}" for used, _, wall in cpu.values()]
    print("| cores busy | " + " | ".join(cores) + " |")
    per_write = [sum(used.values()) / max(writes, 1) for used, writes, _ in cpu.values()]
    if len(per_write) == 2 and per_write[0]:
        print(f"\nCPU per write, 3 nodes / 1 node: {per_write[1] / per_write[0]:.2f}x")


def _outage(url: str, victim: Node, slugs: list[str], writers: int, seconds: float) -> str:
    """Writers for `seconds` while `victim` is SIGKILLed after a third of it and restarted."""
    result: list[tuple[float, int]] = []
    runner = threading.Thread(
        target=lambda: result.append(writes_per_second(url, slugs, writers, seconds, "x"))
    )
    runner.start()
    time.sleep(seconds / 3)
    victim.kill()
    died = time.monotonic()
    victim.launch().wait_healthy()
    back = time.monotonic() - died
    runner.join()
    rate, failed = result[0]
    total = int(rate * seconds) + failed
    return (
        f"node2 SIGKILLed and back after {back:.1f} s: {failed} of {total} requests failed"
        " (no client retry; writers retrying with Idempotency-Key lose none, tests/cluster)"
    )


if __name__ == "__main__":
    main()
