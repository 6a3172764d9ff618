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

import logging
import time
from typing import Protocol

from kbserver.core.errors import KBError
from kbserver.services.parts import EventReader, Events, Watch
from kbserver.store.feed import Head, Record

__all__ = ["HeadLog", "SharedFeed"]

log = logging.getLogger(__name__)


class Listener(Protocol):
    def woken(self) -> bool: ...
    def check(self) -> None: ...
    def close(self) -> None: ...


class HeadLog(Protocol):
    """New heads of every node, in order (`kbserver.control.PostgresHeads`)."""

    def publish(self, slug: str, version: str) -> None: ...
    def since(self, after: int, limit: int = 1000) -> list[tuple[int, str, str]]: ...
    def last(self) -> int: ...
    def listen(self) -> Listener: ...


class SharedFeed:
    """`local` for this node's records, `heads` for the new heads of every node."""

    def __init__(self, local: Events, heads: HeadLog, *, catch_up_seconds: float = 1.0) -> None:
        self.local, self.heads, self.catch_up_seconds = local, heads, catch_up_seconds

    def head(self, slug: str, version: str) -> None:
        self.local.head(slug, version)  # this node's other processes (a worker) tail the local feed
        try:
            self.heads.publish(slug, version)
        except KBError as err:  # the version is on main already; other nodes find it when they reconcile
            log.warning("could not publish the new head of %s to other nodes: %s", slug, err.message)

    def covered(self, sink: str, slug: str, version: str) -> None:
        self.local.covered(sink, slug, version)

    def damaged(self, sink: str, slug: str) -> None:
        self.local.damaged(sink, slug)

    def wanted(self, sink: str, slug: str, version: str) -> None:
        self.local.wanted(sink, slug, version)  # this node's sinks: each node indexes into its own cache

    def reader(self) -> SharedReader:
        return SharedReader(self.local.reader(), self.heads, self.catch_up_seconds)


class SharedReader:
    """Tails the local feed and the shared log of heads (from now on)."""

    def __init__(self, local: EventReader, heads: HeadLog, catch_up_seconds: float) -> None:
        self._local, self._heads, self._every = local, heads, catch_up_seconds
        self._listener = heads.listen()
        self._next = 0.0
        self._last: int | None = None
        self._lost = False
        try:
            self._last = heads.last()
        except KBError:
            self._lost = True

    def poll(self) -> tuple[list[Record], bool]:
        records, rotated = self._local.poll()
        now = time.monotonic()
        if not self._listener.woken() and now < self._next:
            return records, rotated
        self._next = now + self._every
        try:
            self._listener.check()
        except KBError:
            pass  # woken() connects again; meanwhile the table is read every catch_up_seconds
        try:
            if self._last is None:
                self._last = self._heads.last()
            rows = self._heads.since(self._last)
        except KBError as err:
            if not self._lost:
                log.warning("cannot read the new heads of other nodes: %s", err.message)
            self._lost = True
            return records, rotated
        if self._lost:  # heads may have come and gone while the log could not be read
            log.info("reading the new heads of other nodes again")
            rotated, self._lost = True, False
        if rows:
            self._last = rows[-1][0]
            if len(rows) >= 1000:
                self._next = 0.0  # more to read at the next poll
        records += [Head(slug, version) for _, slug, version in rows]
        return records, rotated

    def watch(self) -> Watch | None:
        """None: the heads of other nodes come through the control store, which wakes nobody here."""
        return None

    def close(self) -> None:
        self._local.close()
        self._listener.close()
