"""Numbers for /metrics read from the data folder, so commits made by every process count."""

from __future__ import annotations

import threading

from kbserver.services.context import Services

__all__ = ["VersionCounter"]


class VersionCounter:
    """Versions on each KB's `main`, counted from the repositories.

    A `kbserver mcp` process, an import or a CLI approval moves `main` without this process knowing;
    the repository is the one place every process's commits meet. Each count is kept with the head
    it was taken at, so a scrape walks only the versions added since the last one.
    """

    def __init__(self, services: Services) -> None:
        self._services = services
        self._seen: dict[str, tuple[str, int]] = {}
        self._lock = threading.Lock()

    def counts(self) -> dict[str, int]:
        """`{slug: versions on main}` for every KB (blocking: walks new history)."""
        with self._lock:
            out: dict[str, int] = {}
            for slug in self._services.repos.slugs():
                head = self._services.repos.repo(slug).head()
                out[slug] = self._count(slug, head) if head else 0
            return out

    def _count(self, slug: str, head: str) -> int:
        known = self._seen.get(slug)
        if known is not None and known[0] == head:
            return known[1]
        added = 0
        for version in self._services.repos.repo(slug).first_parents(head):
            if known is not None and version == known[0]:
                added += known[1]
                break
            added += 1
        self._seen[slug] = (head, added)
        return added
