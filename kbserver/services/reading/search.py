"""Search use cases: full-text search of a KB, the index status, and waiting for the follower."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kbserver.core import threads
from kbserver.core.errors import Forbidden, InvalidRequest
from kbserver.core.model import Caller
from kbserver.core.paths import check_prefix
from kbserver.services.access.auth import require_read
from kbserver.services.context import Services
from kbserver.services.following.indexing import INDEX_SINK
from kbserver.services.models import IndexStatus, SearchHit, SearchResults
from kbserver.services.reading.privacy import PRIVATE_FOLDER, other_owners

__all__ = [
    "MAX_CANDIDATES",
    "MAX_LIMIT",
    "MAX_WAIT_SECONDS",
    "Candidate",
    "candidates",
    "query",
    "reindex",
    "status",
    "status_after",
    "wait_for",
    "wait_indexed",
]

MAX_LIMIT = 100
MAX_CANDIDATES = 5000  # keyword candidates a search of the service layer may rank (memory_search's filters)
MAX_WAIT_SECONDS = 60.0


def query(
    services: Services,
    caller: Caller,
    slug: str,
    q: str,
    limit: int = 10,
    offset: int = 0,
    prefix: str | None = None,
    filters: Mapping[str, str] | None = None,
    snippets: bool = True,
) -> SearchResults:
    """The best hits (path, score, plain snippet, highlights), the matches counted, the version searched.
    Without `snippets` (a caller that shows none) every snippet is "".

    Raises NotFound, InvalidRequest, Unavailable.

    `total` is the exact number of matches (index/arrays.py counts them all). `unavailable`
    means the index was found damaged; the follower rebuilds it from git.
    """
    require_read(services, caller, slug)
    if not isinstance(q, str) or (not q.strip() and not filters):
        raise InvalidRequest("q must be a non-empty search text", q=q)
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"limit must be between 1 and {MAX_LIMIT}", limit=limit)
    if offset < 0:
        raise InvalidRequest("offset must be 0 or more", offset=offset)
    result = services.search_index.search(
        slug,
        q,
        limit=limit,
        offset=offset,
        prefix=check_prefix(prefix) or None,
        filters=filters,
        snippets=snippets,
        hide=_hide(services, caller, slug),  # other agents' private memories: not found, not counted
    )
    hits, total = result.hits, result.total
    return SearchResults(
        hits=[
            SearchHit(path=h.path, score=round(h.score, 4), snippet=h.snippet, highlights=list(h.highlights))
            for h in hits
        ],
        total=total,
        version=result.version,
    )


def _hide(services: Services, caller: Caller, slug: str) -> tuple[str, str, list[str]] | None:
    """What the index leaves out for `caller`: other agents' private memories (reading.privacy),
    the files under memories/ whose agentId names one of them; None for the admin or when there are none."""
    others = other_owners(caller, services.repos.repo(slug), str(services.repos.path(slug)))
    return (PRIVATE_FOLDER, "agentId", others) if others else None


@dataclass(frozen=True)
class Candidate:
    """A keyword hit as a hybrid search fuses it: path, score (as `query` rounds it), word coverage."""

    path: str
    score: float
    coverage: float


def candidates(
    services: Services,
    caller: Caller,
    slug: str,
    q: str,
    limit: int,
    prefix: str | None = None,
    coverage: bool = True,
) -> list[Candidate]:
    """The best `limit` (up to MAX_CANDIDATES) hits for `q` (as `query` ranks them) with each one's
    word coverage (the idf-weighted share of `q`'s words it holds, absolute unlike a BM25 score; 0.0
    without `coverage`), from one read of the index: the keyword side of a memory search, which
    filters them. Raises NotFound, InvalidRequest, Unavailable."""
    require_read(services, caller, slug)
    if not isinstance(q, str) or not q.strip():
        raise InvalidRequest("q must be a non-empty search text", q=q)
    if not 1 <= limit <= MAX_CANDIDATES:
        raise InvalidRequest(f"limit must be between 1 and {MAX_CANDIDATES}", limit=limit)
    result = services.search_index.search(
        slug,
        q,
        limit=limit,
        prefix=check_prefix(prefix) or None,
        snippets=False,
        coverage=coverage,
        hide=_hide(services, caller, slug),
    )
    kept = result.hits
    return [Candidate(h.path, round(h.score, 4), h.coverage or 0.0) for h in kept]


def reindex(
    services: Services,
    caller: Caller,
    slug: str,
    progress: Callable[[str, int, int | None], None] | None = None,
) -> str | None:
    """Rebuild the search index and the vectors of `slug` from git now; returns the version they
    cover (admin only). `progress(sink, done, total)`: files indexed, passages embedded (vectors
    of unchanged contents are reused, so a rebuild embeds only what is new).

    Raises NotFound, Forbidden.
    """
    require_read(services, caller, slug)
    if not caller.is_admin:
        raise Forbidden("only the admin can rebuild an index")
    return services.follower.catch_up(slug, rebuild=True, progress=progress)


def _check_timeout(timeout: float) -> None:
    if not 0 <= timeout <= MAX_WAIT_SECONDS:
        raise InvalidRequest(f"timeout must be between 0 and {MAX_WAIT_SECONDS} seconds", timeout=timeout)


def status(
    services: Services, caller: Caller, slug: str, wait_for: str | None = None, timeout: float = 10.0
) -> IndexStatus:
    """The head and the indexed version, after waiting up to `timeout` s for `wait_for` to be covered
    (then `covered` says whether it is).

    Blocks the calling thread while it waits: for the CLI and sync tools; edges on an event loop
    use `status_after`. Raises NotFound, InvalidRequest.
    """
    require_read(services, caller, slug)
    _check_timeout(timeout)
    covered = None
    if wait_for is not None:
        version = services.repos.repo(slug).resolve(wait_for)  # on main, else NotFound
        covered = services.progress.wait_blocking(slug, version, timeout, [INDEX_SINK])
    return _status(services, slug, covered)


def _status(services: Services, slug: str, covered: bool | None) -> IndexStatus:
    return IndexStatus(
        head=services.repos.repo(slug).head(),
        indexed_version=services.progress.covered(INDEX_SINK, slug),
        covered=covered,
        index_error=services.progress.error(INDEX_SINK, slug),
    )


async def wait_for(
    services: Services,
    caller: Caller,
    slug: str,
    version: str,
    timeout: float,
    sinks: Sequence[str] | None = None,
) -> bool:
    """Wait, without holding a thread, until `sinks` (default: all) cover `version`; False on timeout.

    Raises NotFound (unknown KB or a version not on main, at once), InvalidRequest.
    """
    _check_timeout(timeout)

    def check() -> str:
        require_read(services, caller, slug)
        return services.repos.repo(slug).resolve(version)  # on main, else NotFound

    resolved = await threads.run(check)
    return await services.progress.wait(slug, resolved, timeout, sinks)


async def wait_indexed(services: Services, caller: Caller, slug: str, version: str, timeout: float) -> bool:
    """Wait, holding no thread, until the search index covers `version` (False after `timeout` s):
    a search that follows sees the caller's own write. Raises NotFound (a version not on main, at
    once), InvalidRequest."""
    return await wait_for(services, caller, slug, version, timeout, [INDEX_SINK])


async def status_after(
    services: Services, caller: Caller, slug: str, wait_for_version: str | None, timeout: float = 10.0
) -> IndexStatus:
    """`status` for edges on an event loop: the wait holds no thread (`GET /kbs/{slug}/index`)."""
    covered = None
    if wait_for_version is not None:
        covered = await wait_for(services, caller, slug, wait_for_version, timeout, [INDEX_SINK])
    else:
        _check_timeout(timeout)
        await threads.run(require_read, services, caller, slug)
    return await threads.run(_status, services, slug, covered)
