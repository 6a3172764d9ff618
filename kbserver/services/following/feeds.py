"""The feed of several nodes: this node's records in its local feed, new heads also in a shared log.

One interface (`Events`), two implementations: the data folder's `feed.log` alone (`store.feed.Feed`,
the embedded default: every process on one machine shares it), and `SharedFeed`, which keeps the
node-local records (what this node's sinks cover, damaged sinks, sinks waited for) in the node's
own feed and sends new heads through the control store as well (PostgreSQL: a table plus
LISTEN/NOTIFY), so the follower of every node hears of every node's commits. A lost notification
is caught up from the log within `catch_up_seconds`; a log that could not be read is reported as
`rotated`, after which the follower reconciles every KB.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Collection
from typing import Protocol

from kbserver.core.errors import KBError
from kbserver.services.parts import EventReader, Events, Watch
from kbserver.store.feed import Head, Record

__all__ = ["HeadLog", "SharedFeed"]

log = logging.getLogger(__name__)


class Listener(Protocol):
    def woken(self) -> bool: ...
    def wait(self, timeout: float) -> bool: ...
    def check(self) -> None: ...
    def close(self) -> None: ...


class HeadLog(Protocol):
    """New heads of every node, by id (`kbserver.control.PostgresHeads`); an id below the highest
    seen may still come for `gap_seconds` (ids are allocated before their rows commit)."""

    gap_seconds: float

    def publish(self, slug: str, version: str) -> None: ...
    def since(
        self, after: int, missing: Collection[int] = (), limit: int = 1000
    ) -> list[tuple[int, str, str]]: ...
    def last(self) -> int: ...
    def listen(self) -> Listener: ...


class SharedFeed:
    """`local` for this node's records, `heads` for the new heads of every node.

    A new head is published by a thread of this process, not by the request that made it: a write
    never waits for the control store (nor for another node) once its commit is on main. What waits
    is one line per KB (a newer head of a KB replaces its older one: a follower reads main, not the
    version), published again and again until the control store takes it."""

    RETRY_SECONDS = 1.0

    def __init__(self, local: Events, heads: HeadLog, *, catch_up_seconds: float = 1.0) -> None:
        self.local, self.heads, self.catch_up_seconds = local, heads, catch_up_seconds
        self._cond = threading.Condition()
        self._unpublished: dict[str, str] = {}  # slug -> its newest head not yet in the shared log
        self._publisher: threading.Thread | None = None

    def head(self, slug: str, version: str) -> None:
        self.local.head(slug, version)  # this node's other processes (a worker) tail the local feed
        with self._cond:
            self._unpublished.pop(slug, None)
            self._unpublished[slug] = version
            if self._publisher is None:
                self._publisher = threading.Thread(target=self._publish, name="kbserver-publish", daemon=True)
                self._publisher.start()
            self._cond.notify()

    def _publish(self) -> None:
        failing = False
        while True:
            with self._cond:
                while not self._unpublished:
                    self._cond.wait()
                slug, version = next(iter(self._unpublished.items()))
            try:
                self.heads.publish(slug, version)
            except KBError as err:  # on main already; other nodes hear of it once the store is back
                if not failing:
                    log.warning("cannot publish new heads to other nodes (retrying): %s", err.message)
                failing = True
                time.sleep(self.RETRY_SECONDS)
                continue
            if failing:
                log.info("publishing new heads to other nodes again")
                failing = False
            with self._cond:
                if self._unpublished.get(slug) == version:
                    del self._unpublished[slug]

    def covered(self, sink: str, slug: str, version: str) -> None:
        self.local.covered(sink, slug, version)

    def damaged(self, sink: str, slug: str) -> None:
        self.local.damaged(sink, slug)

    def wanted(self, sink: str, slug: str, version: str) -> None:
        self.local.wanted(sink, slug, version)  # this node's sinks: each node indexes into its own cache

    def earlier(self) -> list[Record]:
        return self.local.earlier()  # this node's records: the KBs used on this node

    def reader(self) -> SharedReader:
        return SharedReader(self.local.reader(), self.heads, self.catch_up_seconds)


class SharedReader:
    """Tails the local feed and the shared log of heads (from now on).

    The shared log is read by a thread of its own (woken by the listener, and every
    `catch_up_seconds`), so `poll()` never waits for the control store: a node cut off from
    PostgreSQL still indexes its own commits. Heads that pile up past `MAX_WAITING` unread are
    dropped for a `rotated` (the follower then reconciles every KB)."""

    MAX_WAITING = 10000
    MAX_GAPS = 1000

    def __init__(self, local: EventReader, heads: HeadLog, catch_up_seconds: float) -> None:
        self._local, self._heads, self._every = local, heads, catch_up_seconds
        self._lock = threading.Lock()
        self._found: list[Record] = []
        self._rotated = False
        self._gaps: dict[int, float] = {}  # ids below _last not seen yet -> until when to ask for them
        self._last: int | None = None
        self._lost = False
        try:
            self._last = heads.last()
        except KBError:
            self._lost = True
        self._listener = heads.listen()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kbserver-shared-heads", daemon=True)
        self._thread.start()

    def poll(self) -> tuple[list[Record], bool]:
        records, rotated = self._local.poll()
        with self._lock:
            found, self._found = self._found, []
            lost, self._rotated = self._rotated, False
        return records + found, rotated or lost

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            woken = self._listener.wait(self._every)
            if self._stop.is_set():
                return
            if not woken:  # quiet for a while: is the connection alive? (woken connects again)
                with contextlib.suppress(KBError):
                    self._listener.check()
                self._stop.wait(max(0.0, self._every - (time.monotonic() - started)))
            self._read()

    def _read(self) -> None:
        """Read the heads after the highest id seen and the gaps below it, page by page."""
        while not self._stop.is_set():
            try:
                if self._last is None:
                    self._last = self._heads.last()
                now = time.monotonic()
                self._gaps = {n: until for n, until in self._gaps.items() if until > now}
                rows = self._heads.since(self._last, self._gaps)
            except KBError as err:
                if not self._lost:
                    log.warning("cannot read the new heads of other nodes: %s", err.message)
                self._lost = True
                return
            except Exception:  # one the store did not foresee: logged, and this thread lives on
                log.exception("reading the new heads of other nodes failed; trying again")
                self._lost = True
                return
            heads = [Head(slug, version) for _, slug, version in rows]
            for n, _, _ in rows:
                if self._gaps.pop(n, None) is None and n > self._last:
                    missing = range(max(self._last + 1, n - self.MAX_GAPS), n)
                    self._gaps.update(dict.fromkeys(missing, now + self._heads.gap_seconds))
                    self._last = n
            self._deliver(heads)
            if len(rows) < 1000:
                return

    def _deliver(self, heads: list[Head]) -> None:
        with self._lock:
            if self._lost:  # heads may have come and gone while the log could not be read
                log.info("reading the new heads of other nodes again")
                self._rotated, self._lost = True, False
            if len(self._found) + len(heads) > self.MAX_WAITING:
                self._found, self._rotated = [r for r in self._found if not isinstance(r, Head)], True
            else:
                self._found += heads

    def watch(self) -> Watch | None:
        """None: the heads of other nodes come through the control store, which wakes nobody here."""
        return None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._local.close()
        self._listener.close()
