"""Semantic search use cases: the files of a KB ranked by meaning (the vector sink's read side)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator, Sequence
from collections.abc import Set as AbstractSet

import anyio.from_thread

from kbserver.core.model import Caller
from kbserver.services.access.auth import require_read
from kbserver.services.context import Services
from kbserver.vectors import Ranking, VectorHit, asking

__all__ = ["enabled", "prepare", "ranked", "search", "similarities", "stop_queries"]


def _still_waiting() -> bool:
    """False once the request this worker thread runs for was cancelled (an MCP cancellation, a
    client that hung up): anyio marks the host task's cancel scope, which its worker thread can read."""
    try:
        anyio.from_thread.check_cancelled()
    except RuntimeError:  # not a worker thread of anyio (the CLI, a test): nobody can leave
        return True
    except BaseException:  # the host task's cancellation exception
        return False
    return True


@contextlib.contextmanager
def _asking(caller: Caller) -> Iterator[None]:
    """The caller's queries wait in its own queue (callers take turns) while it still waits."""
    with asking(caller.actor, _still_waiting):
        yield


def stop_queries(services: Services) -> None:
    """At shutdown: fail the queries waiting for an embedding at once (the one under way finishes),
    so the server's requests end and it can exit. Safe from any thread, more than once."""
    if services.vectors is not None:
        services.vectors.stop_queries()


def enabled(services: Services) -> bool:
    """False when the deployment runs without an embedder (`KBSERVER_EMBEDDER=none`)."""
    return services.vectors is not None


def prepare(services: Services, caller: Caller, query: str) -> None:
    """Start embedding `query` for a `ranked` or `search` of it that follows on this thread (the caller
    does other work meanwhile, such as the keyword search: the embedder runs outside the GIL), in
    the caller's queue. Checks nothing and returns at once; the search that follows checks the caller."""
    if services.vectors is not None:
        with _asking(caller):
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
    with _asking(caller):
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
    with _asking(caller):
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
    with _asking(caller):
        ranking, _version = services.vectors.ranked(
            slug, query, limit=max(0, limit), prefix=prefix, allow=allow, include=include
        )
    return ranking
