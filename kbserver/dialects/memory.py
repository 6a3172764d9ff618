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

from collections.abc import Sequence
from typing import Any

from kbserver.core import threads
from kbserver.core.errors import InvalidRequest
from kbserver.core.model import Create, Delete, Overwrite
from kbserver.dialects.memory_base import (
    _CATALOG,
    _SIMILAR_LIMIT,
    MODES,
    SIMILAR_THRESHOLD,
    _agent,
    _content,
    _find,
    _first_line,
    _metadata,
    _scope,
    _tags,
    _write,
    catalog,
)
from kbserver.dialects.memory_records import (
    FOLDER,
    Memory,
    new_id,
    now_iso,
    render_memory,
    visible,
)
from kbserver.dialects.memory_search import memory_search
from kbserver.dialects.registry import Dialect
from kbserver.dialects.results import (
    AddResult,
    DeleteResult,
    MemorySearchResult,
    Similar,
    TaskResult,
    UpdateResult,
)
from kbserver.dialects.session import DialectCall, retry_stale
from kbserver.dialects.typed_records import terms
from kbserver.services.reading import search as search_service

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
    similar = [Similar(id=m.id, content=m.content, score=round(s, 4)) for s, m in found[:_SIMILAR_LIMIT]]
    rendered = render_memory(memory)
    written = _write(
        call,
        slug,
        Create(path=memory.path, mode="create", content=rendered),
        rendered,
        f"memory: add {memory.id}: {_first_line(text)}",
    )
    return AddResult(id=memory.id, taskId=written.version, proposal=written.proposal, similar=similar)


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
        return UpdateResult(id=old.id, taskId=written.version, proposal=written.proposal)

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
        return DeleteResult(
            id=old.id, deleted=written.proposal is None, taskId=written.version, proposal=written.proposal
        )

    return retry_stale(attempt)


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
    return TaskResult(taskId=taskId, status="done" if done else "pending")


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
)
