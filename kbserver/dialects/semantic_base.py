"""What every part of the `semantic` dialect shares: its limits, the caller's records and the
similarity of a text to them (the embeddings' cosine, else word overlap)."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import cast

from kbserver.core.errors import InvalidRequest, NotFound
from kbserver.dialects.memory import catalog
from kbserver.dialects.memory_records import (
    Memory,
    check_id,
    similarity,
    visible,
)
from kbserver.dialects.semantic_rules import (
    coverage,
)
from kbserver.dialects.session import DialectCall
from kbserver.services.reading import semantic

__all__ = ["DEFAULT_USER", "DUE_WINDOW", "MAX_LIMIT", "TOOLS"]

TOOLS = (
    "store_memory",
    "search_memories_by_semantics",
    "recall_related",
    "update_memory_importance",
    "list_due_memories",
)
DEFAULT_USER = "default"
MAX_LIMIT = 100
DUE_WINDOW = datetime.timedelta(hours=1)
"""list_due_memories without `before`, and the session instructions, look this far ahead."""
_TOOL_SET = "semantic"
_DEFAULT_IMPORTANCE = 0.5  # of a record whose file lost its importance (edited by hand)


def _agent(call: DialectCall) -> str | None:
    return None if call.caller.is_admin else call.caller.name


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _iso(when: datetime.datetime) -> str:
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _first_line(text: str, width: int = 60) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def _limit(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidRequest(f"limit must be between 1 and {MAX_LIMIT}", limit=value)
    return value


def _records(call: DialectCall, slug: str) -> list[Memory]:
    """The `semantic` memories of `slug` the caller may see (records of this set have a memory_type)."""
    agent = _agent(call)
    return [m for m in catalog(call, slug).values() if m.memory_type is not None and visible(m, agent)]


def _find(call: DialectCall, slug: str, memory_id: object, user_id: str | None) -> Memory:
    """The caller's memory `memory_id` (of `user_id` when given). Raises NotFound, also for a memory of
    another agent, another user or another tool set."""
    checked = check_id(memory_id)
    found = next((m for m in _records(call, slug) if m.id == checked), None) if checked else None
    if found is None or (user_id is not None and found.user_id != user_id):
        raise NotFound(f"no memory {memory_id!r} in KB {slug}", id=memory_id)
    return found


def _similarities(
    call: DialectCall, slug: str, text: str, memories: Sequence[Memory], *, as_query: bool
) -> tuple[list[float], int]:
    """Similarity of `text` to each memory: the embeddings' cosine, else (no embedder, or a memory not
    embedded yet and beyond what is embedded on the spot) word overlap; and how many fell back."""
    sims, by_meaning = _measured(call, slug, text, memories, as_query=as_query)
    no_embedder = not semantic.enabled(call.services)
    return sims, 0 if no_embedder else by_meaning.count(False)


def _measured(
    call: DialectCall, slug: str, text: str, memories: Sequence[Memory], *, as_query: bool
) -> tuple[list[float], list[bool]]:
    """`_similarities`, with whether each one is the embeddings' cosine (else word overlap)."""
    if not memories:
        return [], []
    contents = [m.content for m in memories]
    cosines = semantic.similarities(call.services, call.caller, slug, text, contents, as_query=as_query)
    fallback = coverage if as_query else similarity
    if cosines is None:
        return [fallback(text, c) for c in contents], [False] * len(contents)
    if None not in cosines:  # every memory embedded: the common case, 10,000 of them at 10,000
        return cast(list[float], cosines), [True] * len(contents)
    out = [fallback(text, c) if s is None else s for s, c in zip(cosines, contents, strict=True)]
    return out, [s is not None for s in cosines]
