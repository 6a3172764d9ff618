"""How long an index update handed in during the merge at a pause waits, in one process (issue 37).

    python -m bench.merge_lag [--rounds 3]
    PYTHONPATH=OTHER_CHECKOUT python bench/merge_lag.py   # the same against other code

A SearchIndex holds bench.peers_mix's 300 notes; each round indexes 300 more as the follower does
while they stream in (updates of 15, `merge(small=True)` every 8), copies the index twice, and
merges it (the pause before the next round). On the first copy the merge of the pause (`merge()`)
runs alone, then one update of 15 notes. On the second the merge runs in a thread and, a quarter of
the first merge's time in, the same update is handed in from the main thread, which (where `merge`
takes `stop`) first makes `stop()` True, as the follower does when commits wait. Prints the
merge's CPU and wall time alone, the update's time alone, and the wall time of the update handed
in during the merge: before, the update waited for the rest of the merge under the writer lock.
"""

from __future__ import annotations

import argparse
import inspect
import shutil
import tempfile
import threading
import time
from pathlib import Path

from bench.peers_mix import Mix
from kbserver.index import SearchIndex

UPDATE = 15  # notes an update holds while the mix streams in (as bench.index_mix)
SMALL_MERGE_EVERY = 8


def _timed_update(ix: SearchIndex, version: str, notes: dict[str, str]) -> float:
    t = time.perf_counter()
    ix.update(version, notes, [])
    return time.perf_counter() - t


def _during(folder: Path, burst: dict[str, str], after: float, stoppable: bool) -> tuple[float, bool]:
    """The update's wall time when handed in `after` seconds into a merge of `folder`'s index, and
    whether the merge gave way."""
    ix = SearchIndex(folder)
    waits = threading.Event()
    merged: list[bool] = []

    def merge() -> None:
        merged.append(ix.merge(stop=waits.is_set) if stoppable else ix.merge())

    thread = threading.Thread(target=merge)
    thread.start()
    time.sleep(after)
    waits.set()  # what the follower's worker does when a commit comes
    took = _timed_update(ix, "burst", burst)
    thread.join()
    ix.close()
    return took, merged == [False]


def run(rounds: int) -> list[tuple[int, int, float, float, float, float, bool]]:
    """(round, notes, merge CPU s, merge wall s, update alone s, update during the merge s,
    whether the merge gave way) of each round."""
    mix = Mix()
    stoppable = "stop" in inspect.signature(SearchIndex.merge).parameters
    out = []
    with tempfile.TemporaryDirectory(prefix="kbmergelag-") as tmp:
        live = Path(tmp) / "ix"
        ix = SearchIndex(live)
        first = mix.batch(-1, 300, 0, 0, prefix="pre/")
        ix.update("v0", {n.path: n.text for n in first.notes}, [])
        ix.merge()
        version = 0
        for r in range(rounds):
            items = [(n.path, n.text) for n in mix.batch(r, 300, 0, 0).notes]
            for k, start in enumerate(range(0, len(items), UPDATE), 1):
                version += 1
                ix.update(f"v{version}", dict(items[start : start + UPDATE]), [])
                if k % SMALL_MERGE_EVERY == 0:
                    ix.merge(small=True)
            burst = {f"burst{r}/n{i}.md": text for i, (_, text) in enumerate(items[:UPDATE])}
            alone, during = Path(tmp) / f"alone{r}", Path(tmp) / f"during{r}"
            shutil.copytree(live, alone)
            shutil.copytree(live, during)

            a = SearchIndex(alone)
            cpu, wall = time.process_time(), time.perf_counter()
            a.merge()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            update_alone = _timed_update(a, "burst", burst)
            a.close()

            update_during, gave_way = _during(during, burst, wall / 4, stoppable)
            ix.merge()  # the pause of this round, on the live index
            out.append((r + 1, 300 * (r + 2), cpu, wall, update_alone, update_during, gave_way))
        ix.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of 300 creates")
    args = parser.parse_args()
    print(
        "| round | notes | merge CPU ms | merge wall ms | update alone ms | update during the merge ms "
        "| merge gave way |\n|---|---|---|---|---|---|---|"
    )
    for r, notes, cpu, wall, alone, during, gave in run(args.rounds):
        print(
            f"| {r} | {notes} | {cpu * 1000:.0f} | {wall * 1000:.0f} | {alone * 1000:.0f} "
            f"| {during * 1000:.0f} | {'yes' if gave else 'no'} |"
        )
    print(f"/proc/loadavg at the end: {Path('/proc/loadavg').read_text().strip()}")


if __name__ == "__main__":
    main()
