"""The MCP binding of the toy dialect: `tools(binding)` returns its one tool."""

# No `from __future__ import annotations`: the SDK reads the tools' annotations at registration.

from typing import TYPE_CHECKING, Annotated, Any

import toy_dialect
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult
from pydantic import Field

from kbserver.mcp.binders.kit import WRITES, Kb, RunArg, call_of, ok_result, published, tool

if TYPE_CHECKING:
    from kbserver.mcp.binding import Binding


def tools(binding: "Binding") -> list[Tool]:
    def toy_note(
        text: Annotated[str, Field(min_length=1, description="The note.")],
        ctx: Context[Any, Any],
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, published(toy_dialect.NoteResult)]:
        """Keep a note as toy/{n}.md, as one version. Returns {path, version}."""
        return ok_result(toy_dialect.toy_note(call_of(binding, ctx, run), text, kb))

    return [tool(toy_note, "Keep a toy note", WRITES)]
