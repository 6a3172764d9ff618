"""The follower's index work on the mix, in one process: CPU a note to update and to merge.

    python -m bench.index_mix [--rounds 2]

A SearchIndex holds bench.peers_mix's 300 notes (one update, then a merge); each round then
indexes the round's 300 new notes and its 100 appends as the follower does while they stream in:
updates of 15 notes, `merge(small=True)` after every 8 updates (a short pause amid writes) and
`merge()` at the end of each phase (commits paused). Prints the CPU (`time.process_time`) of the
updates and of the merges per note, by round and phase. Run it under two checkouts (PYTHONPATH)
one after the other to compare code.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.peers_mix import Mix
from kbserver.index import SearchIndex

UPDATE = 15  # notes a follower's update holds while the mix streams in (~500 ms of writes)
SMALL_MERGE_EVERY = 8  # updates between merges amid writes (services/following/indexing.py)


def run(rounds: int) -> list[tuple[int, str, int, float, float]]:
    """(round, phase, notes, update ms a note, merge ms a note) of each phase."""
    mix = Mix()
    out = []
    with tempfile.TemporaryDirectory(prefix="kbindexmix-") as tmp:
        ix = SearchIndex(Path(tmp) / "ix")
        try:
            first = mix.batch(-1, 300, 0, 0, prefix="pre/")
            ix.update("v0", {n.path: n.text for n in first.notes}, [])
            ix.merge()
            version = 0
            for r in range(rounds):
                batch = mix.batch(r, 300, 100, 0)
                phases = {
                    "create": [(n.path, n.text) for n in batch.notes],
                    "append": [(n.path, f"{n.text}\n{line}") for n, line, _ in batch.appends],
                }
                for phase, items in phases.items():
                    updating = merging = 0.0
                    for k, start in enumerate(range(0, len(items), UPDATE), 1):
                        version += 1
                        t = time.process_time()
                        ix.update(f"v{version}", dict(items[start : start + UPDATE]), [])
                        updating += time.process_time() - t
                        if k % SMALL_MERGE_EVERY == 0:
                            t = time.process_time()
                            ix.merge(small=True)
                            merging += time.process_time() - t
                    t = time.process_time()
                    ix.merge()
                    merging += time.process_time() - t
                    n = len(items)
                    out.append((r + 1, phase, n, updating / n * 1000, merging / n * 1000))
        finally:
            ix.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds of 300 creates and 100 appends")
    args = parser.parse_args()
    print("| round | phase | notes | update ms a note | merge ms a note |\n|---|---|---|---|---|")
    for r, phase, n, update, merge in run(args.rounds):
        print(f"| {r} | {phase} | {n} | {update:.2f} | {merge:.2f} |")
    print(f"/proc/loadavg at the end: {Path('/proc/loadavg').read_text().strip()}")


if __name__ == "__main__":
    main()
