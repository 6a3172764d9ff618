"""memory_search of the `memory` dialect: words (BM25) and meaning, fused, over the memories the caller
may see, with its filters; an empty search lists the newest first."""

from __future__ import annotations

import datetime
from collections.abc import Callable, KeysView, Mapping

from kbserver.core.errors import InvalidRequest
from kbserver.dialects.catalog import Snapshot
from kbserver.dialects.memory_base import (
    _CATALOG,
    _VIEWS,
    CANDIDATES,
    KEYWORD_CANDIDATES,
    MAX_LIMIT,
    MODES,
    _agent,
    _result,
)
from kbserver.dialects.memory_records import (
    FOLDER,
    Memory,
    parse_time,
    visible,
)
from kbserver.dialects.memory_words import plain
from kbserver.dialects.results import (
    MemorySearchResult,
)
from kbserver.dialects.session import DialectCall
from kbserver.services.reading import search as search_service
from kbserver.services.reading import semantic
from kbserver.services.reading.hybrid import Fusion, Ranked, fuse

__all__ = ["memory_search"]


def _time(value: str | None, field: str) -> datetime.datetime | None:
    return None if value in (None, "") else parse_time(str(value), field)


def memory_search(
    call: DialectCall,
    search: str,
    *,
    limit: int = 10,
    offset: int = 0,
    agentId: str | None = None,
    category: str | None = None,
    sessionId: str | None = None,
    startTime: str | None = None,
    endTime: str | None = None,
    mode: str = "hybrid",
    kb: str | None = None,
) -> MemorySearchResult:
    """Memories the caller may see that pass every filter, ranked for `search` (newest first when
    `search` is empty), with `total` and, while some are not embedded yet, `unembedded`."""
    if mode not in MODES:
        raise InvalidRequest(f"mode must be one of {', '.join(MODES)}", mode=mode)
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"limit must be between 1 and {MAX_LIMIT}", limit=limit)
    if not isinstance(offset, int) or offset < 0:
        raise InvalidRequest("offset must be 0 or more", offset=offset)
    if not isinstance(search, str):
        raise InvalidRequest("search must be a text")
    start, end = _time(startTime, "startTime"), _time(endTime, "endTime")
    slug = call.kb_to_read(kb)
    agent = _agent(call)

    def passes(m: Memory) -> bool:
        if not visible(m, agent) or m.superseded_by is not None:
            return False
        if agentId is not None and m.agentId != agentId:
            return False
        if category is not None and m.category != category:
            return False
        if sessionId is not None and m.sessionId != sessionId:
            return False
        if start is not None or end is not None:
            created = parse_time(m.createdAt, "createdAt")
            if (start is not None and created < start) or (end is not None and created > end):
                return False
        return True

    snapshot = _CATALOG.snapshot(call, slug)
    unfiltered = agent is None and all(f is None for f in (agentId, category, sessionId, start, end))
    # The admin without filters sees every memory: no copy. `allow` is the same object while the KB
    # does not change, so the vectors check it against their paths once, not on every search.
    # A `semantic` memory that a newer one superseded is history: searches skip it (CONTRACT §5).
    memories, allow = _VIEWS.get(
        snapshot,
        (agent, agentId, category, sessionId, start, end),
        lambda: _passing(snapshot, None if unfiltered and not _any_superseded(snapshot) else passes),
    )
    unembedded: int | None = None
    if not search.strip():
        ranked = [Ranked(p, 0.0) for p in sorted(memories, key=lambda p: memories[p].createdAt, reverse=True)]
        total = len(ranked)
    else:
        keyword: list[Ranked] = []
        covered: dict[str, float] = {}  # hybrid: the keyword candidates' word coverage
        if mode == "hybrid":
            semantic.prepare(call.services, call.caller, search)  # embedded on another core meanwhile
            found = _candidates(call, slug, plain(search), memories, KEYWORD_CANDIDATES, snapshot, True)
            keyword = [Ranked(c.path, c.score) for c in found]
            covered = {c.path: c.coverage for c in found}
        elif mode == "keyword":
            keyword = _keyword(call, slug, search, memories, snapshot)
        total = len(keyword)
        if mode in ("hybrid", "semantic"):
            # Enough of the best by meaning for this page, and the keyword candidates' scores: the
            # fused top places are those of the whole ranking (fuse's semantic_floor), without
            # ranking every memory in Python.
            wanted = max(CANDIDATES, offset + limit)
            ranking = semantic.ranked(
                call.services,
                call.caller,
                slug,
                search,
                limit=wanted,
                allow=allow,  # the same object while the KB does not change: checked once
                include=[r.key for r in keyword],  # their meaning counts in the fusion too
            )
            by_meaning = [Ranked(h.path, h.score) for h in ranking.hits if h.path in memories]
            words_only: set[str] = set()
            if semantic.enabled(call.services):
                embedded = ranking.ranked  # the memories with a vector
                if len(memories) > embedded:  # ranked by their words only until the follower embeds them
                    unembedded = len(memories) - embedded
                # Every memory with a vector is ranked by meaning, the others only by their words.
                words_only = {r.key for r in keyword if r.key not in ranking.covered}
                total = embedded + (len(words_only) if mode == "hybrid" else 0)
            else:
                total = len(keyword) if mode == "hybrid" else 0
            if mode == "semantic":
                ranked = by_meaning
            elif ranking.floor is None:  # nothing has a vector (yet): the words alone rank
                ranked = keyword
            else:
                fusion = Fusion(keyword_weight=call.services.options.keyword_weight)
                ranked = fuse(
                    keyword,
                    by_meaning,
                    fusion,
                    semantic_floor=ranking.floor,
                    coverage=covered,  # from the same index read as the candidates
                    keyword_only=words_only,  # not embedded yet: their words stand in for their meaning
                )
        else:
            ranked = keyword
    page = ranked[offset : offset + limit]
    scored = mode != "keyword" or bool(search.strip())
    return MemorySearchResult(
        memories=[_result(memories[r.key], r.score if search.strip() and scored else None) for r in page],
        total=total,
        unembedded=unembedded,
    )


