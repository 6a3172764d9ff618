"""Search use cases: full-text search of a KB and the index status (`wait_for`)."""

from __future__ import annotations

from collections.abc import Mapping

from kbserver.core.errors import InvalidRequest
from kbserver.core.model import Caller
from kbserver.core.paths import check_prefix
from kbserver.services.auth import require_read
from kbserver.services.context import Services

__all__ = ["MAX_LIMIT", "MAX_WAIT_SECONDS", "query", "status"]

MAX_LIMIT = 100
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
    exact_total: bool = True,
) -> dict[str, object]:
    """`{hits: [{path, score, snippet}], total, version}`. Raises NotFound, InvalidRequest.

    Edges that show no total pass `exact_total=False` and save counting every match.
    """
    require_read(services, caller, slug)
    if not isinstance(q, str) or (not q.strip() and not filters):
        raise InvalidRequest("q must be a non-empty search text", q=q)
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"limit must be between 1 and {MAX_LIMIT}", limit=limit)
    if offset < 0:
        raise InvalidRequest("offset must be 0 or more", offset=offset)
    result = services.indexer.search(
        slug, q, limit=limit, offset=offset, prefix=check_prefix(prefix) or None, filters=filters
    )
    return {
        "hits": [{"path": h.path, "score": round(h.score, 4), "snippet": h.snippet} for h in result.hits],
        "total": result.total,
        "version": result.version,
    }


def status(
    services: Services, caller: Caller, slug: str, wait_for: str | None = None, timeout: float = 10.0
) -> dict[str, object]:
    """`{head, indexed_version}`, after waiting up to `timeout` s for `wait_for` to be covered.

    Raises NotFound, InvalidRequest.
    """
    require_read(services, caller, slug)
    if not 0 <= timeout <= MAX_WAIT_SECONDS:
        raise InvalidRequest(f"timeout must be between 0 and {MAX_WAIT_SECONDS} seconds", timeout=timeout)
    repo = services.repos.repo(slug)
    covered = None
    if wait_for is not None:
        version = repo.resolve(wait_for)
        assert version is not None
        covered = services.indexer.wait_for(slug, version, timeout)
    out: dict[str, object] = {"head": repo.head(), "indexed_version": services.indexer.indexed_version(slug)}
    if covered is not None:
        out["covered"] = covered
    return out
