"""The retrieval of the `semantic` dialect: search_memories_by_semantics and recall_related, ranked by
meaning, importance (reinforced by use) and recency; each retrieval is counted, never a version."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from kbserver.core.errors import InvalidRequest
from kbserver.dialects.memory_records import (
    Memory,
    parse_time,
)
from kbserver.dialects.results import (
    RankedItem,
    RankedResult,
)
from kbserver.dialects.semantic_base import (
    _DEFAULT_IMPORTANCE,
    DEFAULT_USER,
    _limit,
    _now,
    _records,
    _similarities,
)
from kbserver.dialects.semantic_rules import (
    MIN_SIMILARITY,
    REINFORCE_KEEP,
    RELATED_SIMILARITY,
    check_user_id,
    recency,
    score,
)
from kbserver.dialects.session import DialectCall
from kbserver.services.reading import memory_access, semantic
from kbserver.services.reading.memory_access import MemoryAccessRow

__all__ = ["recall_related", "search_memories_by_semantics"]


# -- retrieval -------------------------------------------------------------------------------------
def _effective(memory: Memory, row: MemoryAccessRow | None) -> float:
    """The importance as reinforced by use, while it derives from the file's current importance."""
    base = memory.importance if memory.importance is not None else _DEFAULT_IMPORTANCE
    if row is not None and abs(row.base - base) < 1e-9:
        return row.importance
    return base


def _last_seen(memory: Memory, row: MemoryAccessRow | None) -> datetime.datetime:
    if row is not None and row.last_accessed is not None:
        return datetime.datetime.fromtimestamp(row.last_accessed, datetime.UTC)
    try:
        return parse_time(memory.createdAt, "createdAt")
    except InvalidRequest:  # edited by hand into something else
        return _now()


def _candidates(call: DialectCall, slug: str, user: str, include_superseded: bool) -> list[Memory]:
    return [
        m
        for m in _records(call, slug)
        if m.user_id == user and (include_superseded or m.superseded_by is None)
    ]


def _rank(
    call: DialectCall,
    slug: str,
    memories: Sequence[Memory],
    sims: Sequence[float],
    limit: int,
    include_superseded: bool,
) -> list[RankedItem]:
    """The best `limit` by score; each retrieval is counted (and reinforces) in the control plane."""
    rows = memory_access.stats(call.services, call.caller, slug, [m.id for m in memories])
    now = _now()
    scored = sorted(
        (
            (
                score(s, _effective(m, rows.get(m.id)), recency(_last_seen(m, rows.get(m.id)), now)),
                m,
            )
            for s, m in zip(sims, memories, strict=True)
        ),
        key=lambda sm: (-sm[0], sm[1].id),
    )[:limit]
    retrieved = {
        m.id: (m.importance if m.importance is not None else _DEFAULT_IMPORTANCE) for _s, m in scored
    }
    counted = memory_access.record(call.services, call.caller, slug, retrieved, REINFORCE_KEEP)
    out = []
    for value, m in scored:
        row = counted.get(m.id)
        item = RankedItem(
            id=m.id,
            content=m.content,
            memory_type=m.memory_type,
            user_id=m.user_id,
            importance=round(_effective(m, row), 4),
            access_count=row.access_count if row is not None else 0,
            score=round(value, 4),
        )
        out.append(item.model_copy(update={"superseded_by": m.superseded_by}) if include_superseded else item)
    return out


def _query(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest("query must not be empty")
    return value.strip()


def search_memories_by_semantics(
    call: DialectCall,
    query: str,
    *,
    user_id: str = DEFAULT_USER,
    limit: int = 5,
    include_superseded: bool = False,
    kb: str | None = None,
) -> RankedResult:
    """The user's memories at least MIN_SIMILARITY similar to `query`, best score first. Superseded
    memories only with `include_superseded`. Counts each retrieval; makes no version.
    Raises InvalidRequest, NotFound, Unavailable."""
    text = _query(query)
    semantic.prepare(
        call.services, call.caller, text
    )  # embedded on another core while the records are sorted out
    count = _limit(limit)
    user = check_user_id(user_id)
    slug = call.kb_to_read(kb)
    memories = _candidates(call, slug, user, include_superseded)
    sims, fallen_back = _similarities(call, slug, text, memories, as_query=True)
    kept = [(s, m) for s, m in zip(sims, memories, strict=True) if s >= MIN_SIMILARITY]
    return RankedResult(
        memories=_rank(call, slug, [m for _s, m in kept], [s for s, _m in kept], count, include_superseded),
        unembedded=fallen_back or None,  # compared by their words until the follower embeds them
    )


def recall_related(
    call: DialectCall,
    query: str,
    *,
    user_id: str = DEFAULT_USER,
    limit: int = 5,
    include_superseded: bool = False,
    kb: str | None = None,
) -> RankedResult:
    """The best hit for `query` and the memories related to it: those similar to the query (as in a
    search), and those at least RELATED_SIMILARITY similar to the best hit itself even when the query
    is not (its neighbours; their similarity is theirs to the best hit times the best hit's to the
    query). Ranked and counted like a search. Raises InvalidRequest, NotFound."""
    text = _query(query)
    semantic.prepare(
        call.services, call.caller, text
    )  # embedded on another core while the records are sorted out
    count = _limit(limit)
    user = check_user_id(user_id)
    slug = call.kb_to_read(kb)
    memories = _candidates(call, slug, user, include_superseded)
    sims, fallen_back = _similarities(call, slug, text, memories, as_query=True)
    top = max(sims, default=None)
    if top is None or top < MIN_SIMILARITY:
        return RankedResult(memories=[])
    best = max((i for i, s in enumerate(sims) if s == top), key=lambda i: memories[i].id)  # ties: by id
    seed = memories[best]
    near, _ = _similarities(call, slug, seed.content, memories[:best] + memories[best + 1 :], as_query=False)
    near.insert(best, 0.0)  # the seed itself is no neighbour of its own
    kept: list[tuple[float, Memory]] = []
    for s, neighbour, m in zip(sims, near, memories, strict=True):
        if s >= MIN_SIMILARITY or neighbour >= RELATED_SIMILARITY or m is seed:
            # A neighbour is as relevant as the best hit is, times how close it is to it.
            kept.append((max(s, neighbour * top), m))
    return RankedResult(
        memories=_rank(call, slug, [m for _s, m in kept], [s for s, _m in kept], count, include_superseded),
        unembedded=fallen_back or None,
    )
