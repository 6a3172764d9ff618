"""The MCP binding of the `memory` tool set (kbserver.dialects.memory): parse, call, render."""

# No `from __future__ import annotations`: the SDK reads the tools' annotations at registration.

from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from kbserver.dialects import memory
from kbserver.mcp.binders.kit import WRITES, Kb, RunArg, call_of, ok_result, tool
from kbserver.mcp.dialect_schemas import AddOutput, DeleteOutput, MemorySearchOutput, TaskOutput, UpdateOutput

if TYPE_CHECKING:
    from kbserver.mcp.binding import Binding

__all__ = ["tools"]

MemoryId = Annotated[str, Field(description="The memory's id, as memory_add or memory_search gave it.")]
Time = Annotated[
    str | None, Field(description="An RFC 3339 time, e.g. 2026-12-01T10:00:00Z (compared with createdAt).")
]


def tools(binding: "Binding") -> list[Tool]:
    def memory_add(
        content: Annotated[str, Field(description="The fact to remember, in your own words.")],
        ctx: Context[Any, Any],
        category: Annotated[str | None, Field(description="A category, e.g. preference, project.")] = None,
        tags: Annotated[list[str] | None, Field(description="Tags to filter by later.")] = None,
        agentId: Annotated[
            str | None,
            Field(description="Your agent name to keep the memory private to you; omit to share it."),
        ] = None,
        sessionId: Annotated[
            str | None, Field(description="The conversation or session it comes from.")
        ] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Any JSON object you want kept.")
        ] = None,
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, AddOutput]:
        """Remember one atomic fact as memories/{id}.md, as one version of the KB.

        Search before adding: the result's `similar` lists existing memories that say much the same
        (word overlap), so you can memory_update one of them instead of adding a duplicate. Returns
        {id, taskId, similar: [{id, content, score}]}; taskId is the version, and
        memory_task_wait(taskId) waits until search finds the new memory. Never store secrets.
        """
        return ok_result(
            memory.memory_add(
                call_of(binding, ctx, run),
                content,
                category=category,
                tags=tags,
                agentId=agentId,
                sessionId=sessionId,
                metadata=metadata,
                kb=kb,
            )
        )

    def memory_search(
        search: Annotated[
            str,
            Field(
                description="What you are looking for, e.g. a whole question; the meaning side embeds its "
                "first 1000 characters, the words side reads it all."
            ),
        ],
        ctx: Context[Any, Any],
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
        offset: Annotated[int, Field(ge=0)] = 0,
        agentId: Annotated[str | None, Field(description="Only memories private to this agent.")] = None,
        category: Annotated[str | None, Field(description="Only this category.")] = None,
        sessionId: Annotated[str | None, Field(description="Only this session.")] = None,
        startTime: Time = None,
        endTime: Time = None,
        mode: Annotated[
            str,
            Field(description="hybrid (default: words and meaning fused), keyword (BM25) or semantic."),
        ] = "hybrid",
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, MemorySearchOutput]:
        """Search memories by words and meaning, in any language (an English question finds a Chinese
        memory). Filters combine. Returns {memories: [{id, content, category, tags, agentId, sessionId,
        metadata, createdAt, updatedAt, score}], total}; `unembedded` counts memories whose meaning is
        not indexed yet (they are still found by their words). An empty `search` lists newest first.
        """
        return ok_result(
            memory.memory_search(
                call_of(binding, ctx, run),
                search,
                limit=limit,
                offset=offset,
                agentId=agentId,
                category=category,
                sessionId=sessionId,
                startTime=startTime,
                endTime=endTime,
                mode=mode,
                kb=kb,
            )
        )

    def memory_update(
        id: MemoryId,
        content: Annotated[str, Field(description="The corrected fact.")],
        ctx: Context[Any, Any],
        tags: Annotated[list[str] | None, Field(description="New tags (omit to keep them).")] = None,
        category: Annotated[str | None, Field(description="New category (omit to keep it).")] = None,
        agentId: Annotated[str | None, Field(description="Your agent name to make it private.")] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="New metadata (omit to keep it).")
        ] = None,
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, UpdateOutput]:
        """Correct a memory in place (same id), as one version. The old content is kept in
        metadata.history ([{value, updatedAt}], newest first), whatever metadata you pass.
        Returns {id, taskId}."""
        return ok_result(
            memory.memory_update(
                call_of(binding, ctx, run),
                id,
                content,
                tags=tags,
                category=category,
                agentId=agentId,
                metadata=metadata,
                kb=kb,
            )
        )

    def memory_delete(
        id: MemoryId, ctx: Context[Any, Any], kb: Kb = None, run: RunArg = None
    ) -> Annotated[CallToolResult, DeleteOutput]:
        """Delete a memory, as one version (it stays in the KB's history and can be reverted).
        Returns {id, deleted, taskId}."""
        return ok_result(memory.memory_delete(call_of(binding, ctx, run), id, kb=kb))

    async def memory_task_wait(
        taskId: Annotated[str, Field(description="The taskId a memory tool returned (a version).")],
        ctx: Context[Any, Any],
        timeout: Annotated[
            float,
            Field(ge=0, description="Seconds to wait at most (longer waits answer pending after 60)."),
        ] = 60,
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, TaskOutput]:
        """Wait until search covers a change: both the keyword index and the meaning vectors.
        Returns {taskId, status: done|pending}; pending after the timeout, never an error for it."""
        return ok_result(await memory.memory_task_wait(call_of(binding, ctx, run), taskId, timeout, kb=kb))

    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    return [
        tool(memory_add, "Add a memory", WRITES),
        tool(memory_search, "Search memories", read_only),
        tool(memory_update, "Update a memory", WRITES),
        tool(memory_delete, "Delete a memory", WRITES),
        tool(memory_task_wait, "Wait until a memory is searchable", read_only),
    ]
