"""Semantic search use cases: the files of a KB ranked by meaning (the vector sink's read side)."""

from __future__ import annotations

from collections.abc import Callable

from kbserver.core.model import Caller
from kbserver.services.auth import require_read
from kbserver.services.context import Services
from kbserver.vectors import VectorHit

__all__ = ["enabled", "search"]


def enabled(services: Services) -> bool:
    """False when the deployment runs without an embedder (`KBSERVER_EMBEDDER=none`)."""
    return services.vectors is not None


def search(
    services: Services,
    caller: Caller,
    slug: str,
    query: str,
    *,
    limit: int,
    prefix: str | None = None,
    allow: Callable[[str], bool] | None = None,
) -> list[VectorHit]:
    """The files most similar to `query` among those that have vectors, best first (none without an
    embedder). Raises NotFound, Unavailable (the vectors are being rebuilt)."""
    require_read(services, caller, slug)
    if services.vectors is None or limit <= 0:
        return []
    hits, _version = services.vectors.search(slug, query, limit=limit, prefix=prefix, allow=allow)
    return hits
