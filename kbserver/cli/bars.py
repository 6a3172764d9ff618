"""Progress of the long commands (import, mount, reindex) on stderr, and the process's memory peak."""

from __future__ import annotations

import contextlib
import io
import resource
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

__all__ = ["LOG_EVERY_SECONDS", "memory_peak_mb", "progress_bar", "progress_bars", "status_line"]

LOG_EVERY_SECONDS = 10.0
"""When stderr is not a terminal, a plain status line per bar at most this often."""


def memory_peak_mb() -> float:
    """The largest resident size this process has had, in MB (Linux counts ru_maxrss in KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _duration(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def status_line(label: str, done: int, total: int | None, elapsed: float) -> str:
    """`label: done/total (p%), rate/s, ETA` (what a log shows of a bar), plain text."""
    rate = done / elapsed if elapsed > 0 else 0.0
    if total:
        left = f", about {_duration((total - done) / rate)} left" if rate > 0 and done < total else ""
        return f"{label}: {done}/{total} ({100 * done // total}%), {rate:,.0f}/s{left}"
    return f"{label}: {done}, {rate:,.0f}/s"


@contextlib.contextmanager
def progress_bars(
    stream: TextIO | None = None, every: float = LOG_EVERY_SECONDS
) -> Iterator[Callable[[str, int, int | None], None]]:
    """Progress bars on stderr (rich), one per label, each added when its first count arrives:
    done/total, the rate, the time spent and the time left.

    On a terminal they redraw in place. When stderr is a file or a pipe (a log) nothing is redrawn:
    a plain status line per bar every `every` seconds while it runs, and rich prints the final
    state once, a line per bar, only when the command succeeded. `stream`: stderr by default.
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TaskID,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.0f}/s" if speed else "", style="progress.data.speed")

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        Rate(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    console = Console(stderr=True) if stream is None else Console(file=stream)
    with Progress(*columns, console=console) as shown:
        tasks: dict[str, TaskID] = {}
        started: dict[str, float] = {}
        logged: dict[str, float] = {}
        plain = not console.is_terminal

        def update(label: str, done: int, total: int | None) -> None:
            now = time.monotonic()
            if label not in tasks:
                tasks[label] = shown.add_task(label, total=total)
                started[label] = logged[label] = now
            elif plain and now - logged[label] >= every and (total is None or done < total):
                logged[label] = now
                print(status_line(label, done, total, now - started[label]), file=console.file, flush=True)
            shown.update(tasks[label], completed=done, total=total)

        try:
            yield update
        except BaseException:
            # A refused command prints only its one `error: CODE: MESSAGE` line: no final bar.
            shown.live.transient = True
            if plain:
                shown.console.file = io.StringIO()
            raise


@contextlib.contextmanager
def progress_bar(label: str, total: int | None = None) -> Iterator[Callable[..., None]]:
    """One progress bar (see `progress_bars`), shown from the start."""
    with progress_bars() as shown:

        def update(done: int, of: int | None = None) -> None:
            shown(label, done, of if of is not None else total)

        update(0)
        yield update
