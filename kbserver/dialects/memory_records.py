"""Pure parts of the `memory` and `semantic` tool sets: one memory per file, times, scopes, similarity.

No I/O: records in, text out. A memory is `memories/{id}.md`: YAML front matter with every field but
the content, which is the Markdown body, so a person reads it in the web admin or a clone.
"""

from __future__ import annotations

import datetime
import re
import secrets
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from kbserver.core.errors import InvalidRequest
from kbserver.core.frontmatter import split_front_matter
from kbserver.dialects.typed_records import terms

__all__ = [
    "FOLDER",
    "MEMORY_TYPES",
    "Memory",
    "check_id",
    "new_id",
    "now_iso",
    "parse_memory",
    "parse_time",
    "render_memory",
    "similarity",
]

FOLDER = "memories/"
MEMORY_TYPES = ("fact", "preference", "task", "reflection")
_ID = re.compile(r"^[0-9a-f]{16}$")
_ORDER = (
    "id",
    "category",
    "tags",
    "agentId",
    "sessionId",
    "memory_type",
    "user_id",
    "importance",
    "superseded_by",
    "remind_at",
    "recurrence",
    "metadata",
    "createdAt",
    "updatedAt",
)


class Memory(BaseModel):
    """One memory. Fields of the `semantic` set (memory_type, user_id, ...) stay None for the other."""

    model_config = ConfigDict(extra="forbid")

    id: str
    content: str
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    agentId: str | None = None
    sessionId: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    createdAt: str
    updatedAt: str
    memory_type: Literal["fact", "preference", "task", "reflection"] | None = None
    user_id: str | None = None
    importance: float | None = None
    superseded_by: str | None = None
    remind_at: str | None = None
    recurrence: str | None = None

    @property
    def path(self) -> str:
        return f"{FOLDER}{self.id}.md"


def new_id() -> str:
    """16 random hex digits: unguessable, so a scoped memory's id reveals nothing about others."""
    return secrets.token_hex(8)


def check_id(value: object) -> str | None:
    """The id if it has the shape of one, else None (the caller answers not_found)."""
    return value if isinstance(value, str) and _ID.match(value) else None


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str, field: str) -> datetime.datetime:
    """An RFC 3339 time with its offset (`2026-12-01T10:00:00Z`). Raises InvalidRequest."""
    if not isinstance(value, str) or not re.match(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}", value):
        raise InvalidRequest(
            f"{field} must be an RFC 3339 time such as 2026-12-01T10:00:00Z", **{field: value}
        )
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise InvalidRequest(
            f"{field} must be an RFC 3339 time such as 2026-12-01T10:00:00Z", **{field: value}
        ) from None
    if parsed.tzinfo is None:
        raise InvalidRequest(f"{field} needs a time zone offset (Z or +01:00)", **{field: value})
    return parsed


def render_memory(memory: Memory) -> str:
    """The memory as Markdown with YAML front matter (deterministic: fixed order, no folding)."""
    data = memory.model_dump()
    content = data.pop("content")
    front = {k: data[k] for k in _ORDER if data.get(k) not in (None, [], {}) or k in ("id", "createdAt")}
    dumped = yaml.safe_dump(front, allow_unicode=True, sort_keys=False, width=float("inf"))
    return f"---\n{dumped}---\n\n{content}\n"


def parse_memory(text: str) -> Memory | None:
    """The memory in a file, or None when the file is not one (someone wrote it by hand)."""
    split = split_front_matter(text)
    if split is None:
        return None
    parsed, body = split
    front = {str(k): v for k, v in parsed.items()}
    body = body[1:] if body.startswith("\n") else body
    body = body[:-1] if body.endswith("\n") else body
    front.setdefault("updatedAt", front.get("createdAt"))
    for key in ("createdAt", "updatedAt", "remind_at"):  # YAML reads unquoted times as datetimes
        when = front.get(key)
        if isinstance(when, datetime.datetime):
            front[key] = when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        return Memory.model_validate({**front, "content": body})
    except ValueError:
        return None


def similarity(a: str, b: str) -> float:
    """Word overlap of two texts (Jaccard over words, CJK as bigrams), in [0, 1].

    Cheap enough for the request path, where `memory_add` reports look-alikes: the embedding of a
    new memory is made later, by the follower.
    """
    x, y = set(terms(a)), set(terms(b))
    if not x or not y:
        return 0.0
    return len(x & y) / len(x | y)


def visible(memory: Memory, agent: str | None) -> bool:
    """A memory with an agentId is seen only by that agent (`agent` None: the admin sees all)."""
    return agent is None or memory.agentId is None or memory.agentId == agent
