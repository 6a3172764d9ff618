"""The follower: turns new heads of main into tree diffs for sinks (the search index, vectors, ...).

Each sink records the version it covers in its own storage, so a restart resumes from there and a
rebuild is a diff from nothing. New heads come from this process's writers (`notify`) and from the
data folder's feed, which every process appends to. One process per data folder follows at a time
(it holds `follower.lock`, kbserver.services.following.leading); the others stand by, learn the
sinks' progress from the feed, and take over when the lock frees. Readers never repair a sink: they
`report_damaged`, the follower rebuilds (kbserver.services.following.catching_up). With several
nodes it may follow only the KBs used on its node (kbserver.services.following.serving).

Each sink has a thread of its own: a slow sink (embedding costs tens of milliseconds a passage)
never holds up a fast one (the keyword index), so a write is searchable by its words as soon as the
index has it, whatever the vectors are doing.

The follower's work must not slow the requests that cause it, and must not fall far behind them
either (kbserver.services.following.sink_worker.Pace). While a sink is close behind, its work runs at a lower
OS scheduling priority (`nice`, on Linux, where a thread is a task of its own), so a request wanting
a core gets it first; and while commits come close together it lets them settle (`batch_seconds`):
it waits until none came for a quarter of that, at most all of it, then applies them as one delta
(one Whoosh update for several commits costs little more than one, and each holds the GIL). The
first commit after a pause is applied at once. So is a version a reader waits for (`want`: a
search that must see its caller's write, `GET /index?wait_for=`; from another process through the
feed), and at the requests' priority: the waiting request lends the apply its own. Batching and
politeness save the requests CPU where nobody waits, and never make anybody wait. Once it is behind by
more than a bound (the oldest commit not applied older than `lag_seconds`, or `lag_commits`
waiting) it catches up at the requests' priority, everything pending in one delta, until nothing
waits.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from kbserver.core.errors import KBError
from kbserver.services.following.catching_up import CatchUp, Delta, Sink, SinkDamaged, unfenced
from kbserver.services.following.leading import Lead, NotLeading, read_term
from kbserver.services.following.progress import Progress
from kbserver.services.following.serving import Warm
from kbserver.services.following.sink_worker import Pace, SinkWorker, lower_thread_priority
from kbserver.services.parts import EventReader, Events, Repositories, Watch
from kbserver.store.feed import Covered, Damaged, Head, Wanted

__all__ = ["Delta", "Follower", "NotLeading", "Pace", "Sink", "SinkDamaged", "lower_thread_priority"]

log = logging.getLogger(__name__)

RECONCILE_SECONDS = 60.0  # compare every KB's head with every sink now and then: the feed is a hint
LEADER_RETRY_SECONDS = 1.0  # a standby process tries to become the follower this often
# With a watch of the feed the loop wakes when a line comes; it still looks this often (a standby's
# try to lead, and anything the watch could not see).
WATCHED_POLL_SECONDS = 0.5


class Follower:
    """Keeps every sink equal to main for every KB (or, `served_idle_seconds` set, for every KB
    used on this node within that many seconds: kbserver.services.following.serving), in the
    background."""

    def __init__(
        self,
        repos: Repositories,
        feed: Events,
        sinks: Sequence[Sink],
        progress: Progress,
        lock_path: Path,
        *,
        poll_seconds: float = 0.05,
        lead: bool = True,
        pace: Pace | None = None,
        served_idle_seconds: float | None = None,
    ) -> None:
        """`pace`: how the sinks keep out of the requests' way and how far behind they may fall
        (kbserver.services.following.sink_worker; default: at the requests' priority, each commit
        at once). `served_idle_seconds`: follow only the KBs used here (None: every KB)."""
        self._repos = repos
        self._feed = feed
        self.sinks = list(sinks)
        self._progress = progress
        self._lead = Lead(lock_path)
        self._catch = CatchUp(repos, feed, progress)
        self._poll = poll_seconds
        self._want_lead = lead
        self._pace = pace or Pace()
        self._warm = Warm(served_idle_seconds) if served_idle_seconds is not None else None
        self._cond = threading.Condition()
        self._pending: set[str] = set()
        self._wanted: set[tuple[str, str, str]] = set()  # (sink, slug, version) a reader waits for
        self._thread: threading.Thread | None = None
        self._workers: list[SinkWorker[Sink]] = []
        self._stopping = False
        self._rung = False  # the feed's watch saw a line come: poll the reader
        self._watch: Watch | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def leading(self) -> bool:
        """True while this process is the data folder's follower."""
        return self._lead.leading

    @property
    def served(self) -> bool:
        """Whether only the KBs used here are followed."""
        return self._warm is not None

    def term(self) -> int:
        """The term of the process that follows now (this one's, else the one in the lock file)."""
        return self._lead.term if self.leading else read_term(self._lead.lock_path)

    def behind(self) -> dict[str, tuple[int, float]]:
        """Each sink's lag while this process follows: (commits waiting, age of the oldest in seconds)."""
        return {worker.sink.name: worker.lag() for worker in self._workers}

    def start(self) -> None:
        """Follow main in the background (or stand by when another process follows)."""
        if self._thread is not None:
            return
        self._stopping = False
        self._workers = [
            SinkWorker(sink, self._pace, self._poll, self._follow_sink, self._catch.due, self._covers)
            for sink in self.sinks
        ]
        for worker in self._workers:
            worker.thread.start()
        self._thread = threading.Thread(target=self._loop, name="kbserver-follower", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()  # the loop returns, and closes the feed's watch on its way out
        for worker in self._workers:
            worker.stop()
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None
        for worker in self._workers:
            worker.thread.join(timeout=60)
        self._workers = []
        self._lead.release()

    def _try_lead(self) -> bool:
        if not self._lead.try_lead():
            return False
        names = ", ".join(s.name for s in self.sinks)
        log.info("this process follows main (term %d; sinks: %s)", self._lead.term, names)
        return True

    # -- events ------------------------------------------------------------------------------------
    def notify(self, slug: str) -> None:
        """A commit happened on `slug` in this process. Only a leader is woken: a standby (the
        serving process while its child follows) has nothing to do with it, and reads what the
        leader made of it from the feed at its next poll; a new leader reconciles every KB."""
        if not self.leading:
            return
        with self._cond:
            self._pending.add(slug)
            self._cond.notify_all()

    def report_damaged(self, sink: str, slug: str) -> None:
        """A reader found `sink`'s storage of `slug` damaged: rebuild it (here or in the follower)."""
        self._progress.forget(sink, slug)
        if self.leading:
            self._catch.rebuild(sink, slug)
            with self._cond:
                self._wanted.add((sink, slug, ""))  # a use of the KB: followed, if it was not
                self._pending.add(slug)
                self._cond.notify_all()
        else:
            self._feed.damaged(sink, slug)

    def want(self, sink: str, slug: str, version: str) -> None:
        """A reader starts waiting for `sink` to cover `version` of `slug` (or reads it): apply it
        at once, at the requests' priority (here, or in the follower through the feed)."""
        if self.leading:
            with self._cond:
                self._wanted.add((sink, slug, version))
                self._cond.notify_all()
        else:
            self._feed.wanted(sink, slug, version)
            with self._cond:  # read the feed every `poll_seconds` now: the C line will come there
                self._cond.notify_all()

    # -- the loop ------------------------------------------------------------------------------------
    def _loop(self) -> None:
        reader = self._feed.reader()
        listener: threading.Thread | None = None
        next_reconcile = 0.0  # at once: catch up everything after a start or a takeover
        next_lead_try = 0.0
        try:
            while True:
                if listener is None and self.leading:  # a leader is woken by the feed's lines
                    listener = self._listen(reader)
                with self._cond:
                    if not self._pending and not self._wanted and not self._stopping and not self._rung:
                        self._cond.wait(timeout=self._pause(next_lead_try))
                    if self._stopping:
                        return
                    slugs, self._pending = set(self._pending), set()
                    wanted, self._wanted = self._wanted, set()
                    self._rung = False  # a line that comes from now on rings again
                records, rotated = reader.poll()
                heads: list[str] = []  # every commit, of any process, appends one Head to the feed
                now = time.monotonic()
                if not self.leading and self._want_lead and now >= next_lead_try:
                    next_lead_try = now + LEADER_RETRY_SECONDS
                    if self._try_lead():
                        next_reconcile = 0.0
                        if self._warm is not None:  # the KBs used lately, before this process led
                            used = {(r.sink, r.slug) for r in self._feed.earlier() if isinstance(r, Wanted)}
                            wanted |= {(sink, slug, "") for sink, slug in used}  # a use, no version
                for record in records:
                    if isinstance(record, Covered):
                        if not self.leading:  # the follower's own lines are old news to itself
                            self._progress.record(record.sink, record.slug, record.version)
                    elif isinstance(record, Head):
                        heads.append(record.slug)
                    elif isinstance(record, Damaged):
                        self._progress.forget(record.sink, record.slug)
                        self._catch.rebuild(record.sink, record.slug)
                        slugs.add(record.slug)
                        wanted.add((record.sink, record.slug, ""))  # a use of the KB, not a version
                    elif isinstance(record, Wanted):
                        wanted.add((record.sink, record.slug, record.version))
                if not self.leading:
                    continue
                slugs.update(heads)
                if rotated or now >= next_reconcile:
                    slugs.update(self._repos.slugs())
                    next_reconcile = now + RECONCILE_SECONDS
                if self._warm is not None:  # only the KBs used here; a KB used again catches up
                    slugs |= self._warm.use({slug for _, slug, _ in wanted}, now)
                    slugs = self._warm.keep(slugs, now)
                    heads = [slug for slug in heads if slug in slugs]
                for worker in self._workers:  # each sink follows in its own thread
                    if slugs:
                        worker.add(slugs, len(heads))
                    hurried = [
                        (slug, version)
                        for sink, slug, version in wanted
                        if sink == worker.sink.name and version
                    ]
                    if hurried:
                        worker.hurry(hurried)
        finally:
            if listener is not None:
                with self._cond:
                    if self._watch is not None:
                        self._watch.close()
                listener.join(timeout=60)
            reader.close()

    def _pause(self, next_lead_try: float) -> float:
        """How long the loop may wait for a ring before it reads the feed anyway (the cond held).

        A leader with a watch of the feed is rung for every line: it looks every 0.5 s besides, for
        what the watch cannot see (a watch that failed is gone: then every `poll_seconds`). A
        standby is not rung (its own commits would wake it for nothing): the feed tells it what the
        sinks cover, which matters to this process's waiters, so it reads the feed every
        `poll_seconds` while someone here waits, else at its next try to lead, and every 0.5 s."""
        if self.leading:
            return max(self._poll, WATCHED_POLL_SECONDS) if self._watch is not None else self._poll
        if self._progress.waited():
            return self._poll
        if self._want_lead:
            return min(WATCHED_POLL_SECONDS, max(0.0, next_lead_try - time.monotonic()))
        return WATCHED_POLL_SECONDS

    def _listen(self, reader: EventReader) -> threading.Thread | None:
        """Start a thread that rings the loop whenever the feed's watch sees a line come (the loop
        then needs no poll every `poll_seconds`, which costs an idle process CPU); None
        where the feed cannot be watched."""
        watch = reader.watch()
        if watch is None:
            return None
        with self._cond:
            self._watch = watch

        def ring() -> None:
            try:
                while watch.wait():
                    with self._cond:
                        self._rung = True
                        self._cond.notify_all()
            finally:
                with self._cond:
                    self._watch = None
                watch.release()

        thread = threading.Thread(target=ring, name="kbserver-follower-watch", daemon=True)
        thread.start()
        return thread

    # -- following one KB ----------------------------------------------------------------------------
    def _covers(self, sink: str, slug: str, version: str) -> bool:
        """Whether `sink` covers `version` of `slug` (a KB gone: as good as covered)."""
        try:
            return self._progress.covers(slug, version, [sink])
        except KBError:
            return True

    def _follow_sink(self, sink: Sink, slug: str) -> bool:
        """Bring one sink of one KB to main's head (in that sink's thread); True if it applied a delta."""
        if not self._lead.still_leading():
            return False
        return self._catch.follow(sink, slug, self._lead.fence)

    def catch_up(
        self,
        slug: str,
        *,
        rebuild: bool = False,
        sinks: Sequence[str] | None = None,
        progress: Callable[[str, int, int | None], None] | None = None,
    ) -> str | None:
        """Bring `sinks` (default: all) of `slug` to main's head now; returns that head.

        `progress(sink, done, total)` follows a long rebuild, each sink counting what it does
        (files indexed, passages embedded); total is None when a sink cannot tell.

        For the follower's own thread and for `kbserver reindex`; never called by a reader.
        Raises NotFound for an unknown KB and whatever a sink raises.
        """
        head = self._repos.repo(slug).head()
        for sink in self.sinks:
            if sinks is None or sink.name in sinks:
                self._catch.one(sink, slug, rebuild, progress, unfenced)
        return head
