"""What every part of the `memory` dialect shares: its limits, the catalogue of a KB's memories (kept
in step with main), and the checks and rendering of one memory."""

from __future__ import annotations

from collections.abc import KeysView, Mapping, Sequence
from typing import Any

from kbserver.core.errors import Forbidden, InvalidRequest, NotFound
from kbserver.core.model import FileChange
from kbserver.dialects.catalog import Catalog, Snapshot, Views
from kbserver.dialects.memory_records import (
    FOLDER,
    Memory,
    check_id,
    parse_memory,
    visible,
)
from kbserver.dialects.results import (
    MemoryItem,
)
from kbserver.dialects.session import DialectCall, Written
from kbserver.dialects.typed_records import terms

__all__ = ["CANDIDATES", "KEYWORD_CANDIDATES", "MAX_LIMIT", "MODES", "SIMILAR_THRESHOLD", "catalog"]

MODES = ("hybrid", "keyword", "semantic")
MAX_LIMIT = 100
SIMILAR_THRESHOLD = 0.5
"""Word overlap (Jaccard) from which `memory_add` reports an existing memory as `similar`."""
CANDIDATES = 100
"""Semantic candidates fused per hybrid search (more for a deeper page), and keyword mode's."""
KEYWORD_CANDIDATES = 50
"""Keyword candidates fused per hybrid search: the 51st-100th by BM25 hold a common word or two, and
their coverage lifted them over answers closer in meaning (docs/performance.md, "Measurements behind
the code"). Fixed, not widened for deeper pages, so that pages of one ranking agree."""
_SIMILAR_LIMIT = 5  # look-alikes returned by memory_add
_TOOL_SET = "memory"


# -- the catalogue: every memory of a KB, kept in step with main --------------------------------------
def _parse(path: str, text: str) -> Memory | None:
    memory = parse_memory(text)
    if memory is None or memory.path != path:
        return None  # a file written by hand, or a copy under another name: not a memory of this set
    return memory


_CATALOG: Catalog[Memory] = Catalog(FOLDER, _parse, lambda m: terms(m.content))


# The memories a search's filters let through, kept per filter: checking each memory on every search
# is a visible share of a search at 10,000 memories.
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
    return MemoryItem(
        id=memory.id,
        content=memory.content,
        category=memory.category,
        tags=memory.tags,
        agentId=memory.agentId,
        sessionId=memory.sessionId,
        metadata=memory.metadata,
        createdAt=memory.createdAt,
        updatedAt=memory.updatedAt,
        score=None if score is None else round(score, 4),
    )


def _first_line(text: str, width: int = 60) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= width else line[: width - 1] + "…"
