"""Catching a sink up with main: the tree diff from the version it records to the head, applied as a
`Delta`, a damaged sink rebuilt from nothing, a failing one retried after growing pauses.

Each sink records the version it covers in its own storage, so a restart resumes from there and a
rebuild is a diff from nothing. One catch-up of a (sink, KB) runs at a time; every write of a sink
passes the fence it is handed (the leader's term check, kbserver.services.following.leading).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kbserver.core.errors import KBError, NotFound
from kbserver.services.following.leading import NotLeading
from kbserver.services.following.progress import Progress
from kbserver.services.parts import Events, Repositories, Repository
from kbserver.store import Change

__all__ = ["CatchUp", "Delta", "Sink", "SinkDamaged", "unfenced"]

log = logging.getLogger(__name__)

RETRY_SECONDS = (1.0, 2.0, 5.0, 15.0, 60.0)  # a failing sink is retried after these pauses

Report = Callable[[str, int, int | None], None]  # (sink, done, total or None) of a long rebuild


class SinkDamaged(Exception):
    """A sink's storage for one KB cannot be read; the follower resets and rebuilds it."""


@dataclass(frozen=True)
class Delta:
    """What changed on main between `base` (None: nothing, a rebuild) and `version`."""

    slug: str
    version: str
    base: str | None
    changes: Sequence[Change]  # sorted by path; added/modified carry new_blob, deleted old_blob
    read: Callable[[str], bytes]  # a blob id's bytes
    progress: Callable[[int, int | None], None] | None = None  # long rebuilds: (done, total or None)
    # Raises NotLeading once another process took the lead: a sink calls it under its own write
    # lock, right before it commits, so a leader that lost its term meanwhile never writes.
    fence: Callable[[], None] = lambda: None


class Sink(Protocol):
    """Something derived from a KB's files that follows main."""

    name: str  # also its feed name: letters, digits, `_.-`

    def covered(self, slug: str) -> str | None:
        """The version this sink's storage records for `slug` (None: nothing). Raises SinkDamaged."""
        ...

    def apply(self, delta: Delta) -> None:
        """Apply `delta` and record `delta.version`, atomically, calling `delta.fence()` under the
        sink's write lock right before it commits (what it raises cancels the write). Raises
        SinkDamaged."""
        ...

    def reset(self, slug: str) -> None:
        """Remove this sink's storage for `slug` (damaged, or the KB is gone)."""
        ...

    def idle(self, paused: bool, stop: Callable[[], bool]) -> None:
        """Housekeeping off the apply path: at a short break between deltas (`paused` False: only
        what cannot wait, such as many small index segments), and once commits pause (True).
        `stop()` turns True once new commits wait: housekeeping that can be cut short should give
        up soon after (and is called again at the next pause), so they are not held back."""
        ...

    def close(self) -> None: ...


@dataclass
class _Failure:
    attempts: int
    retry_at: float


class CatchUp:
    """Brings one sink of one KB to main's head; remembers failures (retried later) and the
    (sink, KB)s reported damaged (rebuilt at their next catch-up)."""

    def __init__(self, repos: Repositories, feed: Events, progress: Progress) -> None:
        self._repos, self._feed, self._progress = repos, feed, progress
        self._lock = threading.Lock()
        self._rebuild: set[tuple[str, str]] = set()  # (sink, slug) reported damaged: rebuild
        self._failures: dict[tuple[str, str], _Failure] = {}
        self._locks: dict[tuple[str, str], threading.Lock] = {}  # (sink, slug): one catch-up at a time

    def rebuild(self, sink: str, slug: str) -> None:
        """Rebuild `sink` of `slug` from nothing at its next catch-up."""
        with self._lock:
            self._rebuild.add((sink, slug))

    def due(self, sink: str, now: float) -> set[str]:
        """The KBs whose failed catch-up of `sink` is due for a retry."""
        with self._lock:
            return {slug for (name, slug), f in self._failures.items() if name == sink and f.retry_at <= now}

    def follow(self, sink: Sink, slug: str, fence: Callable[[], None]) -> bool:
        """Bring one sink of one KB to main's head in the follower (a failure is recorded and retried
        later, never raised); True if it applied a delta."""
        with self._lock:
            failure = self._failures.get((sink.name, slug))
            if failure is not None and failure.retry_at > time.monotonic():
                return False
            rebuild = (sink.name, slug) in self._rebuild
            self._rebuild.discard((sink.name, slug))
        try:
            applied = self.one(sink, slug, rebuild, None, fence)
        except NotFound:
            return False  # the KB is gone
        except NotLeading:
            return False  # the new leader follows it (this process stands by, and said so)
        except Exception as e:
            attempts = failure.attempts + 1 if failure else 1
            pause = RETRY_SECONDS[min(attempts, len(RETRY_SECONDS)) - 1]
            with self._lock:
                self._failures[(sink.name, slug)] = _Failure(attempts, time.monotonic() + pause)
            self._progress.fail(sink.name, slug, f"{type(e).__name__}: {e}")
            log.exception(
                "sink %s failed on KB %s (attempt %d); retrying in %g s", sink.name, slug, attempts, pause
            )
            return False
        with self._lock:
            self._failures.pop((sink.name, slug), None)
        return applied

    def one(
        self, sink: Sink, slug: str, rebuild: bool, progress: Report | None, fence: Callable[[], None]
    ) -> bool:
        """One sink of `slug` to main's head, rebuilt when damaged; True if a delta was applied.
        `fence` is the delta's: the leader's term check (none for `kbserver reindex`)."""
        repo = self._repos.repo(slug)
        with self._lock:
            lock = self._locks.setdefault((sink.name, slug), threading.Lock())
        with lock:
            head = repo.head()
            if head is None:
                return False
            try:
                return self._sink(sink, slug, head, rebuild, progress, fence)
            except SinkDamaged as e:
                fence()  # a stale leader resets nothing
                log.warning("sink %s of KB %s is damaged (%s); rebuilding it", sink.name, slug, e)
                self._progress.record(sink.name, slug, None)
                sink.reset(slug)
                return self._sink(sink, slug, head, True, progress, fence)

    def _sink(
        self,
        sink: Sink,
        slug: str,
        head: str,
        rebuild: bool,
        progress: Report | None,
        fence: Callable[[], None],
    ) -> bool:
        repo = self._repos.repo(slug)
        if rebuild:  # a delta from nothing; the sink replaces what it had (the index swaps atomically)
            base = None
        else:
            base = sink.covered(slug)
            if base == head:
                self._progress.record(sink.name, slug, head)
                return False
        if base is not None and not _ancestor(repo, base, head):
            base = None  # not on main (the KB was recreated, the sink is foreign): start from nothing
        changes = repo.changes(base, head)
        step = None if progress is None else functools.partial(progress, sink.name)
        sink.apply(Delta(slug, head, base, changes, repo.blob, step, fence))
        self._progress.record(sink.name, slug, head)
        self._feed.covered(sink.name, slug, head)
        return True


def unfenced() -> None:
    """The fence of a catch-up outside the lead (`kbserver reindex`): none."""


def _ancestor(repo: Repository, base: str, head: str) -> bool:
    try:
        return repo.resolve(base) == base and repo.reaches(head, base)
    except (KBError, KeyError):
        return False
