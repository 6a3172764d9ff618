"""Dialect-owned files as a person reads them: the memory's text, then its type, scope, importance,
times, source and what it supersedes; and a one-line title for lists. Pure: text in, fields out."""

from __future__ import annotations

from dataclasses import dataclass, field

from kbserver.core.frontmatter import split_front_matter
from kbserver.dialects import registry
from kbserver.dialects.memory_records import FOLDER as MEMORIES

__all__ = [
    "FIELD_WORDS",
    "RecordView",
    "field_words",
    "is_dialect_path",
    "title_of",
    "value_words",
    "view_of",
]

_TITLE = 80  # characters of a title shown in a list


@dataclass
class RecordView:
    """What a memory file says, in the order a reviewer reads it (None: the file does not say)."""

    text: str
    type: str | None = None
    scope: str | None = None  # "user bob", "agent alice", "session s1"
    importance: str | None = None
    created: str | None = None
    updated: str | None = None
    source: str | None = None
    supersedes: list[str] = field(default_factory=list)  # ids of memories this one replaced
    superseded_by: str | None = None
    fields: dict[str, str] = field(default_factory=dict)  # every front-matter field as text
    owner: str | None = None  # the agent whose private memory this is (its agentId under memories/)
    user: str | None = None  # the user it is about, when it names one besides the default

    @property
    def scope_words(self) -> str:
        """Who may read it, in words: `private to agent bob`, `shared, about user ann`, ..."""
        about = f", about user {self.user}" if self.user else ""
        if self.owner:
            return f"private to agent {self.owner}{about}"
        if self.scope and self.scope.startswith("agent "):
            return f"kept by agent {self.scope[6:]}, shared{about}"
        if self.scope and self.scope.startswith("session "):
            return f"shared, from session {self.scope[8:]}{about}"
        return f"shared with every agent of the KB{about}"


FIELD_WORDS = {
    "agentId": "agent",
    "agent_id": "agent",
    "memory_type": "type",
    "user_id": "user",
    "sessionId": "session",
    "createdAt": "created",
    "updatedAt": "updated",
    "superseded_by": "superseded by",
    "source_refs": "sources",
    "saved_reason": "reason saved",
    "metadata": "details",
}
"""Front-matter keys as a person reads them (any other key: its underscores as spaces)."""


def field_words(key: str) -> str:
    """A front-matter key in words: `memory_type` -> `type`, `createdAt` -> `created`."""
    return FIELD_WORDS.get(key, key.replace("_", " "))


def value_words(value: object) -> str:
    """A front-matter value in words: a mapping as `key: value` pairs, a list of mappings counted,
    never a Python repr."""
    if isinstance(value, dict):
        return "; ".join(
            f"{field_words(str(k))}: {value_words(v)}" for k, v in value.items() if v not in ("", None)
        )
    if isinstance(value, list):
        if any(isinstance(v, dict | list) for v in value):
            return f"{len(value)} entr{'y' if len(value) == 1 else 'ies'}"
        return ", ".join(str(v) for v in value)
    return str(value)


def is_dialect_path(path: str) -> bool:
    """Whether a memory tool set owns `path` (the folders the dialects declare: memories/, memory-tool/,
    memory/, the typed folders, and any installed dialect's)."""
    return path.startswith(registry.folders())


def _split(text: str) -> tuple[dict[str, object], str]:
    split = split_front_matter(text)
    if split is None:
        return {}, text
    front, body = split
    return {str(k): v for k, v in front.items()}, body.strip("\n")


def _text(value: object) -> str | None:
    if value is None or value in ("", [], {}):
        return None
    return value_words(value)


def view_of(path: str, text: str) -> RecordView | None:
    """The record in a dialect-owned file, or None for any other file."""
    if not is_dialect_path(path):
        return None
    front, body = _split(text)
    get = front.get
    scope = next(
        (
            f"{name} {get(key)}"
            for name, key in (("user", "user_id"), ("agent", "agentId"), ("session", "sessionId"))
            if get(key)
        ),
        None,
    )
    metadata = get("metadata") if isinstance(get("metadata"), dict) else {}
    assert isinstance(metadata, dict)
    source = get("source") or metadata.get("source") or get("source_refs") or get("saved_reason")
    supersedes = get("supersedes") or metadata.get("supersedes") or []
    return RecordView(
        text=body,
        type=_text(get("memory_type") or get("type") or get("category")),
        scope=scope,
        importance=_text(get("importance")),
        created=_text(get("createdAt") or get("created")),
        updated=_text(get("updatedAt") or get("updated")),
        source=_text(source),
        supersedes=[str(s) for s in supersedes] if isinstance(supersedes, list) else [str(supersedes)],
        superseded_by=_text(get("superseded_by")),
        fields={k: v for k, v in ((k, _text(val)) for k, val in front.items()) if v is not None},
        owner=_text(get("agentId")) if path.startswith(MEMORIES) else None,
        user=_text(get("user_id")) if get("user_id") not in (None, "", "default") else None,
    )


def title_of(path: str, text: str) -> str | None:
    """A dialect-owned file's title or first line of text (at most 80 characters), else None."""
    if not is_dialect_path(path):
        return None
    front, body = _split(text)
    named = front.get("title") or front.get("name")
    line = (
        str(named) if named else next((ln.strip(" #\t") for ln in body.splitlines() if ln.strip(" #\t")), "")
    )
    if not line:
        return None
    return line if len(line) <= _TITLE else line[: _TITLE - 1].rstrip() + "…"
