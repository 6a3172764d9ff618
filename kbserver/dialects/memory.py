"""The `memory` tool set: atomic facts with scopes, filters, conflict history and hybrid search.

Names and arguments are those of the Datadata-style memory tools, so their skills work unchanged:
`memory_add`, `memory_search`, `memory_update`, `memory_delete`, `memory_task_wait`. Each memory is
`memories/{id}.md` (kbserver.dialects.memory_records); each add, update and delete is one version.
`taskId` is that version: `memory_task_wait` returns `done` once the keyword index and the vectors
both cover it. Search ranks by keywords (BM25), by meaning (embeddings) or by both fused
(kbserver.services.reading.hybrid); memories not embedded yet are still found by their words, and the result
says how many there are.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, KeysView, Mapping, Sequence
from typing import Any

from kbserver.core import threads
from kbserver.core.errors import Forbidden, InvalidRequest, NotFound
from kbserver.core.model import Create, Delete, FileChange, Overwrite
from kbserver.dialects.catalog import Catalog, Snapshot, Views
from kbserver.dialects.memory_records import (
    FOLDER,
    Memory,
    check_id,
    new_id,
    now_iso,
    parse_memory,
    parse_time,
    render_memory,
    visible,
)
from kbserver.dialects.registry import Dialect
from kbserver.dialects.results import (
    AddResult,
    DeleteResult,
    MemoryItem,
    MemorySearchResult,
    Similar,
    TaskResult,
    UpdateResult,
)
from kbserver.dialects.session import DialectCall, Written, retry_stale
from kbserver.dialects.typed_records import terms
from kbserver.services.reading import search as search_service
from kbserver.services.reading import semantic
from kbserver.services.reading.hybrid import Fusion, Ranked, fuse

__all__ = [
    "DIALECT",
    "MODES",
    "SIMILAR_THRESHOLD",
    "TOOLS",
    "catalog",
    "memory_add",
    "memory_delete",
    "memory_search",
    "memory_task_wait",
    "memory_update",
]

TOOLS = ("memory_add", "memory_search", "memory_update", "memory_delete", "memory_task_wait")
MODES = ("hybrid", "keyword", "semantic")
MAX_LIMIT = 100
SIMILAR_THRESHOLD = 0.5
"""Word overlap (Jaccard) from which `memory_add` reports an existing memory as `similar`."""
CANDIDATES = 100
"""Semantic candidates fused per hybrid search (more for a deeper page), and keyword mode's."""
KEYWORD_CANDIDATES = 50
"""Keyword candidates fused per hybrid search: the 51st-100th by BM25 hold a common word or two, and
their coverage lifted them over answers closer in meaning (bench.recall R@5 0.940 -> 0.955 at 50;
REALTALK unchanged). Fixed, not widened for deeper pages, so that pages of one ranking agree."""
_SIMILAR_LIMIT = 5  # look-alikes returned by memory_add
_TOOL_SET = "memory"


# -- the catalogue: every memory of a KB, kept in step with main --------------------------------------
def _parse(path: str, text: str) -> Memory | None:
    memory = parse_memory(text)
    if memory is None or memory.path != path:
        return None  # a file written by hand, or a copy under another name: not a memory of this set
    return memory


_CATALOG: Catalog[Memory] = Catalog(FOLDER, _parse, lambda m: terms(m.content))


# Checking each of 10,000 memories against a search's filters took 3-8 ms of every search.
_VIEWS: Views[Memory, tuple[Mapping[str, Memory], KeysView[str]]] = Views()


def catalog(call: DialectCall, slug: str) -> dict[str, Memory]:
    """The current memories of `slug` (parsed files of memories/), whoever may see them. Raises NotFound."""
    return dict(_CATALOG.snapshot(call, slug).records)


def _agent(call: DialectCall) -> str | None:
    return None if call.caller.is_admin else call.caller.name


def _scope(call: DialectCall, agent_id: str | None) -> str | None:
    """The agentId to record: yours, or none (shared). Raises Forbidden for another agent's."""
    if agent_id is None or agent_id == "":
        return None
    if not isinstance(agent_id, str):
        raise InvalidRequest("agentId must be a string")
    if call.caller.is_admin or agent_id == call.caller.name:
        return agent_id
    raise Forbidden(
        f"agentId must be your own agent name ({call.caller.name}): a memory with an agentId is "
        "private to that agent",
        agentId=agent_id,
    )


