"""The one input check every edge runs on what a caller sends, before any of it reaches a store.

No id, name or free text may hold NUL (PostgreSQL cannot store it, git and C strings end at it) or a
lone surrogate (JSON can carry "\\ud800", but it is no Unicode text: UTF-8 cannot encode it, so
SQLite, PostgreSQL, git and the embedder all fail on it). File content follows the same rule
(kbserver.changes refuses it there too, naming the file).
"""

from __future__ import annotations

import re

from kbserver.core.errors import InvalidRequest

__all__ = ["UNSTORABLE", "bad_text", "check_input"]

UNSTORABLE = (
    "a text of this request holds a NUL character or a lone surrogate, which cannot be stored; "
    "send Unicode text without NUL (proper UTF-8)"
)
"""The message of the control stores' own refusal, for what no edge's check_input met first."""

_BAD = re.compile("[\x00\ud800-\udfff]")
_MAX_DEPTH = 64  # deeper values are refused by the JSON parser and the schemas anyway


def _problem(text: str) -> str | None:
    found = _BAD.search(text)
    if found is None:
        return None
    return "a NUL character" if found.group() == "\x00" else "a lone surrogate"


def bad_text(value: object, where: str = "") -> tuple[str, str] | None:
    """(where, what) of the first text in `value` (a string, or dicts and lists of them: keys too)
    that holds NUL or a lone surrogate, else None. `where` is a dotted path such as `files.0.path`."""
    stack: list[tuple[str, object, int]] = [(where, value, 0)]
    while stack:
        at, item, depth = stack.pop()
        if isinstance(item, str):
            what = _problem(item)
            if what is not None:
                return at or "value", what
        elif depth < _MAX_DEPTH and isinstance(item, dict):
            for key, inner in reversed(list(item.items())):
                name = f"{at}.{key}" if at else str(key)
                if isinstance(key, str) and _problem(key) is not None:
                    return at or "value", f"{_problem(key)} in a name"
                stack.append((name, inner, depth + 1))
        elif depth < _MAX_DEPTH and isinstance(item, list | tuple):
            for i, inner in reversed(list(enumerate(item))):
                stack.append((f"{at}.{i}" if at else str(i), inner, depth + 1))
    return None


def check_input(value: object, where: str = "") -> None:
    """Raises InvalidRequest (details `field`) when a text in `value` holds NUL or a lone surrogate."""
    found = bad_text(value, where)
    if found is not None:
        field, what = found
        field = field if len(field) <= 100 else field[:99] + "…"
        raise InvalidRequest(
            f"{field} holds {what}; ids, names and texts must be Unicode text without NUL "
            "(send proper UTF-8)",
            field=field,
        )
