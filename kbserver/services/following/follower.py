"""The follower: turns new heads of main into tree diffs for sinks (the search index, vectors, ...).

Each sink records the version it covers in its own storage, so a restart resumes from there and a
rebuild is a diff from nothing. New heads come from this process's writers (`notify`) and from the
data folder's feed, which every process appends to. One process per data folder follows at a time
(it holds `follower.lock`); the others stand by, learn the sinks' progress from the feed, and take
over when the lock frees. Readers never repair a sink: they `report_damaged`, the follower rebuilds.

Each sink has a thread of its own: a slow sink (embedding costs tens of milliseconds a passage)
never holds up a fast one (the keyword index), so a write is searchable by its words as soon as the
index has it, whatever the vectors are doing.

The follower's work must not slow the requests that cause it, and must not fall far behind them
either (kbserver.services.following.sink_worker.Pace). While a sink is close behind, its work runs at a lower
OS scheduling priority (`nice`, on Linux, where a thread is a task of its own), so a request wanting
a core gets it first; and while commits come close together it lets them settle (`batch_seconds`):
it waits until none came for a quarter of that, at most all of it, then applies them as one delta
(one Whoosh update for several commits costs little more than one; each costs ~10 ms of GIL). The
first commit after a pause is applied at once. So is a version a reader waits for (`want`: a
search that must see its caller's write, `GET /index?wait_for=`; from another process through the
feed), and at the requests' priority: the waiting request lends the apply its own. Batching and
politeness save the requests CPU where nobody waits, and never make anybody wait. Once it is behind by
more than a bound (the oldest commit not applied older than `lag_seconds`, or `lag_commits`
waiting) it catches up at the requests' priority, everything pending in one delta, until nothing
waits.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kbserver.core.errors import KBError, NotFound
from kbserver.services.following.progress import Progress
from kbserver.services.following.sink_worker import Pace, SinkWorker, lower_thread_priority
from kbserver.services.parts import EventReader, Events, Repositories, Repository, Watch
from kbserver.store import Change
from kbserver.store.feed import Covered, Damaged, Head, Wanted

__all__ = ["Delta", "Follower", "NotLeading", "Pace", "Sink", "SinkDamaged", "lower_thread_priority"]

log = logging.getLogger(__name__)

RECONCILE_SECONDS = 60.0  # compare every KB's head with every sink now and then: the feed is a hint
LEADER_RETRY_SECONDS = 1.0  # a standby process tries to become the follower this often
# With a watch of the feed the loop wakes when a line comes; it still looks this often (a standby's
# try to lead, and anything the watch could not see).
WATCHED_POLL_SECONDS = 0.5
RETRY_SECONDS = (1.0, 2.0, 5.0, 15.0, 60.0)  # a failing sink is retried after these pauses


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


class NotLeading(Exception):
    """This process no longer follows main (another took a larger term): a sink's write is refused."""


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

    def idle(self, paused: bool) -> None:
        """Housekeeping off the apply path: at a short break between deltas (`paused` False: only
        what cannot wait, such as many small index segments), and once commits pause (True)."""
        ...

    def close(self) -> None: ...


@dataclass
class _Failure:
    attempts: int
    retry_at: float


