"""The search index as a sink of the follower, and the read side that searches it.

The follower applies deltas here (`apply`); readers call `search` and never repair: an index they
find damaged is dropped from the pool, reported (`on_damaged`) and answered as `unavailable`.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import TypeVar

from kbserver.core.errors import Unavailable
from kbserver.core.pool import LeasePool
from kbserver.index import IndexCorrupt, SearchIndex, SearchResult, index_exists
from kbserver.services.following.catching_up import Delta, SinkDamaged

T = TypeVar("T")

__all__ = ["INDEX_SINK", "SearchSink"]

INDEX_SINK = "index"
MERGE_AFTER_UPDATES = 8
MERGE_UNDER_LOAD = 32
# A merge amid writes (segments of like size) heeds `stop` only from this question on (~0.4 s of
# its CPU): those of the mix asked 70-110 times, and giving way after 32 threw each away, again
# at every short pause of a burst (docs/performance.md).
SMALL_MERGE_ASKS = 128

log = logging.getLogger(__name__)


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "replace")


class SearchSink:
    """One Whoosh index per KB in `folder/{slug}`, each recording the version it covers."""

    name = INDEX_SINK

    def __init__(self, folder: Path, pool: LeasePool | None = None) -> None:
        """Open indexes live in `pool` (shared with the repositories, under one memory budget)."""
        self._folder = folder
        self._pool = (pool if pool is not None else LeasePool(1 << 62)).kind(
            "index", self._open, SearchIndex.close, SearchIndex.weight
        )
        # Set by the composition: told when a reader finds an index damaged, or missing, and before
        # every search (a node that follows only the KBs it serves learns of a use there, and a
        # search of a KB not followed lately waits there for its catch-up).
        self.on_damaged: Callable[[str, str], None] = lambda _sink, _slug: None
        self.on_missing: Callable[[str], None] = lambda _slug: None
        self.on_read: Callable[[str, str], None] = lambda _sink, _slug: None

    def _open(self, slug: str) -> SearchIndex:
        return SearchIndex(self._folder / slug)

    # -- the sink ----------------------------------------------------------------------------------
    def covered(self, slug: str) -> str | None:
        if not index_exists(self._folder / slug):
            return None
        try:
            with self._pool.lease(slug) as ix:
                return ix.indexed_version()
        except IndexCorrupt as e:
            self._pool.drop(slug)
            raise SinkDamaged(str(e)) from e

    def apply(self, delta: Delta) -> None:
        try:
            with self._pool.lease(delta.slug) as ix:
                if delta.base is None:
                    files = [c for c in delta.changes if c.new_blob]
                    docs = ((c.path, _text(delta.read(c.new_blob))) for c in files if c.new_blob)
                    ix.rebuild(delta.version, docs, _counting(delta.progress, len(files)), delta.fence)
                    return
                if ix.unmerged >= MERGE_UNDER_LOAD:
                    # Commits never pause: keep searches from slowing down without bound, but
                    # only by the segments of like size (the tail is merged at a pause).
                    ix.merge(small=True)
                upserts: dict[str, str] = {}
                deletes: list[str] = []
                for c in delta.changes:
                    if c.change == "deleted" or c.new_blob is None:
                        deletes.append(c.path)
                    else:
                        upserts[c.path] = _text(delta.read(c.new_blob))
                ix.update(delta.version, upserts, deletes, delta.fence)  # the term, under its lock
        except IndexCorrupt as e:
            self._pool.drop(delta.slug)
            raise SinkDamaged(str(e)) from e

    def reset(self, slug: str) -> None:
        self._pool.drop(slug)
        shutil.rmtree(self._folder / slug, ignore_errors=True)

    def idle(self, paused: bool, stop: Callable[[], bool]) -> None:
        """Merge the small segments updates left: all once commits pause, else (only those of like
        size) where 8 piled up
        (searches slow down with every segment; merging on the update path slowed every 5th one;
        under a steady stream of commits `apply` merges once 32 piled up). A merge gives up as
        soon as `stop()` says commits wait (it is run again at the next pause): a burst that came
        during the tail merge waited for all of it (issue 37). A merge amid writes gives way only
        once it has run a while (SMALL_MERGE_ASKS)."""
        stop = stop if paused else _heeded_after(SMALL_MERGE_ASKS, stop)
        for slug in self._pool.names():
            if stop():
                return
            try:
                with self._pool.lease_if_open(slug) as ix:
                    if ix is not None and (paused or ix.unmerged >= MERGE_AFTER_UPDATES):
                        ix.merge(small=not paused, stop=stop)  # amid writes, leave the tail under them
            except IndexCorrupt as e:
                self._damaged(slug, e)

    def close(self) -> None:
        self._pool.close_all()

    # -- reading -------------------------------------------------------------------------------------
    def search(
        self,
        slug: str,
        q: str,
        *,
        limit: int = 10,
        offset: int = 0,
        prefix: str | None = None,
        filters: Mapping[str, str] | None = None,
        snippets: bool = True,
        coverage: bool = False,
        hide: tuple[str, str, Collection[str]] | None = None,
    ) -> SearchResult:
        """Search `slug`'s index (index.SearchIndex.search: `snippets`, `coverage`, `hide`). Raises
        Unavailable while it is damaged (the follower rebuilds it).

        A KB whose index is not built yet has no hits and no version.
        """
        self.on_read(self.name, slug)
        found = self._read(
            slug,
            lambda ix: ix.search(
                q,
                limit=limit,
                offset=offset,
                prefix=prefix,
                filters=filters,
                snippets=snippets,
                coverage=coverage,
                hide=hide,
            ),
        )
        return SearchResult([], 0, None) if found is None else found

    def _read(self, slug: str, read: Callable[[SearchIndex], T]) -> T | None:
        """`read(index)` of `slug`'s index; None while it is not built yet (or was removed: the follower
        is asked to catch it up). Raises Unavailable while it is damaged (the follower rebuilds it)."""
        if not index_exists(self._folder / slug):
            self.on_missing(slug)
            return None
        try:
            with self._pool.lease(slug) as ix:
                return read(ix)
        except IndexCorrupt as e:
            self._damaged(slug, e)
            raise Unavailable(
                f"the search index of KB {slug} is damaged and being rebuilt from git; retry shortly",
                slug=slug,
            ) from None

    def paths(self, slug: str) -> dict[str, str]:
        """Every indexed path of `slug` with the sha256 of its text (for checks and tests)."""
        if not index_exists(self._folder / slug):
            return {}
        with self._pool.lease(slug) as ix:
            return ix.paths()

    def _damaged(self, slug: str, error: Exception) -> None:
        log.warning("search index of KB %s is damaged (%s); asking the follower to rebuild it", slug, error)
        self._pool.drop(slug)
        self.on_damaged(self.name, slug)


def _heeded_after(asks: int, stop: Callable[[], bool]) -> Callable[[], bool]:
    """`stop`, said False to its first `asks` questions."""
    asked = 0

    def heeded() -> bool:
        nonlocal asked
        asked += 1
        return asked > asks and stop()

    return heeded


def _counting(progress: Callable[[int, int | None], None] | None, total: int) -> Callable[[int], None] | None:
    """The index's count of documents done, reported with the number it will reach."""
    if progress is None:
        return None
    report = progress
    return lambda done: report(done, total)
