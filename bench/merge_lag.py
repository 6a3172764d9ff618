"""How long an index update handed in during the merge at a pause waits, in one process (issue 37).

    python -m bench.merge_lag [--rounds 3]

Two SearchIndexes are given bench.peers_mix's 300 notes and, each round, 300 more as the follower
indexes them while they stream in (updates of 15, `merge(small=True)` every 8). At the round's end
the merge of the pause (`merge()`) runs alone in the first, then one update of 15 notes; in the
second the merge runs in a thread and, a quarter of the first merge's time in, the same update is
handed in from the main thread, which (where `merge` takes `stop`) first makes `stop()` True, as
the follower does when commits wait. Prints the merge's CPU and wall time alone, the update's time
alone, and the wall time of the update handed in during the merge: before, the update waited for
the rest of the merge under the writer lock. For other code, copy this file to its bench/ and run
it there (`cd OTHER && PYTHONPATH=$PWD python -m bench.merge_lag`).
"""

from __future__ import annotations

import argparse
import inspect
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


def _during(ix: SearchIndex, burst: dict[str, str], after: float, stoppable: bool) -> tuple[float, bool]:
    """The update's wall time when handed in `after` seconds into the merge of `ix`, and whether
    the merge gave way (then it is run again, to the end, as at the next pause)."""
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
    ix.merge()
    return took, merged == [False]


def run(rounds: int) -> list[tuple[int, int, float, float, float, float, bool]]:
    """(round, notes, merge CPU s, merge wall s, update alone s, update during the merge s,
    whether the merge gave way) of each round."""
    mix = Mix()
    stoppable = "stop" in inspect.signature(SearchIndex.merge).parameters
    out = []
    with tempfile.TemporaryDirectory(prefix="kbmergelag-") as tmp:
        # Two indexes given the same updates: the merge alone in one, the update during it in the other.
        alone, during = SearchIndex(Path(tmp) / "alone"), SearchIndex(Path(tmp) / "during")
        first = mix.batch(-1, 300, 0, 0, prefix="pre/")
        for ix in (alone, during):
            ix.update("v0", {n.path: n.text for n in first.notes}, [])
            ix.merge()
        version = 0
        for r in range(rounds):
            items = [(n.path, n.text) for n in mix.batch(r, 300, 0, 0).notes]
            for k, start in enumerate(range(0, len(items), UPDATE), 1):
                version += 1
                for ix in (alone, during):
                    ix.update(f"v{version}", dict(items[start : start + UPDATE]), [])
                    if k % SMALL_MERGE_EVERY == 0:
                        ix.merge(small=True)
            burst = {f"burst{r}/n{i}.md": text for i, (_, text) in enumerate(items[:UPDATE])}
            cpu, wall = time.process_time(), time.perf_counter()
            alone.merge()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            update_alone = _timed_update(alone, f"burst{r}", burst)
            alone.merge()
            update_during, gave_way = _during(during, burst, wall / 4, stoppable)
            out.append((r + 1, 300 * (r + 2), cpu, wall, update_alone, update_during, gave_way))
        alone.close()
        during.close()
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