class Follower:
    """Keeps every sink equal to main for every KB, in a background thread."""

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
    ) -> None:
        """`pace`: how the sinks keep out of the requests' way and how far behind they may fall
        (kbserver.services.following.sink_worker; default: at the requests' priority, each commit at once)."""
        self._repos = repos
        self._feed = feed
        self.sinks = list(sinks)
        self._progress = progress
        self._lock_path = lock_path
        self._poll = poll_seconds
        self._want_lead = lead
        self._pace = pace or Pace()
        self._lock_fd: int | None = None
        self._lead_lock = threading.Lock()  # the sink threads check and drop the lead concurrently
        self._term = 0  # the fencing token of this process's leadership: each new leader's is larger
        self._cond = threading.Condition()
        self._pending: set[str] = set()
        self._wanted: set[tuple[str, str, str]] = set()  # (sink, slug, version) a reader waits for
        self._rebuild: set[tuple[str, str]] = set()  # (sink, slug) reported damaged: rebuild
        self._failures: dict[tuple[str, str], _Failure] = {}
        self._locks: dict[tuple[str, str], threading.Lock] = {}  # (sink, slug): one catch-up at a time
        self._thread: threading.Thread | None = None
        self._workers: list[SinkWorker[Sink]] = []
        self._stopping = False
        self._rung = False  # the feed's watch saw a line come: poll the reader
        self._watch: Watch | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def leading(self) -> bool:
        """True while this process is the data folder's follower."""
        return self._lock_fd is not None

    def behind(self) -> dict[str, tuple[int, float]]:
        """Each sink's lag while this process follows: (commits waiting, age of the oldest in seconds)."""
        return {worker.sink.name: worker.lag() for worker in self._workers}

    def start(self) -> None:
        """Follow main in the background (or stand by when another process follows)."""
        if self._thread is not None:
            return
        self._stopping = False
        self._workers = [
            SinkWorker(sink, self._pace, self._poll, self._follow_sink, self._due, self._covers)
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
        self._release()

    def _try_lead(self) -> bool:
        with self._lead_lock:
            if self._lock_fd is not None:
                return True
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            try:
                term = _next_term(fd)
            except OSError as exc:  # the term cannot be recorded: leading without it is unfenced
                os.close(fd)  # the flock goes with it; the next lead try comes later
                log.warning("could not record a follower term in %s: %s", self._lock_path, exc)
                return False
            # leading only once the term is in the file: whoever sees `leading` may read it
            self._term, self._lock_fd = term, fd
        log.info("this process follows main (term %d; sinks: %s)", self._term, self._names())
        return True

    def _still_leading(self) -> bool:
        """Whether no other process took the lead since (its term would be larger): a flock on a
        network file system can be lost with the connection, so the leader checks before it writes.
        Under the lead lock: every sink thread checks, and two that find a larger term at once must
        not both close the file (the second close would hit a descriptor reused elsewhere)."""
        with self._lead_lock:
            fd = self._lock_fd
            if fd is None:
                return False
            try:
                if _read_term(fd) == self._term:
                    return True
            except OSError:  # the lock file cannot be read now (a network file system): do not write
                return False
            self._drop_lead()
        log.error("another process took over following main (term > %d); standing by", self._term)
        return False

    def _fence(self) -> None:
        """Raise NotLeading unless this process still leads with its term (a sink's last check)."""
        if not self._still_leading():
            raise NotLeading(f"another process took over following main (term > {self._term})")

    def _release(self) -> None:
        with self._lead_lock:
            self._drop_lead()

    def _drop_lead(self) -> None:
        """Close the lock file, which releases the flock (the lead lock held)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _names(self) -> str:
        return ", ".join(s.name for s in self.sinks)

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
            with self._cond:
                self._rebuild.add((sink, slug))
                self._pending.add(slug)
                self._cond.notify_all()
        else:
            self._feed.damaged(sink, slug)

    def want(self, sink: str, slug: str, version: str) -> None:
        """A reader starts waiting for `sink` to cover `version` of `slug`: apply it at once, at
        the requests' priority (here, or in the follower through the feed)."""
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
                commits = 0  # every commit, of any process, appends one Head to the feed
                now = time.monotonic()
                if not self.leading and self._want_lead and now >= next_lead_try:
                    next_lead_try = now + LEADER_RETRY_SECONDS
                    if self._try_lead():
                        next_reconcile = 0.0
                for record in records:
                    if isinstance(record, Covered):
                        if not self.leading:  # the follower's own lines are old news to itself
                            self._progress.record(record.sink, record.slug, record.version)
                    elif isinstance(record, Head):
                        slugs.add(record.slug)
                        commits += 1
                    elif isinstance(record, Damaged):
                        self._progress.forget(record.sink, record.slug)
                        with self._cond:
                            self._rebuild.add((record.sink, record.slug))
                        slugs.add(record.slug)
                    elif isinstance(record, Wanted):
                        wanted.add((record.sink, record.slug, record.version))
                if not self.leading:
                    continue
                if rotated or now >= next_reconcile:
                    slugs.update(self._repos.slugs())
                    next_reconcile = now + RECONCILE_SECONDS
                for worker in self._workers:  # each sink follows in its own thread
                    if slugs:
                        worker.add(slugs, commits)
                    hurried = [(slug, version) for sink, slug, version in wanted if sink == worker.sink.name]
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
        then needs no poll every `poll_seconds`: ~15 ms of CPU a second per idle process); None
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
    def _lock(self, sink: str, slug: str) -> threading.Lock:
        with self._cond:
            return self._locks.setdefault((sink, slug), threading.Lock())

    def _covers(self, sink: str, slug: str, version: str) -> bool:
        """Whether `sink` covers `version` of `slug` (a KB gone: as good as covered)."""
        try:
            return self._progress.covers(slug, version, [sink])
        except KBError:
            return True

    def _due(self, sink: str, now: float) -> set[str]:
        """The KBs whose failed catch-up of `sink` is due for a retry."""
        with self._cond:
            return {slug for (name, slug), f in self._failures.items() if name == sink and f.retry_at <= now}

    def _follow_sink(self, sink: Sink, slug: str) -> bool:
        """Bring one sink of one KB to main's head (in that sink's thread); True if it applied a delta."""
        if not self._still_leading():
            return False
        with self._cond:
            failure = self._failures.get((sink.name, slug))
            if failure is not None and failure.retry_at > time.monotonic():
                return False
            rebuild = (sink.name, slug) in self._rebuild
            self._rebuild.discard((sink.name, slug))
        try:
            applied = self._catch_up_one(sink, slug, rebuild, None, self._fence)
        except NotFound:
            return False  # the KB is gone
        except NotLeading:
            return False  # the new leader follows it (this process stands by, and said so)
        except Exception as e:
            attempts = failure.attempts + 1 if failure else 1
            pause = RETRY_SECONDS[min(attempts, len(RETRY_SECONDS)) - 1]
            with self._cond:
                self._failures[(sink.name, slug)] = _Failure(attempts, time.monotonic() + pause)
            self._progress.fail(sink.name, slug, f"{type(e).__name__}: {e}")
            log.exception(
                "sink %s failed on KB %s (attempt %d); retrying in %g s", sink.name, slug, attempts, pause
            )
            return False
        with self._cond:
            self._failures.pop((sink.name, slug), None)
        return applied

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
                self._catch_up_one(sink, slug, rebuild, progress, _unfenced)
        return head

    def _catch_up_one(
        self,
        sink: Sink,
        slug: str,
        rebuild: bool,
        progress: Callable[[str, int, int | None], None] | None,
        fence: Callable[[], None],
    ) -> bool:
        """One sink of `slug` to main's head, rebuilt when damaged; True if a delta was applied.
        `fence` is the delta's: the leader's term check (none for `kbserver reindex`)."""
        repo = self._repos.repo(slug)
        with self._lock(sink.name, slug):
            head = repo.head()
            if head is None:
                return False
            try:
                return self._catch_up_sink(sink, slug, head, rebuild, progress, fence)
            except SinkDamaged as e:
                fence()  # a stale leader resets nothing
                log.warning("sink %s of KB %s is damaged (%s); rebuilding it", sink.name, slug, e)
                self._progress.record(sink.name, slug, None)
                sink.reset(slug)
                return self._catch_up_sink(sink, slug, head, True, progress, fence)

    def _catch_up_sink(
        self,
        sink: Sink,
        slug: str,
        head: str,
        rebuild: bool,
        progress: Callable[[str, int, int | None], None] | None,
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


def _unfenced() -> None:
    """The fence of a catch-up outside the lead (`kbserver reindex`): none."""


def _read_term(fd: int) -> int:
    text = os.pread(fd, 32, 0).split(b"\n")[0].strip()
    return int(text) if text.isdigit() else 0


def _next_term(fd: int) -> int:
    """Record a new leadership term in the lock file (held): one more than the last one."""
    term = _read_term(fd) + 1
    data = b"%d\n" % term
    os.pwrite(fd, data, 0)
    os.ftruncate(fd, len(data))
    os.fsync(fd)
    return term


def _ancestor(repo: Repository, base: str, head: str) -> bool:
    try:
        return repo.resolve(base) == base and repo.reaches(head, base)
    except (KBError, KeyError):
        return False
