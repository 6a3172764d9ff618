"""A write in words for a list a person scans: "added 2 memories", "edited notes/plan.md: +3 -1 lines"
(with a minus sign)."""

from __future__ import annotations

from kbserver.dialects.record_view import is_dialect_path
from kbserver.services.models import DiffEntry
from kbserver.web.markup import parse_patch

__all__ = ["in_words"]

_NAMED = 2  # other files a summary names one by one; past that it counts them
_MINUS = "\u2212"  # the minus sign the diff's counts show
_VERBS = {"added": "added", "modified": "changed", "deleted": "removed"}


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _lines(added: int, deleted: int) -> str:
    word = f"line{'' if max(added, deleted) == 1 and min(added, deleted) == 0 else 's'}"
    if not deleted:
        return f"+{added} {word}"
    if not added:
        return f"{_MINUS}{deleted} {word}"
    return f"+{added} {_MINUS}{deleted} {word}"


def in_words(diff: list[DiffEntry]) -> str:
    """What a version's diff does, in a few words: memories counted by what happened to them, other
    files named (or counted, past _NAMED) with the lines they gained and lost."""
    memories: dict[str, int] = {}
    others = []
    for entry in diff:
        if is_dialect_path(entry.path) and not entry.path.startswith("memory-tool/"):  # its files are files
            memories[entry.change] = memories.get(entry.change, 0) + 1
        else:
            others.append(parse_patch(entry.path, entry.change, entry.patch))
    parts = [f"{_VERBS[c]} {n} memor{'y' if n == 1 else 'ies'}" for c, n in memories.items()]
    if len(others) > _NAMED:
        plus, minus = sum(f.added for f in others), sum(f.deleted for f in others)
        parts.append(f"edited {_count(len(others), 'file')}: {_lines(plus, minus)}")
    else:
        for f in others:
            verb = {"added": "created", "deleted": "deleted"}.get(f.change, "edited")
            detail = "" if f.change == "deleted" else f": {_lines(f.added, f.deleted)}"
            parts.append(f"{verb} {f.path}{detail}")
    return "; ".join(parts) if parts else "changed no file"