def _any_superseded(snapshot: Snapshot[Memory]) -> bool:
    return any(m.superseded_by is not None for m in snapshot.records.values())


def _passing(
    snapshot: Snapshot[Memory], passes: Callable[[Memory], bool] | None
) -> tuple[Mapping[str, Memory], KeysView[str]]:
    """The memories of `snapshot` that `passes` (None: all), and their paths."""
    records = snapshot.records
    memories = records if passes is None else {p: m for p, m in records.items() if passes(m)}
    return memories, memories.keys()


def _keyword(
    call: DialectCall, slug: str, search: str, memories: Mapping[str, Memory], snapshot: Snapshot[Memory]
) -> list[Ranked]:
    """Keyword mode's ranking: the search box's, operators and all; when that finds no memory and the
    search quotes (a question citing a message quotes words no memory holds as one phrase), the
    ranking with its quotes read as plain words rather than nothing; -word still excludes."""
    found = _candidates(call, slug, search, memories, CANDIDATES, snapshot, False)
    if not found and '"' in search:
        found = _candidates(call, slug, search.replace('"', " "), memories, CANDIDATES, snapshot, False)
    return [Ranked(c.path, c.score) for c in found]


def _candidates(
    call: DialectCall,
    slug: str,
    search: str,
    memories: Mapping[str, Memory],
    wanted: int,
    snapshot: Snapshot[Memory],
    coverage: bool,
) -> list[search_service.Candidate]:
    """The best `wanted` keyword hits among `memories`, those passing the search's filters. The index
    ranks every memory: while a filter (endTime, another agent's private ones) leaves fewer than
    `wanted` of its best, it is asked deeper (up to MAX_CANDIDATES), so the candidates are those of a
    search over the passing memories alone. The first ask is twice as deep as the share passing
    suggests: the best matches need not spread evenly (a question matches its own time best), and
    each ask is a whole search."""
    everything = len(snapshot.records)
    if not memories:
        return []
    depth = wanted if len(memories) >= everything else -(-2 * wanted * everything // len(memories))
    while True:
        depth = min(depth, search_service.MAX_CANDIDATES)
        found = search_service.candidates(
            call.services, call.caller, slug, search, limit=depth, prefix=FOLDER, coverage=coverage
        )
        kept = [c for c in found if c.path in memories]
        if len(kept) >= wanted or len(found) < depth or depth >= search_service.MAX_CANDIDATES:
            return kept[:wanted]
        depth *= 4
