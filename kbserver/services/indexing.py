"""The search index follows main: catch-up after every commit, polling for other processes' commits."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbserver.core.errors import KBError
from kbserver.index import IndexCorrupt, SearchIndex, SearchResult

if TYPE_CHECKING:
    from kbserver.services.context import Services

__all__ = ["MERGE_AFTER_IDLE_SECONDS", "MERGE_AFTER_UPDATES", "Indexer"]

MERGE_AFTER_IDLE_SECONDS = 2.0
MERGE_AFTER_UPDATES = 8

log = logging.getLogger(__name__)


class Indexer:
    """One SearchIndex per KB, kept equal to main by a background thread (git is the truth)."""

    def __init__(self, services: Services, folder: Path, *, enabled: bool = True) -> None:
        self._services = services
        self._folder = folder
        self._enabled = enabled
        self._indexes: dict[str, SearchIndex] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._mutex = threading.Lock()
        self._changed = threading.Condition()
        self._pending: set[str] = set()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._last_update = 0.0  # monotonic time of the last index update or rebuild

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Catch every KB up in the background and keep following main."""
        if not self._enabled or self._thread is not None:
            return
        self._stopping = False
        self._pending.update(self._services.repos.slugs())
        self._thread = threading.Thread(target=self._loop, name="kbserver-indexer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        with self._mutex:
            for ix in self._indexes.values():
                ix.close()
            self._indexes.clear()

    def notify(self, slug: str) -> None:
        """A commit happened on `slug`: schedule a catch-up."""
        with self._changed:
            self._pending.add(slug)
            self._changed.notify_all()

    def _loop(self) -> None:
        poll = self._services.options.index_poll_seconds
        last_poll = 0.0
        while True:
            with self._changed:
                if not self._pending and not self._stopping:
                    self._changed.wait(timeout=poll)
                if self._stopping:
                    return
                slugs, self._pending = set(self._pending), set()
            if time.monotonic() - last_poll >= poll:  # commits made by other processes
                slugs.update(self._services.repos.slugs())
                last_poll = time.monotonic()
            for slug in sorted(slugs):
                try:
                    self.catch_up(slug)
                except Exception:
                    log.exception("indexing KB %s failed; it will be retried", slug)
            with self._changed:
                self._changed.notify_all()
            # Small segments are merged off the write path: once commits pause, or when many piled up.
            self._merge_all(idle=time.monotonic() - self._last_update >= MERGE_AFTER_IDLE_SECONDS)

    def _merge_all(self, idle: bool) -> None:
        with self._mutex:
            opened = list(self._indexes.items())
        for slug, ix in opened:
            if not idle and ix.unmerged < MERGE_AFTER_UPDATES:
                continue
            try:
                ix.merge()
            except Exception:
                log.exception("merging the index of KB %s failed; it will be retried", slug)

    # -- indexes -----------------------------------------------------------------------------------
    def _lock(self, slug: str) -> threading.Lock:
        with self._mutex:
            return self._locks.setdefault(slug, threading.Lock())

    def index(self, slug: str) -> SearchIndex:
        """The open index of `slug`, rebuilt empty when the folder is unreadable."""
        with self._mutex:
            ix = self._indexes.get(slug)
            if ix is None:
                folder = self._folder / slug
                try:
                    ix = SearchIndex(folder)
                except IndexCorrupt:
                    log.warning("index of KB %s is corrupt; rebuilding it from git", slug)
                    shutil.rmtree(folder, ignore_errors=True)
                    ix = SearchIndex(folder)
                self._indexes[slug] = ix
            return ix

    def search(self, slug: str, q: str, **options: Any) -> SearchResult:
        """Search `slug`'s index; an index found damaged while searching is rebuilt from git first."""
        try:
            return self.index(slug).search(q, **options)
        except IndexCorrupt:
            log.warning("index of KB %s is damaged; rebuilding it from git", slug)
            with self._lock(slug), self._mutex:
                broken = self._indexes.pop(slug, None)
                if broken is not None:
                    broken.close()
                shutil.rmtree(self._folder / slug, ignore_errors=True)
            self.catch_up(slug)
            return self.index(slug).search(q, **options)

    def indexed_version(self, slug: str) -> str | None:
        if not self._enabled:
            return None
        return self.index(slug).indexed_version()

    def catch_up(
        self, slug: str, progress: Callable[[int], None] | None = None, *, rebuild: bool = False
    ) -> str | None:
        """Bring the index of `slug` to main's head; returns the version it now covers."""
        repo = self._services.repos.repo(slug)
        with self._lock(slug):
            ix = self.index(slug)
            head = repo.head()
            indexed = ix.indexed_version()
            if head is None or (indexed == head and not rebuild):
                return indexed
            known = indexed is not None and not rebuild
            if known:
                try:
                    repo.resolve(indexed)
                except KBError:
                    known = False
            if not known:
                view = repo.view(head)
                docs = ((path, _text(view.read(path))) for path, _ in view.walk())
                ix.rebuild(head, docs, progress)
                self._last_update = time.monotonic()
                return head
            upserts: dict[str, str] = {}
            deletes: list[str] = []
            target = repo.view(head)
            for ch in repo.changes(indexed, head):
                if ch.change == "deleted":
                    deletes.append(ch.path)
                else:
                    upserts[ch.path] = _text(target.read(ch.path))
            ix.update(head, upserts, deletes)
            self._last_update = time.monotonic()
            return head

    def covers(self, slug: str, version: str) -> bool:
        """True once the index includes `version` (it is the indexed version or one of its ancestors)."""
        indexed = self.indexed_version(slug)
        if indexed is None:
            return False
        if indexed == version:
            return True
        repo = self._services.repos.repo(slug)
        target_time = repo.commit_info(version).time
        for seen in repo.first_parents(indexed):
            if seen == version:
                return True
            if repo.commit_info(seen).time < target_time:
                return False
        return False

    def wait_for(self, slug: str, version: str, timeout: float) -> bool:
        """Block until the index covers `version` or `timeout` seconds pass."""
        deadline = time.monotonic() + timeout
        self.notify(slug)
        while not self.covers(slug, version):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if self._thread is None:  # no background indexer in this process: do it here
                self.catch_up(slug)
                continue
            with self._changed:
                self._changed.wait(timeout=min(remaining, 0.5))
        return True


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "replace")
