"""The MCP binding of the `memory_tool` tool set (kbserver.dialects.memory_tool): parse, call, render."""

# No `from __future__ import annotations`: the SDK reads the tools' annotations at registration.

from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from kbserver.dialects import memory_tool
from kbserver.mcp.binders.kit import WRITES, Kb, RunArg, call_of, tool
from kbserver.mcp.dialect_schemas import MemoryToolOutput

if TYPE_CHECKING:
    from kbserver.mcp.binding import Binding

__all__ = ["tools"]


def tools(binding: "Binding") -> list[Tool]:
    def memory(
        command: Annotated[
            str,
            Field(description="One of view, create, str_replace, insert, delete, rename."),
        ],
        ctx: Context[Any, Any],
        path: Annotated[
            str | None,
            Field(description="A path under /memories, e.g. /memories/notes.md (every command but rename)."),
        ] = None,
        view_range: Annotated[
            list[int] | None,
            Field(
                description="view: [start_line, end_line] of a file, 1-based; end_line -1 reads to the end."
            ),
        ] = None,
        file_text: Annotated[str | None, Field(description="create: the new file's content.")] = None,
        old_str: Annotated[
            str | None, Field(description="str_replace: text that occurs exactly once.")
        ] = None,
        new_str: Annotated[
            str | None, Field(description="str_replace: its replacement (may be empty).")
        ] = None,
        insert_line: Annotated[
            int | None, Field(description="insert: the line after which to insert (0: at the top).")
        ] = None,
        insert_text: Annotated[str | None, Field(description="insert: the text to insert.")] = None,
        old_path: Annotated[str | None, Field(description="rename: the file or folder to move.")] = None,
        new_path: Annotated[str | None, Field(description="rename: where it goes (must not exist).")] = None,
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, MemoryToolOutput]:
        """Anthropic's memory tool, served by kbserver: your memory directory /memories, kept in a KB.

        Commands: view(path, view_range?) shows a folder (2 levels deep) or a file with line numbers;
        create(path, file_text) makes a new file; str_replace(path, old_str, new_str) replaces text that
        occurs exactly once; insert(path, insert_line, insert_text); delete(path) a file or folder;
        rename(old_path, new_path). Each command that changes files is one version of the KB (people can
        review and revert it). Paths outside /memories are refused. Errors start with their code
        (`not_found: ...`).
        """
        outcome = memory_tool.memory(
            call_of(binding, ctx, run),
            command,
            path=path,
            view_range=view_range,
            file_text=file_text,
            old_str=old_str,
            new_str=new_str,
            insert_line=insert_line,
            insert_text=insert_text,
            old_path=old_path,
            new_path=new_path,
            kb=kb,
        )
        data = outcome.result(command)
        return CallToolResult(
            content=[TextContent(type="text", text=outcome.text)],
            structured_content=data.model_dump(mode="json"),
        )

    return [tool(memory, "Memory directory (/memories)", WRITES)]
