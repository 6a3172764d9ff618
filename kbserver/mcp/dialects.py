"""The MCP binding of the memory dialects (kbserver.dialects) and the registry of tool sets.

Each tool parses its arguments, builds a DialectCall (caller, run) and calls the dialect; the dialect
decides. Which tools an agent sees and may call is the union of its tool sets (`--tools`).
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations at registration.

import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from kbserver.core.model import Caller
from kbserver.dialects import auto
from kbserver.dialects.session import DialectCall
from kbserver.mcp.errors import KBTool, ok_result
from kbserver.mcp.tools import TOOL_NAMES
from kbserver.services.reserved import AUTO_MEMORY_MAX_BYTES

if TYPE_CHECKING:
    from kbserver.mcp.session import Binding

__all__ = ["TOOL_SET_TOOLS", "allowed_tools", "dialect_tools"]

TOOL_SET_TOOLS: dict[str, tuple[str, ...]] = {
    "context": TOOL_NAMES,
    "auto": auto.TOOLS,
}
"""Tool set name -> the names of its tools (sets without an entry have no tools yet)."""

Kb = Annotated[
    str | None,
    Field(
        description="The KB's slug. Omit it to use the only KB you can write (see the server instructions)."
    ),
]

_WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)


def allowed_tools(caller: Caller) -> set[str]:
    """The names of the tools of every tool set of `caller`."""
    names: set[str] = set()
    for tool_set in caller.tools:
        names.update(TOOL_SET_TOOLS.get(tool_set, ()))
    return names


def _call(binding: "Binding", ctx: Context[Any, Any]) -> DialectCall:
    caller = binding.caller()
    run = binding.run_of(ctx.request_context)
    if run is None:
        return DialectCall(binding.services, caller)
    return DialectCall(binding.services, caller, run.id, frozenset(run.mounts))


def _tool(fn: Callable[..., Any], title: str, annotations: ToolAnnotations) -> Tool:
    return KBTool.from_function(
        fn, title=title, description=inspect.cleandoc(fn.__doc__ or ""), annotations=annotations
    )


def auto_tools(binding: "Binding") -> list[Tool]:
    def add_memory(
        content: Annotated[
            str, Field(min_length=1, max_length=AUTO_MEMORY_MAX_BYTES, description="One fact, on one line.")
        ],
        ctx: Context[Any, Any],
        kb: Kb = None,
    ) -> CallToolResult:
        """Remember one fact: add it as one entry (one line) to your MEMORY.md, as one version.

        Your MEMORY.md is shown in full in the server instructions at the start of every session. It holds
        at most 2000 bytes: when an entry does not fit, the call fails as `too_large` and says how many
        bytes are left; remove or shorten an entry with edit_memory first. Never store secrets.
        Returns {kb, path, version, bytes, bytes_left}.
        """
        return ok_result(auto.add_memory(_call(binding, ctx), content, kb))

    def edit_memory(
        old_string: Annotated[
            str,
            Field(min_length=1, description="Text of one entry, exactly as in MEMORY.md; must occur once."),
        ],
        new_string: Annotated[str, Field(description="The replacement; empty removes the whole entry.")],
        ctx: Context[Any, Any],
        kb: Kb = None,
    ) -> CallToolResult:
        """Correct or remove one entry of your MEMORY.md, as one version.

        `old_string` must occur exactly once (else `no_match` or `ambiguous_match`); an empty
        `new_string` removes the entry (the whole line) that contains it. Returns {kb, path, version,
        bytes, bytes_left}.
        """
        return ok_result(auto.edit_memory(_call(binding, ctx), old_string, new_string, kb))

    return [
        _tool(add_memory, "Remember a fact (MEMORY.md)", _WRITES),
        _tool(edit_memory, "Edit or remove a MEMORY.md entry", _WRITES),
    ]


def dialect_tools(binding: "Binding") -> list[Tool]:
    """Every dialect tool, bound to `binding`; the session middleware shows each caller its own sets."""
    tools = auto_tools(binding)
    _check_registry(t.name for t in tools)
    return tools


def _check_registry(names: Iterable[str]) -> None:
    registered = {n for set_names in TOOL_SET_TOOLS.values() for n in set_names} - set(TOOL_NAMES)
    assert registered == set(names), "TOOL_SET_TOOLS and the dialect tools disagree"
