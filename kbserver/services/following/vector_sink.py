"""The embedding vectors as a sink of the follower, and the read side that searches them.

Only files under the configured prefixes get vectors (by default `memories/`, where the memory
dialects keep one record per file): embedding costs tens of milliseconds a passage on two cores, so
it runs here, after the commit, never on a request's path. A Markdown file's YAML front matter is
left out of what is embedded: the vector is of what the record says, not of its metadata.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
from collections.abc import Callable, Collection, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

from kbserver.core.errors import Unavailable
from kbserver.core.pool import LeasePool
from kbserver.services.following.catching_up import Delta, SinkDamaged
from kbserver.vectors import (
    Embedder,
    Known,
    PassageCache,
    QueryCache,
    Ranking,
    VectorHit,
    VectorStore,
    content_digest,
    similarities,
)

__all__ = ["VECTOR_SINK", "VectorSink", "embedded_text"]

VECTOR_SINK = "vectors"

log = logging.getLogger(__name__)


def embedded_text(data: bytes) -> str:
    """What of a file is embedded: its text without a leading `---` YAML front matter block."""
    text = data.decode("utf-8", "replace")
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end != -1:
            newline = text.find("\n", end + 4)
            return text[newline + 1 :].strip() if newline != -1 else ""
    return text.strip()


class VectorSink:
    """One vector folder per KB in `folder/{slug}`, each recording the version it covers."""

    name = VECTOR_SINK

    def __init__(
        self,
        folder: Path,
        embedder: Embedder,
        *,
        pool: LeasePool | None = None,
        prefixes: Sequence[str] = ("memories/",),
    ) -> None:
        """Open vector folders live in `pool` (shared with repositories and indexes, one budget)."""
        self._folder = folder
        self.embedder = embedder
        self.prefixes = tuple(prefixes)
        self._pool = (pool if pool is not None else LeasePool(1 << 62)).kind(
            "vectors", self._open, VectorStore.close, VectorStore.weight
        )
        self._passages = PassageCache()  # embedded on a request's path (never written to the folder)
        # Set by the composition: told when a reader finds a folder damaged, and before every read
        # (kbserver.services.following.indexing.SearchSink.on_read says why).
        self.on_damaged: Callable[[str, str], None] = lambda _sink, _slug: None
        self.on_read: Callable[[str, str], None] = lambda _sink, _slug: None

    def _open(self, slug: str) -> VectorStore:
        return VectorStore(self._folder / slug, self.embedder)

    def wants(self, path: str) -> bool:
        return path.startswith(self.prefixes)

    # -- the sink ----------------------------------------------------------------------------------
    def covered(self, slug: str) -> str | None:
        if not (self._folder / slug / "vectors.db").exists():
            return None
        try:
            with self._pool.lease(slug) as vs:
                return vs.covered_version()
        except sqlite3.DatabaseError as e:
            self._pool.drop(slug)
            raise SinkDamaged(str(e)) from e

    def apply(self, delta: Delta) -> None:
        wanted = [c for c in delta.changes if self.wants(c.path)]
        try:
            with self._pool.lease(delta.slug) as vs:
                if delta.base is None:
                    files = {c.path: embedded_text(delta.read(c.new_blob)) for c in wanted if c.new_blob}
                    vs.rebuild(delta.version, files, progress=delta.progress, fence=delta.fence)
                    return
                upserts: dict[str, str] = {}
                deletes: list[str] = []
                for c in wanted:
                    if c.change == "deleted" or c.new_blob is None:
                        deletes.append(c.path)
                    else:
                        upserts[c.path] = embedded_text(delta.read(c.new_blob))
                # a memory stored through the semantic set was embedded on its way in: not again
                vs.update(delta.version, upserts, deletes, made=self._passages.get, fence=delta.fence)
        except sqlite3.DatabaseError as e:
            self._pool.drop(delta.slug)
            raise SinkDamaged(str(e)) from e

    def reset(self, slug: str) -> None:
        self._pool.drop(slug)
        shutil.rmtree(self._folder / slug, ignore_errors=True)

    def idle(self, paused: bool, stop: Callable[[], bool]) -> None:
        """Nothing to merge: SQLite checkpoints its WAL by itself."""

    def close(self) -> None:
        self._pool.close_all()
        if isinstance(self.embedder, QueryCache):
            self.embedder.close()

    def stop_queries(self) -> None:
        """Fail the queries waiting for an embedding (shutdown); the one under way finishes."""
        if isinstance(self.embedder, QueryCache):
            self.embedder.stop()

    # -- reading -------------------------------------------------------------------------------------
    def prepare(self, query: str) -> None:
        """Start embedding `query` in the background, for a `ranked` or `search` of it soon after
        (which then waits only for what is left of it); nothing without a query cache."""
        if isinstance(self.embedder, QueryCache) and query.strip():
            self.embedder.prepare(query)

    def search(
        self,
        slug: str,
        query: str,
        *,
        limit: int = 10,
        prefix: str | None = None,
        allow: Callable[[str], bool] | AbstractSet[str] | None = None,
    ) -> tuple[list[VectorHit], str | None]:
        """The files of `slug` most similar to `query`, and the version the vectors cover.

        A KB whose vectors are not built yet has no hits and no version. Raises Unavailable while
        the folder is damaged (the follower rebuilds it).
        """
        ranking, version = self.ranked(slug, query, limit=limit, prefix=prefix, allow=allow)
        return ranking.hits[: max(0, limit)], version

    def ranked(
        self,
        slug: str,
        query: str,
        *,
        limit: int = 10,
        prefix: str | None = None,
        allow: Callable[[str], bool] | AbstractSet[str] | None = None,
        include: Collection[str] = (),
    ) -> tuple[Ranking, str | None]:
        """`search` as a Ranking (with the paths that have a vector, and the lowest score), and the
        version the vectors cover. Raises Unavailable while the folder is damaged."""
        self.on_read(self.name, slug)
        if not (self._folder / slug / "vectors.db").exists():
            return Ranking([], frozenset(), None), None
        try:
            with self._pool.lease(slug) as vs:
                return (
                    vs.ranked(query, limit=limit, prefix=prefix, allow=allow, include=include),
                    vs.covered_version(),
                )
        except sqlite3.DatabaseError as e:
            self._pool.drop(slug)
            log.warning("vectors of KB %s are damaged (%s); the follower rebuilds them", slug, e)
            self.on_damaged(self.name, slug)
            raise Unavailable(
                "semantic search of this KB is being rebuilt; try again shortly", slug=slug
            ) from e

    def similarities(
        self, slug: str, text: str, others: Sequence[str], *, as_query: bool, embed_limit: int = 32
    ) -> list[float | None]:
        """The cosine similarity of `text` (a query, or a passage) to each of `others`, in order.

        Vectors the follower made for `slug` are used; up to `embed_limit` others without one are
        embedded here (kept in memory only); the rest answer None. Raises Unavailable (damaged folder).
        """
        known = Known()
        self.on_read(self.name, slug)
        if (self._folder / slug / "vectors.db").exists():
            try:
                with self._pool.lease(slug) as vs:
                    own = () if as_query else (content_digest(text),)  # a stored text: its vector too
                    known = vs.known([content_digest(o) for o in others], also=own)
            except sqlite3.DatabaseError as e:
                self._pool.drop(slug)
                self.on_damaged(self.name, slug)
                raise Unavailable(
                    "semantic search of this KB is being rebuilt; try again shortly", slug=slug
                ) from e
        return similarities(
            self.embedder,
            self._passages,
            text,
            others,
            as_query=as_query,
            known=known,
            embed_limit=embed_limit,
        )
