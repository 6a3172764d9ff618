"""Benchmark of the control store's per-request calls: SQLite next to PostgreSQL, in one run.

Prints p50/p95 (microseconds) of the calls a request makes: the token lookup every API call makes
(the baseline, unchanged), and what the several-nodes work added: `/healthz`'s ping, the admin
session lookup, a failed login, publishing a new head. PostgreSQL is the throwaway server of
tests/pg.py (Debian's binaries) unless `--url` names one.

    python -m bench.control [--calls 2000] [--url postgresql://...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kbserver.control import ControlStore, PostgresControlStore, SqliteControlStore


def timed(fn: Callable[[], object], calls: int) -> tuple[float, float]:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e6)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95)]


def measure(store: ControlStore, calls: int) -> dict[str, tuple[float, float]]:
    store.add_agent("bob", "bob-token", None, ("context",), False)
    store.link("bob", "notes", "read_write")
    store.add_session("sid", time.time() + 3600)
    now = time.time()
    rows = {
        "agent_by_token (every API call; baseline)": timed(lambda: store.agent_by_token("bob-token"), calls),
        "ping (/healthz)": timed(store.ping, calls),
        "session_alive (every admin page)": timed(lambda: store.session_alive("sid", now), calls),
        "login_failed (a failed admin login)": timed(lambda: store.login_failed("10.0.0.1", now, 900), calls),
    }
    if isinstance(store, PostgresControlStore):
        rows["heads.publish (every commit, several nodes)"] = timed(
            lambda: store.heads.publish("notes", "a" * 40), calls
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--url", default=None, help="a PostgreSQL database (default: a throwaway server)")
    args = parser.parse_args()
    server = None
    url = args.url
    if url is None:
        from tests.pg import PostgresServer, find_bindir

        bindir = find_bindir()
        if bindir is None:
            sys.exit("error: not_found: PostgreSQL server binaries (apt-get install -y postgresql) or --url")
        server = PostgresServer(bindir).start()
        url = server.database()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sqlite = SqliteControlStore(Path(tmp) / "control.db")
            postgres = PostgresControlStore(url)
            try:
                lite, pg = measure(sqlite, args.calls), measure(postgres, args.calls)
            finally:
                sqlite.close()
                postgres.close()
    finally:
        if server is not None:
            server.stop()
    print(f"{'call':48} {'SQLite p50':>11} {'p95':>8} {'PostgreSQL p50':>15} {'p95':>8}  (µs)")
    for name, (p50, p95) in pg.items():
        l50, l95 = (f"{v:.0f}" for v in lite[name]) if name in lite else ("-", "-")
        print(f"{name:48} {l50:>11} {l95:>8} {p50:15.0f} {p95:8.0f}")


if __name__ == "__main__":
    main()
