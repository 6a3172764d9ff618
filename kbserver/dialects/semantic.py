"""The `semantic` tool set: memories ranked by meaning, importance and recency, with supersede and reminders.

Names and arguments are those of the article's memory server, so its skills work unchanged:
`store_memory`, `search_memories_by_semantics`, `recall_related`, `update_memory_importance`,
`list_due_memories`. Each memory is `memories/{id}.md` like the `memory` set's (same folder, same
record, kbserver.dialects.memory_records) with `memory_type`, `user_id`, `importance`, `superseded_by`,
`remind_at` and `recurrence` in its front matter; a store and an importance change are one version
each. Retrievals are counted in the control plane (kbserver.services.reading.memory_access): reads never make
a version. The rules (thresholds, ranking, reminders) are pure: kbserver.dialects.semantic_rules.

Scopes: an agent's memories carry its name as `agentId` and are seen only by it (as in the `memory`
set, also through memory_search); within them, `user_id` partitions: a search sees one user's
memories only. The admin's memories have no agentId and are seen by every agent of the KB.
"""

from __future__ import annotations

import logging

from kbserver.core.errors import NotFound
from kbserver.core.model import Create, FileChange, Overwrite
from kbserver.dialects.memory_records import (
    Memory,
    new_id,
    now_iso,
    parse_memory,
    render_memory,
)
from kbserver.dialects.registry import Dialect
from kbserver.dialects.results import (
    DueResult,
    ImportanceResult,
    RankedResult,
    StoreResult,
)
from kbserver.dialects.semantic_base import (
    _TOOL_SET,
    DEFAULT_USER,
    MAX_LIMIT,
    TOOLS,
    _agent,
    _find,
    _first_line,
    _measured,
    _records,
)
from kbserver.dialects.semantic_due import instructions, list_due_memories
from kbserver.dialects.semantic_recall import recall_related, search_memories_by_semantics
from kbserver.dialects.semantic_rules import (
    check_content,
    check_importance,
    check_memory_type,
    check_recurrence,
    check_user_id,
    parse_remind_at,
)
from kbserver.dialects.session import DialectCall, retry_stale
from kbserver.dialects.supersede import supersedes
from kbserver.services.reading import memory_access

__all__ = [
    "DEFAULT_USER",
    "DIALECT",
    "MAX_LIMIT",
    "TOOLS",
    "instructions",
    "list_due_memories",
    "recall_related",
    "search_memories_by_semantics",
    "store_memory",
    "update_memory_importance",
]

log = logging.getLogger(__name__)


# -- store and change ------------------------------------------------------------------------------
def store_memory(
    call: DialectCall,
    content: str,
    *,
    memory_type: str = "fact",
    user_id: str = DEFAULT_USER,
    importance: float = 0.5,
    remind_at: str | None = None,
    recurrence: str | None = None,
    kb: str | None = None,
) -> StoreResult:
    """Store one memory as one version. Live memories of the same agent, user_id and memory_type that
    it supersedes (at least SUPERSEDE_SIMILARITY similar, or updated: kbserver.dialects.supersede)
    are marked `superseded_by` it in the same version. Raises InvalidRequest and every error of the
    write path."""
    text = check_content(content)
    kind = check_memory_type(memory_type)
    user = check_user_id(user_id)
    weight = check_importance(importance)
    when = None if remind_at in (None, "") else str(remind_at).strip()
    if when is not None:
        parse_remind_at(when)
    rule = None if recurrence in (None, "") else check_recurrence(recurrence, when)
    slug = call.kb(kb)
    scope = _agent(call)
    now = now_iso()
    memory = Memory(
        id=new_id(),
        content=text,
        agentId=scope,
        memory_type=kind,  # type: ignore[arg-type]  # checked against MEMORY_TYPES above
        user_id=user,
        importance=weight,
        remind_at=when,
        recurrence=rule,
        createdAt=now,
        updatedAt=now,
    )
    max_old = max(0, call.services.limits(slug).max_files - 1)

    def attempt() -> StoreResult:
        live = [
            m
            for m in _records(call, slug)
            if m.memory_type == kind and m.user_id == user and m.agentId == scope and m.superseded_by is None
        ]
        sims, by_meaning = _measured(call, slug, text, live, as_query=False)
        old = sorted(
            (
                (s, m)
                for s, meant, m in zip(sims, by_meaning, live, strict=True)
                if supersedes(text, m.content, s, by_meaning=meant)
            ),
            key=lambda sm: (-sm[0], sm[1].id),
        )[:max_old]
        changes: list[FileChange] = [Create(path=memory.path, mode="create", content=render_memory(memory))]
        superseded: list[str] = []
        for _s, m in old:
            current = call.read(slug, m.path)
            record = parse_memory(current.content) if current is not None else None
            if current is None or record is None or record.superseded_by is not None:
                continue  # changed since the listing; the next listing sees it as it is
            marked = record.model_copy(update={"superseded_by": memory.id, "updatedAt": now})
            changes.append(
                Overwrite(
                    path=m.path,
                    mode="overwrite",
                    content=render_memory(marked),
                    expected_sha256=current.sha256,
                )
            )
            superseded.append(m.id)
        message = f"semantic memory: store {memory.id} ({kind} of user {user}): {_first_line(text)}"
        if superseded:
            message += f"; supersedes {', '.join(superseded)}"
        written = call.write(slug, changes, message, _TOOL_SET)
        return StoreResult(
            id=memory.id, taskId=written.version, superseded=superseded, proposal=written.proposal
        )

    return retry_stale(attempt)


def update_memory_importance(
    call: DialectCall,
    id: str,
    importance: float,
    *,
    user_id: str | None = None,
    kb: str | None = None,
) -> ImportanceResult:
    """Set a memory's importance in its front matter, as one version; its reinforced importance starts
    again from it. Raises NotFound, InvalidRequest and every error of the write path."""
    weight = check_importance(importance)
    user = None if user_id is None else check_user_id(user_id)
    slug = call.kb(kb)

    def attempt() -> ImportanceResult:
        old = _find(call, slug, id, user)
        current = call.read(slug, old.path)
        record = parse_memory(current.content) if current is not None else None
        if current is None or record is None:
            raise NotFound(f"no memory {id!r} in KB {slug}", id=id)
        out = ImportanceResult(id=old.id, importance=weight, taskId=None)
        if record.importance != weight:  # else nothing to change in the file: no version (taskId null)
            updated = record.model_copy(update={"importance": weight, "updatedAt": now_iso()})
            written = call.write(
                slug,
                [
                    Overwrite(
                        path=old.path,
                        mode="overwrite",
                        content=render_memory(updated),
                        expected_sha256=current.sha256,
                    )
                ],
                f"semantic memory: importance of {old.id} {record.importance} -> {weight}: "
                f"{_first_line(old.content)}",
                _TOOL_SET,
            )
            out = ImportanceResult(
                id=old.id, importance=weight, taskId=written.version, proposal=written.proposal
            )
            if written.proposal is not None:
                return out  # the file keeps its importance until an admin approves
        memory_access.reset_importance(call.services, call.caller, slug, old.id, weight)
        return out

    return retry_stale(attempt)


DIALECT = Dialect(
    name="semantic",
    tools=TOOLS,
    bind="kbserver.mcp.binders.semantic:tools",
    results={
        "store_memory": StoreResult,
        "search_memories_by_semantics": RankedResult,
        "recall_related": RankedResult,
        "update_memory_importance": ImportanceResult,
        "list_due_memories": DueResult,
    },
    folders=("memories/",),
    instructions=instructions,
)
