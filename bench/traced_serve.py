"""`kbserver serve` under tracemalloc, for bench/memory.py's `--trace DIR`.

    python -m bench.traced_serve DIR serve --data ... --port ...

On SIGUSR1 the process writes, numbered on from what DIR holds: `NN.snapshot` (a tracemalloc
snapshot), `NN.types` (live objects the garbage collector tracks, counted by type) and `NN.done`.
"""

from __future__ import annotations

import collections
import gc
import json
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType


def main() -> None:
    out = Path(sys.argv[1])
    tracemalloc.start(1)

    def dump(_sig: int, _frame: FrameType | None) -> None:
        n = len(list(out.glob("*.done")))
        gc.collect()
        tracemalloc.take_snapshot().dump(str(out / f"{n:02d}.snapshot"))
        counts = collections.Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.get_objects())
        (out / f"{n:02d}.types").write_text(json.dumps(dict(counts)))
        (out / f"{n:02d}.done").write_text("")

    signal.signal(signal.SIGUSR1, dump)
    from kbserver.cli import main as cli

    sys.exit(cli(sys.argv[2:]))


if __name__ == "__main__":
    main()
