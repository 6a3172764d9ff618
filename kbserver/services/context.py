"""The services container: wires the store, the control plane and the index for one data folder."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kbserver.control import ControlStore, SqliteControlStore
from kbserver.core.model import Limits
from kbserver.store import Repos

__all__ = ["Options", "Services"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    """Service-level settings; the composition roots fill them from kbserver.config."""

    limits: Limits = field(default_factory=Limits)
    run_ttl_seconds: float = 24 * 3600
    fsync: bool = True
    index: bool = True
    index_poll_seconds: float = 1.0


class Services:
    """Everything a front end needs, for one data folder. Close it when done."""

    def __init__(self, data: Path, options: Options | None = None) -> None:
        from kbserver.services.indexing import Indexer  # the indexer needs a built Services

        self.data = data
        self.options = options or Options()
        data.mkdir(parents=True, exist_ok=True)
        self.repos = Repos(data / "kbs", fsync=self.options.fsync)
        self.control: ControlStore = SqliteControlStore(data / "control.db")
        self.indexer = Indexer(self, data / "index", enabled=self.options.index)
        # Called with (slug, version) after every new version; edges hang metrics here.
        self.commit_hooks: list[Callable[[str, str], None]] = []

    def committed(self, slug: str, version: str) -> None:
        """Tell the index and every hook that `slug` has a new version."""
        self.indexer.notify(slug)
        for hook in self.commit_hooks:
            hook(slug, version)

    def start(self) -> None:
        """Recover after a crash and bring every index up to date in the background."""
        for slug in self.repos.slugs():
            removed = self.repos.recover(slug)
            if removed:
                log.warning(
                    "KB %s: removed %d stale lock file(s) left by a crashed writer", slug, len(removed)
                )
        self.indexer.start()

    def close(self) -> None:
        self.indexer.stop()
        self.repos.close()
        self.control.close()

    def limits(self, slug: str) -> Limits:
        row = self.control.kb(slug)
        base = self.options.limits
        if row is None or not row.limits:
            return base
        return base.model_copy(update=row.limits)
