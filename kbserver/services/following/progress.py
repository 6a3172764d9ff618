"""What each sink covers, per KB, and waiting for it: async (no thread per waiter) or blocking."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from kbserver.core import threads
from kbserver.core.errors import KBError
from kbserver.services.parts import Repositories

__all__ = ["Progress"]

log = logging.getLogger(__name__)

# Reads a sink's own record of the version it covers (None: nothing yet); may raise.
CoveredReader = Callable[[str, str], "str | None"]


class Progress:
    """The version each sink covers for each KB, fed by the follower (here or in another process).

    Unknown entries are read from the sink's own storage once (`read_covered`). Waiters are woken
    on every record for their KB; an async waiter is a future, never a thread. A wait that does not
    end at its first look tells `on_wait(sink, slug, version)` once for each sink that does not
    cover the version yet (the follower then applies that KB's commits at once).
    """

    on_wait: Callable[[str, str, str], None] | None = None
    # Told `(slug, sinks)` at each wait's first look: a wait is a use of the KB (serving.Serving).
    on_use: Callable[[str, Sequence[str]], None] | None = None

    def __init__(self, repos: Repositories, sinks: Sequence[str], read_covered: CoveredReader) -> None:
        self._repos = repos
        self.sinks = tuple(sinks)
        self._read = read_covered
        self._covered: dict[tuple[str, str], str | None] = {}
        self._errors: dict[tuple[str, str], str] = {}
        self._cond = threading.Condition()
        self._generation = 0  # bumped by every record: blocking waiters wait for it to move
        self._async: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]] = {}
        self._waits = 0  # waits under way, async or blocking (the standby follower reads the feed faster)

    # -- recording ----------------------------------------------------------------------------------
    def record(self, sink: str, slug: str, version: str | None) -> None:
        """`sink` now covers `version` of `slug` (None: it covers nothing, e.g. being rebuilt)."""
        with self._cond:
            self._covered[(sink, slug)] = version
            self._generation += 1
            if version is not None:
                self._errors.pop((sink, slug), None)
            self._cond.notify_all()
            waiters = self._async.pop(slug, [])
        for loop, future in waiters:
            loop.call_soon_threadsafe(_wake, future)

    def fail(self, sink: str, slug: str, message: str) -> None:
        with self._cond:
            self._errors[(sink, slug)] = message

    def forget(self, sink: str, slug: str) -> None:
        """Drop what is known, so the next look reads the sink's storage again."""
        with self._cond:
            self._covered.pop((sink, slug), None)

    # -- reading ------------------------------------------------------------------------------------
    def covered(self, sink: str, slug: str) -> str | None:
        """The version `sink` covers for `slug`; None when nothing, or when its storage is unreadable."""
        with self._cond:
            if (sink, slug) in self._covered:
                return self._covered[(sink, slug)]
        try:
            version = self._read(sink, slug)
        except Exception as e:  # a damaged sink covers nothing; the follower rebuilds it
            self.fail(sink, slug, f"{type(e).__name__}: {e}")
            return None
        with self._cond:
            return self._covered.setdefault((sink, slug), version)

    def error(self, sink: str, slug: str) -> str | None:
        """The last failure of `sink` on `slug`, until it covers a version again."""
        with self._cond:
            return self._errors.get((sink, slug))

    def covers(self, slug: str, version: str, sinks: Sequence[str] | None = None) -> bool:
        """True once every sink in `sinks` (default: all) covers `version` (a version on main)."""
        repo = None
        for sink in sinks or self.sinks:
            covered = self.covered(sink, slug)
            if covered is None:
                return False
            if covered == version:
                continue
            repo = repo or self._repos.repo(slug)
            try:
                if not repo.reaches(covered, version):
                    return False
            except (KeyError, KBError):  # a sink that records a version this KB lacks covers nothing
                return False
        return True

    # -- waiting ------------------------------------------------------------------------------------
    async def wait(self, slug: str, version: str, timeout: float, sinks: Sequence[str] | None = None) -> bool:
        """Wait until `sinks` cover `version` or `timeout` seconds pass; no thread is held meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        first = True
        with self._counted():
            while True:
                future: asyncio.Future[None] = loop.create_future()
                with self._cond:  # registered before checking, so no record slips between
                    self._async.setdefault(slug, []).append((loop, future))
                try:
                    # The check reads git objects: off the event loop, on a short-lived pool thread.
                    if await threads.run(self._look, slug, version, sinks, first):
                        return True
                    first = False
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        return False
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(future, remaining)
                finally:  # however it ends, a cancelled caller's included: no waiter is left behind
                    self._unregister(slug, future)

    def waiting(self, slug: str) -> int:
        """How many async waits on `slug` are registered now."""
        with self._cond:
            return len(self._async.get(slug, []))

    def waited(self) -> bool:
        """Whether anybody waits now, for any KB (async or blocking)."""
        with self._cond:
            return self._waits > 0

    @contextlib.contextmanager
    def _counted(self) -> Iterator[None]:
        """One wait under way, however it ends (for `waited`)."""
        with self._cond:
            self._waits += 1
        try:
            yield
        finally:
            with self._cond:
                self._waits -= 1

    def _unregister(self, slug: str, future: asyncio.Future[None]) -> None:
        with self._cond:
            waiters = self._async.get(slug, [])
            self._async[slug] = [w for w in waiters if w[1] is not future]
            if not self._async[slug]:
                del self._async[slug]

    def wait_blocking(
        self, slug: str, version: str, timeout: float, sinks: Sequence[str] | None = None
    ) -> bool:
        """`wait` for callers that already run in a thread of their own (the CLI, sync MCP tools)."""
        deadline = time.monotonic() + timeout
        first = True
        with self._counted():
            while True:
                with self._cond:
                    seen = self._generation
                if self._look(slug, version, sinks, first):
                    return True
                first = False
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                with self._cond:
                    self._cond.wait_for(functools.partial(self._moved, seen), timeout=remaining)

    def _look(self, slug: str, version: str, sinks: Sequence[str] | None, first: bool) -> bool:
        """`covers`; at a wait's first look, tell `on_use`, and `on_wait` of each sink that does not
        cover yet."""
        if first and self.on_use is not None:
            try:
                self.on_use(slug, sinks or self.sinks)
            except (OSError, KBError) as e:
                log.warning("could not tell the follower that KB %s is used: %s", slug, e)
        if self.covers(slug, version, sinks):
            return True
        if first and self.on_wait is not None:
            for sink in sinks or self.sinks:
                if self.covers(slug, version, [sink]):
                    continue
                try:
                    self.on_wait(sink, slug, version)
                except (OSError, KBError) as e:  # a hint lost: the wait takes a batch longer
                    log.warning("could not ask for %s of KB %s without batching: %s", sink, slug, e)
        return False

    def _moved(self, seen: int) -> bool:
        return self._generation != seen


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
