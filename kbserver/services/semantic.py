"""Semantic search use cases: the files of a KB ranked by meaning (the vector sink's read side)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from collections.abc import Set as AbstractSet

from kbserver.core.model import Caller
from kbserver.services.auth import require_read
from kbserver.services.context import Services
from kbserver.vectors import Ranking, VectorHit

__all__ = ["enabled", "prepare", "ranked", "search", "similarities"]


def enabled(services: Services) -> bool:
    """False when the deployment runs without an embedder (`KBSERVER_EMBEDDER=none`)."""
    return services.vectors is not None


def prepare(services: Services, query: str) -> None:
    """Start embedding `query` for a `ranked` or `search` of it that follows (the caller does other
    work meanwhile, such as the keyword search: the embedder runs outside the GIL). Checks nothing
    and returns at once; the search that follows checks the caller."""
    if services.vectors is not None:
        services.vectors.prepare(query)


def search(
    services: Services,
    caller: Caller,
    slug: str,
    query: str,
    *,
    limit: int,
    prefix: str | None = None,
    allow: Callable[[str], bool] | AbstractSet[str] | None = None,
) -> list[VectorHit]:
    """The files most similar to `query` among those that have vectors, best first (none without an
    embedder). Raises NotFound, Unavailable (the vectors are being rebuilt)."""
    require_read(services, caller, slug)
    if services.vectors is None or limit <= 0:
        return []
    hits, _version = services.vectors.search(slug, query, limit=limit, prefix=prefix, allow=allow)
    return hits


def similarities(
    services: Services,
    caller: Caller,
    slug: str,
    text: str,
    others: Sequence[str],
    *,
    as_query: bool,
    embed_limit: int = 32,
) -> list[float | None] | None:
    """The cosine similarity of `text` (`as_query`: a search query; else a stored text) to each of
    `others`, in order: None for one that has no vector yet beyond `embed_limit` embedded on the spot,
    and None as a whole without an embedder. Raises NotFound, Unavailable."""
    require_read(services, caller, slug)
    if services.vectors is None:
        return None
    return services.vectors.similarities(slug, text, others, as_query=as_query, embed_limit=embed_limit)


def ranked(
    services: Services,
    caller: Caller,
    slug: str,
    query: str,
    *,
    limit: int,
    prefix: str | None = None,
    allow: Callable[[str], bool] | AbstractSet[str] | None = None,
    include: Collection[str] = (),
) -> Ranking:
    """The `limit` best files (plus ties with the last, plus those of `include`), which files have
    a vector at all (those written since the vectors last caught up have none yet) and the lowest
    score of all, for a fusion. Raises NotFound, Unavailable."""
    require_read(services, caller, slug)
    if services.vectors is None:
        return Ranking([], frozenset(), None)
    ranking, _version = services.vectors.ranked(
        slug, query, limit=max(0, limit), prefix=prefix, allow=allow, include=include
    )
    return ranking
