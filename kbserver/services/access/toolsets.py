"""The registry of tool sets: each set's name and the names of its tools (CONTRACT.md §5).

`kbserver agent create --tools` and `POST /agents` accept exactly the names registered here; an
agent sees and may call the tools of its sets only. `context` is the services' own; every other set
is a dialect's, declared once in kbserver.dialects (kbserver.dialects.registry), which registers it
here when the dialects are loaded at start (the services sit below the dialects and never import them).
"""

from __future__ import annotations

from collections.abc import Iterable

from kbserver.core.errors import InvalidRequest

__all__ = [
    "BUILTIN_SETS",
    "CONTEXT_TOOLS",
    "DEFAULT_TOOL_SETS",
    "TOOL_SETS",
    "check_tool_sets",
    "register",
    "tools_of",
]

CONTEXT_TOOLS = (
    "list_context_files",
    "read_context_file",
    "list_context_versions",
    "write_context",
    "search_context",
)

TOOL_SETS: dict[str, tuple[str, ...]] = {"context": CONTEXT_TOOLS}
"""Tool set name -> the names of its tools: `context`, then each registered dialect's."""

BUILTIN_SETS = ("context",)
"""The sets the services define themselves."""

DEFAULT_TOOL_SETS = ("context",)


def register(name: str, tools: Iterable[str]) -> None:
    """Adds the tool set `name`; registering the same set again is a no-op, a different one a ValueError."""
    names = tuple(tools)
    known = TOOL_SETS.get(name)
    if known is not None and known != names:
        raise ValueError(f"the tool set {name!r} is already registered with other tools")
    TOOL_SETS[name] = names


def check_tool_sets(names: Iterable[str]) -> tuple[str, ...]:
    """`names` as a tuple, when each is a registered set and none repeats. Raises InvalidRequest."""
    chosen = tuple(names)
    unknown = [n for n in chosen if n not in TOOL_SETS]
    if unknown or len(set(chosen)) != len(chosen) or not chosen:
        what = f"unknown tool set {unknown[0]!r}" if unknown else "each tool set at most once, at least one"
        raise InvalidRequest(f"tools: {what}; the tool sets are {', '.join(TOOL_SETS)}", tools=list(chosen))
    return chosen


def tools_of(sets: Iterable[str]) -> set[str]:
    """The names of every tool of `sets` (unknown names have none)."""
    return {tool for name in sets for tool in TOOL_SETS.get(name, ())}
