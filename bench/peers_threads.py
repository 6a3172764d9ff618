"""CPU per call of the mix by thread: a live `kbserver serve` and its follower child, over MCP.

    python -m bench.peers_threads [--rounds 2] [--spy FILE]

Starts one server with bench.peers_mix's 300 notes, runs `--rounds` rounds of the mix (300
creates, 100 appends, 200 questions) and prints, for the last round, each thread's user + system
time (`/proc/PID/task/TID/stat`) per create, per append and per question (each phase's settling
included), named by `py-spy dump`. `--spy FILE` also records the whole run with py-spy
(`record -s -t -r 200 --nonblocking -f raw`). Needs py-spy (`pip install py-spy`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.peers import POLL, TICK, Kbserver, _idle_rate, _settle, _tree
from bench.peers_mix import MIX, setup

_SPY = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))


def _threads(pid: int) -> dict[tuple[int, int], float]:
    """(process, thread) -> CPU seconds so far, for `pid` and every process below it."""
    out = {}
    for p in _tree(pid):
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[(p, int(task.name))] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def _names(pid: int) -> dict[int, str]:
    """thread id -> its Python name, from `py-spy dump` of each process."""
    names: dict[int, str] = {}
    for p in _tree(pid):
        try:
            dump = subprocess.run([_SPY, "dump", "--pid", str(p)], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        for m in re.finditer(r'Thread (\d+) \(\w+\): "([^"]*)"', dump.stdout):
            names[int(m.group(1))] = ("serve: " if p == pid else "child: ") + m.group(2)
    return names


async def _main(rounds: int, spy_file: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="kbthreads-") as tmp:
        data = Path(tmp) / "data"
        token, _ = setup(data, MIX, 300)
        server = Kbserver("kbserver", data, token, {})
        async with server.running():
            server.idle = await _idle_rate(server)
            spy = None
            if spy_file:
                command = [_SPY, "record", "-p", str(server.pid), "-s", "-t", "-r", "200", "--nonblocking"]
                spy = subprocess.Popen([*command, "-f", "raw", "-o", spy_file], stdout=subprocess.DEVNULL)
                await asyncio.sleep(2)
            marks: list[dict[tuple[int, int], float]] = []
            for r in range(rounds):
                batch = MIX.batch(r, 300, 100, 200)
                await _settle(server)
                marks = [_threads(server.pid)]
                for note in batch.notes:
                    await server.create(note.path, note.text)
                while not await server.search(batch.last_item):
                    await asyncio.sleep(POLL)
                await _settle(server)
                marks.append(_threads(server.pid))
                for note, line, sha in batch.appends:
                    await server.append(note.path, line, sha)
                await _settle(server)
                marks.append(_threads(server.pid))
                for query in batch.queries:
                    await server.search(query)
                marks.append(_threads(server.pid))
                print(f"round {r + 1}/{rounds} done (load {os.getloadavg()[0]:.1f})", flush=True)
            names = _names(server.pid)
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(timeout=120)
    calls = (300, 100, 200)
    print("| process / thread | per create ms | per append ms | per question ms |\n|---|---|---|---|")
    totals = [0.0, 0.0, 0.0]
    for key in sorted(marks[-1]):
        per = [(marks[k + 1].get(key, 0) - marks[k].get(key, 0)) / calls[k] * 1000 for k in range(3)]
        totals = [t + v for t, v in zip(totals, per, strict=True)]
        if sum(per) > 0.01:
            print(f"| {names.get(key[1], key[1])} | " + " | ".join(f"{v:.2f}" for v in per) + " |")
    print("| total | " + " | ".join(f"{v:.2f}" for v in totals) + " |")
    print(f"/proc/loadavg at the end: {Path('/proc/loadavg').read_text().strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the mix (the last is shown)")
    parser.add_argument("--spy", default=None, help="also record the run with py-spy into this raw file")
    args = parser.parse_args()
    asyncio.run(_main(args.rounds, args.spy))


if __name__ == "__main__":
    main()
