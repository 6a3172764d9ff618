"""The MCP binding of every dialect: each declared Dialect's binder (its `bind`, "module:function",
imported here: the edge may import the SDK, the dialect may not) gives its tools.

Which tools an agent sees and may call is the union of its tool sets (`--tools`); the session
middleware (kbserver.mcp.session) shows each caller its own.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcp.server.mcpserver.tools import Tool

from kbserver.core.errors import InvalidRequest
from kbserver.core.model import Caller
from kbserver.dialects import registry
from kbserver.dialects.registry import Dialect
from kbserver.services.access.toolsets import TOOL_SETS, tools_of

if TYPE_CHECKING:
    from kbserver.mcp.binding import Binding

__all__ = ["TOOL_SET_TOOLS", "allowed_tools", "binder_of", "dialect_tools"]

TOOL_SET_TOOLS = TOOL_SETS
"""Tool set name -> the names of its tools: the registry of kbserver.services.access.toolsets."""

Binder = Callable[["Binding"], list[Tool]]


def allowed_tools(caller: Caller) -> set[str]:
    """The names of the tools of every tool set of `caller`."""
    return tools_of(caller.tools)


def binder_of(dialect: Dialect) -> Binder:
    """The function `dialect.bind` names. Raises InvalidRequest when it cannot be imported."""
    return _binder(dialect.name, dialect.bind)


@functools.cache
def _binder(dialect: str, bind: str) -> Binder:
    module, _, name = bind.partition(":")
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise InvalidRequest(
            f"dialect {dialect}: its binder {bind} cannot be loaded: {err}", dialect=dialect
        ) from err
    if not callable(found):
        raise InvalidRequest(f"dialect {dialect}: {bind} is not a function", dialect=dialect)
    return found  # type: ignore[no-any-return]


def dialect_tools(binding: Binding) -> list[Tool]:
    """Every dialect's tools, bound to `binding`. Raises InvalidRequest when a binder's tools are not
    exactly the ones its dialect declares, or publish other results."""
    tools: list[Tool] = []
    for dialect in registry.dialects():
        bound = binder_of(dialect)(binding)
        names = [t.name for t in bound]
        if sorted(names) != sorted(dialect.tools):
            raise InvalidRequest(
                f"dialect {dialect.name}: its binder gives the tools {', '.join(names) or 'none'}, but the "
                f"dialect declares {', '.join(dialect.tools)}",
                dialect=dialect.name,
            )
        for t in bound:
            _check_result(dialect, t)
        tools.extend(bound)
    return tools


def _check_result(dialect: Dialect, tool: Tool) -> None:
    """Raises InvalidRequest when `tool` publishes other result fields than its dialect declares."""
    result = dialect.results.get(tool.name)
    if result is None:
        return
    declared = set(getattr(result, "model_fields", None) or getattr(result, "__annotations__", {}))
    published = set((tool.output_schema or {}).get("properties", {})) - {"error"}
    if published != declared:
        raise InvalidRequest(
            f"dialect {dialect.name}: {tool.name} publishes the result fields {sorted(published)}, but "
            f"the dialect declares {sorted(declared)}",
            dialect=dialect.name,
        )
