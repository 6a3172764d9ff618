"""The one declaration of each dialect, and the registry every other list of dialects is derived from.

A dialect is a `Dialect`: its tool-set name, the names of its tools, their result types, the MCP binder
of its tools (a "module:function" string the MCP edge imports; a dialect never imports `mcp`), the
folders whose files it owns (the web admin shows them as records), the paths only its tools may write,
and its part of an agent's instructions. The built-in dialects are listed in `BUILTIN`; an installed
package adds one through the entry-point group `kbserver.dialects` (each entry point a `Dialect`).

`dialects()` loads them once, checks them (a broken or clashing plug-in is one clear error at start)
and registers their tool sets and reserved paths with the services (kbserver.services.access.toolsets,
kbserver.services.writing.reserved), which sit below the dialects and so cannot look them up here.
"""

from __future__ import annotations

import functools
import importlib
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from kbserver.core.errors import InvalidRequest
from kbserver.core.model import Caller
from kbserver.services import Services
from kbserver.services.access import toolsets
from kbserver.services.writing import reserved
from kbserver.services.writing.reserved import Reserved

__all__ = [
    "BUILTIN",
    "ENTRY_POINTS",
    "Dialect",
    "Reserved",
    "dialects",
    "folders",
    "load",
    "tool_set_names",
]

ENTRY_POINTS = "kbserver.dialects"
"""The entry-point group of third-party dialects; each entry point names a `Dialect` object."""

BUILTIN = ("memory", "semantic", "typed", "auto", "memory_tool")
"""The built-in dialects, in the order the tool sets are listed: `kbserver.dialects.NAME.DIALECT`."""

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_TOOL = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_BIND = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")

Instructions = Callable[[Services, Caller], "str | None"]


@dataclass(frozen=True)
class Dialect:
    """One dialect, declared once; everything else about it is derived from this.

    `bind` is "module:function": `function(binding)` returns the MCP tools (one per name in `tools`).
    `results` maps a tool to the result model it answers, published as its outputSchema.
    `folders` are path prefixes (ending in "/") whose files the web admin shows as records.
    `reserved`: files only this tool set's tools may write (an agent's other writes are `forbidden`).
    `instructions(services, caller)`: this set's part of an agent's instructions, or None;
    `instructions_rank` orders the parts (lower first, then registry order).
    """

    name: str
    tools: tuple[str, ...]
    bind: str
    results: Mapping[str, Any] = field(default_factory=dict)
    folders: tuple[str, ...] = ()
    reserved: Reserved | None = None
    instructions: Instructions | None = None
    instructions_rank: int = 100


_lock = threading.Lock()
_loaded: tuple[Dialect, ...] | None = None


def _problem(source: str, what: str) -> InvalidRequest:
    return InvalidRequest(f"dialect {source}: {what}", dialect=source)


def _check(dialect: object, source: str, taken: dict[str, str]) -> Dialect:
    """`dialect`, when it is a well-formed Dialect whose set and tool names are all new."""
    if not isinstance(dialect, Dialect):
        raise _problem(source, f"is a {type(dialect).__name__}, not a kbserver.dialects.registry.Dialect")
    if not _NAME.match(dialect.name):
        raise _problem(source, f"the name {dialect.name!r} is not lowercase letters, digits and _")
    if dialect.name in toolsets.BUILTIN_SETS or any(d == dialect.name for d in taken.values()):
        raise _problem(source, f"the tool set {dialect.name!r} is declared twice")
    if not dialect.tools or len(set(dialect.tools)) != len(dialect.tools):
        raise _problem(source, "tools must name at least one tool, each once")
    for tool in dialect.tools:
        if not _TOOL.match(tool):
            raise _problem(source, f"the tool name {tool!r} is not letters, digits and _")
        owner = taken.get(tool) or ("context" if tool in toolsets.CONTEXT_TOOLS else None)
        if owner is not None:
            raise _problem(source, f"the tool {tool!r} is already the {owner} set's")
    if not _BIND.match(dialect.bind):
        raise _problem(source, f"bind {dialect.bind!r} is not 'module:function'")
    stray = set(dialect.results) - set(dialect.tools)
    if stray:
        raise _problem(source, f"results names tools it does not declare: {', '.join(sorted(stray))}")
    if any(not f.endswith("/") or f.startswith("/") for f in dialect.folders):
        raise _problem(source, "each folder is a relative path ending in '/'")
    taken.update((tool, dialect.name) for tool in dialect.tools)
    return dialect


def _plugins() -> list[tuple[str, Callable[[], object]]]:
    found = sorted(entry_points(group=ENTRY_POINTS), key=lambda ep: (ep.name, ep.value))
    return [(f"{ep.name} ({ep.value}, entry point of {ENTRY_POINTS})", ep.load) for ep in found]


def _builtin(name: str) -> object:
    return importlib.import_module(f"kbserver.dialects.{name}").DIALECT


def load() -> tuple[Dialect, ...]:
    """The built-in dialects, then the installed ones (by entry-point name), checked. Raises
    InvalidRequest naming the plug-in that cannot be loaded or clashes with another."""
    taken: dict[str, str] = {}
    found: list[Dialect] = []
    sources: list[tuple[str, Callable[[], object]]] = [
        (f"kbserver.dialects.{name}", functools.partial(_builtin, name)) for name in BUILTIN
    ]
    for source, get in [*sources, *_plugins()]:
        try:
            dialect = get()
        except Exception as err:  # a plug-in's import error is its own: say which plug-in it is
            raise _problem(source, f"cannot be loaded: {type(err).__name__}: {err}") from err
        found.append(_check(dialect, source, taken))
    return tuple(found)


def dialects() -> tuple[Dialect, ...]:
    """Every dialect, loaded and registered with the services on the first call (then kept)."""
    global _loaded
    with _lock:
        if _loaded is None:
            loaded = load()
            for d in loaded:
                toolsets.register(d.name, d.tools)
                if d.reserved is not None:
                    reserved.register(d.name, d.reserved)
            _loaded = loaded
        return _loaded


def tool_set_names() -> tuple[str, ...]:
    """The names of every tool set: `context`, then each dialect's."""
    return (*toolsets.BUILTIN_SETS, *(d.name for d in dialects()))


def folders() -> tuple[str, ...]:
    """Every folder a dialect owns (its files are shown as records)."""
    return tuple(f for d in dialects() for f in d.folders)