def _content(value: object) -> str:
    text = value.strip() if isinstance(value, str) else ""
    if not text:
        raise InvalidRequest("content must not be empty")
    return text


def _tags(value: Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not all(isinstance(t, str) for t in value):
        raise InvalidRequest("tags must be a list of strings")
    return list(dict.fromkeys(t.strip() for t in value if t.strip()))


def _metadata(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidRequest("metadata must be an object")
    return dict(value)


def _find(call: DialectCall, slug: str, memory_id: object) -> tuple[Memory, str]:
    """The memory `memory_id` as the caller may see it, and its file's sha256 (for expected_sha256).
    Raises NotFound (also for another agent's scoped memory)."""
    checked = check_id(memory_id)
    snapshot: Snapshot[Memory] = _CATALOG.snapshot(call, slug)
    path = f"{FOLDER}{checked}.md"
    memory = snapshot.records.get(path) if checked else None
    if memory is None or not visible(memory, _agent(call)):
        raise NotFound(f"no memory {memory_id!r} in KB {slug}", id=memory_id)
    return memory, snapshot.sha256s[path]


def _write(call: DialectCall, slug: str, change: FileChange, text: str | None, message: str) -> Written:
    """One version of one memory file; the catalogue moves along (no diff)."""
    written = call.write(slug, [change], message, _TOOL_SET)
    _CATALOG.note(call, slug, written, {change.path: text})
    return written


def _result(memory: Memory, score: float | None = None) -> MemoryItem:
    out: MemoryItem = {
        "id": memory.id,
        "content": memory.content,
        "category": memory.category,
        "tags": memory.tags,
        "agentId": memory.agentId,
        "sessionId": memory.sessionId,
        "metadata": memory.metadata,
        "createdAt": memory.createdAt,
        "updatedAt": memory.updatedAt,
    }
    if score is not None:
        out["score"] = round(score, 4)
    return out


def _first_line(text: str, width: int = 60) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= width else line[: width - 1] + "…"


# -- the tools -------------------------------------------------------------------------------------
def memory_add(
    call: DialectCall,
    content: str,
    *,
    category: str | None = None,
    tags: Sequence[str] | None = None,
    agentId: str | None = None,
    sessionId: str | None = None,
    metadata: dict[str, Any] | None = None,
    kb: str | None = None,
) -> AddResult:
    """Store one memory as one version; `similar` lists existing memories that say much the same."""
    text = _content(content)
    scope = _scope(call, agentId)
    slug = call.kb(kb)
    now = now_iso()
    memory = Memory(
        id=new_id(),
        content=text,
        category=category or None,
        tags=_tags(tags),
        agentId=scope,
        sessionId=sessionId or None,
        metadata=_metadata(metadata),
        createdAt=now,
        updatedAt=now,
    )
    agent = _agent(call)
    found = _CATALOG.similar(call, slug, terms(text), SIMILAR_THRESHOLD, lambda m: visible(m, agent))
    similar: list[Similar] = [
        {"id": m.id, "content": m.content, "score": round(s, 4)} for s, m in found[:_SIMILAR_LIMIT]
    ]
    rendered = render_memory(memory)
    written = _write(
        call,
        slug,
        Create(path=memory.path, mode="create", content=rendered),
        rendered,
        f"memory: add {memory.id}: {_first_line(text)}",
    )
    return {"id": memory.id, **written.task(), "similar": similar}


def memory_update(
    call: DialectCall,
    id: str,
    content: str,
    *,
    tags: Sequence[str] | None = None,
    category: str | None = None,
    agentId: str | None = None,
    metadata: dict[str, Any] | None = None,
    kb: str | None = None,
) -> UpdateResult:
    """Change a memory in place (same id). A new content pushes the old one onto metadata.history."""
    text = _content(content)
    slug = call.kb(kb)
    new_tags = None if tags is None else _tags(tags)
    new_meta = None if metadata is None else _metadata(metadata)
    scope = None if agentId is None else _scope(call, agentId)

    def attempt() -> UpdateResult:
        old, sha256 = _find(call, slug, id)
        now = now_iso()
        meta = dict(old.metadata if new_meta is None else new_meta)
        history = [h for h in old.metadata.get("history", []) if isinstance(h, dict)]
        if text != old.content:
            history = [{"value": old.content, "updatedAt": old.updatedAt}, *history]
        if history:
            meta["history"] = history
        updated = old.model_copy(
            update={
                "content": text,
                "tags": old.tags if new_tags is None else new_tags,
                "category": old.category if category is None else (category or None),
                "agentId": old.agentId if agentId is None else scope,
                "metadata": meta,
                "updatedAt": now,
            }
        )
        rendered = render_memory(updated)
        written = _write(
            call,
            slug,
            Overwrite(path=old.path, mode="overwrite", content=rendered, expected_sha256=sha256),
            rendered,
            f"memory: update {old.id}: {_first_line(text)}",
        )
        return {"id": old.id, **written.task()}

    return retry_stale(attempt)


def memory_delete(call: DialectCall, id: str, *, kb: str | None = None) -> DeleteResult:
    """Delete a memory as one version (the old record stays in the history: a revert brings it back)."""
    slug = call.kb(kb)

    def attempt() -> DeleteResult:
        old, sha256 = _find(call, slug, id)
        written = _write(
            call,
            slug,
            Delete(path=old.path, mode="delete", expected_sha256=sha256),
            None,
            f"memory: delete {old.id}: {_first_line(old.content)}",
        )
        return {"id": old.id, "deleted": written.proposal is None, **written.task()}

    return retry_stale(attempt)


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
            found = search_service.candidates(
                call.services, call.caller, slug, search, limit=KEYWORD_CANDIDATES, prefix=FOLDER
            )
            keyword = [Ranked(c.path, c.score) for c in found if c.path in memories]
            covered = {c.path: c.coverage for c in found if c.path in memories}
        elif mode == "keyword":
            keyword = _keyword(call, slug, search, memories)
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
    out: MemorySearchResult = {
        "memories": [_result(memories[r.key], r.score if search.strip() and scored else None) for r in page],
        "total": total,
    }
    if unembedded is not None:
        out["unembedded"] = unembedded
    return out


def _any_superseded(snapshot: Snapshot[Memory]) -> bool:
    return any(m.superseded_by is not None for m in snapshot.records.values())


def _passing(
    snapshot: Snapshot[Memory], passes: Callable[[Memory], bool] | None
) -> tuple[Mapping[str, Memory], KeysView[str]]:
    """The memories of `snapshot` that `passes` (None: all), and their paths."""
    records = snapshot.records
    memories = records if passes is None else {p: m for p, m in records.items() if passes(m)}
    return memories, memories.keys()


def _keyword(call: DialectCall, slug: str, search: str, memories: Mapping[str, Memory]) -> list[Ranked]:
    found = search_service.query(
        call.services, call.caller, slug, search, limit=CANDIDATES, prefix=FOLDER, snippets=False
    )
    return [Ranked(h.path, h.score) for h in found.hits if h.path in memories]


async def memory_task_wait(
    call: DialectCall,
    taskId: str,
    timeout: float = 60,
    *,
    kb: str | None = None,
) -> TaskResult:
    """`done` once every sink (the keyword index and the vectors) covers version `taskId`, else
    `pending` after `timeout` seconds (at most MAX_WAIT_SECONDS). Holds no thread while it waits.
    Raises NotFound, InvalidRequest."""
    if not isinstance(taskId, str) or not taskId:
        raise InvalidRequest("taskId must be the taskId a memory tool returned")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0:
        raise InvalidRequest("timeout must be a number of seconds, 0 or more", timeout=timeout)
    slug = await threads.run(call.kb_to_read, kb)
    # A longer wait than the service allows answers `pending` after the longest one instead of failing:
    # the caller asks again.
    wait = min(float(timeout), search_service.MAX_WAIT_SECONDS)
    done = await search_service.wait_for(call.services, call.caller, slug, taskId, wait)
    return {"taskId": taskId, "status": "done" if done else "pending"}


DIALECT = Dialect(
    name="memory",
    tools=TOOLS,
    bind="kbserver.mcp.binders.memory:tools",
    results={
        "memory_add": AddResult,
        "memory_search": MemorySearchResult,
        "memory_update": UpdateResult,
        "memory_delete": DeleteResult,
        "memory_task_wait": TaskResult,
    },
    folders=(FOLDER,),
    summary="atomic facts as memories/{id}.md, searched by words and meaning",
)
