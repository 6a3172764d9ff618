"""Following only the KBs a node serves (several nodes: the balancer sends each KB to one node).

`Warm` is the follower's side: the KBs used lately (a search, an index wait, a damaged report: each
comes to it as a `want`, in-process or as a `W` line of the node's feed); only those are followed.
A follower that takes the lead (a start, a restart) takes every KB named by a `W` line still in the
node's feed as used: the serving process may have told before the follower read the feed.
A KB unused for `idle_seconds` goes cold: its heads are ignored and its index stays on disk as it
is, resuming from its recorded version when the KB is used again.

`Serving` is the serving process's side: every read of a sink tells the follower (at most every
`TOUCH_SECONDS` per KB and sink, and at once whenever a new follower took the lead, which knows of
no KB yet), and a read of a KB that may be cold waits, bounded, until the sink covers main's head,
so a search never answers from a stale index silently.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable

from kbserver.core.errors import KBError, Unavailable
from kbserver.services.following.progress import Progress
from kbserver.services.parts import Repositories

__all__ = ["COLD_WAIT_SECONDS", "TOUCH_SECONDS", "Serving", "Warm"]

log = logging.getLogger(__name__)

TOUCH_SECONDS = 30.0  # a KB in use is told to the follower again this often (well within idle_seconds)
COLD_WAIT_SECONDS = 30.0  # a read of a cold KB waits this long for the catch-up, then 503 `unavailable`


class Warm:
    """The KBs the follower follows, each with when it was last used (the follower's thread only)."""

    def __init__(self, idle_seconds: float) -> None:
        self.idle_seconds = idle_seconds
        self._used: dict[str, float] = {}

    def use(self, slugs: Iterable[str], now: float) -> set[str]:
        """Mark `slugs` used now; returns those that were cold (to catch up from their recorded version)."""
        woken = {slug for slug in slugs if not self._live(slug, now)}
        for slug in slugs:
            self._used[slug] = now
        if woken:
            log.info("following KB(s) %s again: used on this node", ", ".join(sorted(woken)))
        return woken

    def keep(self, slugs: Iterable[str], now: float) -> set[str]:
        """Those of `slugs` still warm; forgets the KBs idle for `idle_seconds`."""
        gone = [slug for slug, used in self._used.items() if now - used >= self.idle_seconds]
        for slug in gone:
            del self._used[slug]
        if gone:
            log.info(
                "KB(s) %s unused for %g s: no longer followed", ", ".join(sorted(gone)), self.idle_seconds
            )
        return {slug for slug in slugs if slug in self._used}

    def _live(self, slug: str, now: float) -> bool:
        used = self._used.get(slug)
        return used is not None and now - used < self.idle_seconds


class Serving:
    """The serving process's record of what it told the follower, per (KB, sink): when, and under
    which leader's term (a follower that restarted knows of no KB until told again)."""

    def __init__(
        self,
        repos: Repositories,
        progress: Progress,
        want: Callable[[str, str, str], None],
        term: Callable[[], int],
        idle_seconds: float,
        strict: Collection[str] = (),
    ) -> None:
        """`want(sink, slug, version)` tells the follower (here, or through the feed); `term()` is
        the current leader's term. A read of a `strict` sink that is not caught up within
        COLD_WAIT_SECONDS is refused; any other is answered from what the sink has (as while it lags)."""
        self._repos, self._progress, self._want, self._term = repos, progress, want, term
        self.idle_seconds, self._strict = idle_seconds, frozenset(strict)
        self._lock = threading.Lock()
        self._told: dict[tuple[str, str], tuple[int, float]] = {}  # (slug, sink) -> (term, when)

    def touch(self, slug: str, sinks: Iterable[str]) -> None:
        """`slug` is in use (an index wait): keep it followed, without waiting."""
        for sink in sinks:
            self._tell(slug, sink)

    def use(self, sink: str, slug: str) -> None:
        """A reader is about to read `sink` of `slug`: keep it followed, and when it may be cold on
        this node, wait until the sink covers main's head. Raises Unavailable past COLD_WAIT_SECONDS
        (a `strict` sink)."""
        cold, head = self._tell(slug, sink)
        if not cold or head is None:
            return
        if not self._progress.wait_blocking(slug, head, COLD_WAIT_SECONDS, [sink]):
            with self._lock:
                self._told.pop((slug, sink), None)  # the next read waits again
            if sink not in self._strict:
                return
            raise Unavailable(
                f"the {sink} of KB {slug} is catching up on this node; retry shortly", slug=slug
            )

    def _tell(self, slug: str, sink: str) -> tuple[bool, str | None]:
        """Tell the follower that `sink` of `slug` is used, when it is due; (whether it may be cold
        in the follower, main's head when told)."""
        now, term = time.monotonic(), self._term()
        with self._lock:
            told = self._told.get((slug, sink))
            cold = told is None or told[0] != term or now - told[1] >= self.idle_seconds
            if not cold and told is not None and now - told[1] < TOUCH_SECONDS:
                return False, None
            self._told[(slug, sink)] = (term, now)
        try:
            head = self._repos.repo(slug).head()
        except KBError:
            return False, None  # an unknown KB: the read answers what it answers for one
        if head is not None:
            try:
                self._want(sink, slug, head)
            except OSError as e:  # the follower hears of it at the next read
                with self._lock:
                    self._told.pop((slug, sink), None)
                log.warning("could not tell the follower that KB %s is used: %s", slug, e)
        return cold, head
