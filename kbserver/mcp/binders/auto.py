"""The MCP binding of the `auto` tool set (kbserver.dialects.auto): parse, call, render."""

# No `from __future__ import annotations`: the SDK reads the tools' annotations at registration.

from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult
from pydantic import Field

from kbserver.dialects import auto
from kbserver.mcp.binders.kit import WRITES, Kb, RunArg, call_of, ok_result, tool
from kbserver.mcp.dialect_schemas import MemoryFileOutput

if TYPE_CHECKING:
    from kbserver.mcp.binding import Binding

__all__ = ["tools"]


def tools(binding: "Binding") -> list[Tool]:
    def add_memory(
        content: Annotated[
            # No max_length: an entry over the cap is the contract's `too_large` (with bytes_left),
            # which the dialect answers, not a schema error.
            str,
            Field(min_length=1, description="One fact, on one line."),
        ],
        ctx: Context[Any, Any],
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, MemoryFileOutput]:
        """Remember one fact: add it as one entry (one line) to your MEMORY.md, as one version.

        Your MEMORY.md is shown in full in the server instructions at the start of every session. It holds
        at most 2000 bytes: when an entry does not fit, the call fails as `too_large` and says how many
        bytes are left; remove or shorten an entry with edit_memory first. Never store secrets.
        Returns {kb, path, version, bytes, bytes_left}.
        """
        return ok_result(auto.add_memory(call_of(binding, ctx, run), content, kb))

    def edit_memory(
        old_string: Annotated[
            str,
            Field(min_length=1, description="Text of one entry, exactly as in MEMORY.md; must occur once."),
        ],
        new_string: Annotated[str, Field(description="The replacement; empty removes the whole entry.")],
        ctx: Context[Any, Any],
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, MemoryFileOutput]:
        """Correct or remove one entry of your MEMORY.md, as one version.

        `old_string` must occur exactly once (else `no_match` or `ambiguous_match`); an empty
        `new_string` removes the entry (the whole line) that contains it. Returns {kb, path, version,
        bytes, bytes_left}.
        """
        return ok_result(auto.edit_memory(call_of(binding, ctx, run), old_string, new_string, kb))

    return [
        tool(add_memory, "Remember a fact (MEMORY.md)", WRITES),
        tool(edit_memory, "Edit or remove a MEMORY.md entry", WRITES),
    ]
