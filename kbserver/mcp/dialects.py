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
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from kbserver.core.model import Caller
from kbserver.dialects import auto, memory, memory_tool, typed
from kbserver.dialects.session import DialectCall
from kbserver.mcp.binding import RunArg
from kbserver.mcp.dialect_schemas import (
    AddOutput,
    ArchiveOutput,
    DeleteOutput,
    MemoryFileOutput,
    MemorySearchOutput,
    MemoryToolOutput,
    QueryOutput,
    RecallOutput,
    RecordOutput,
    SaveOutput,
    TaskOutput,
    UpdateOutput,
)
from kbserver.mcp.errors import KBTool, ok_result
from kbserver.mcp.semantic_tools import semantic_tools
from kbserver.mcp.tools import TOOL_NAMES
from kbserver.services.access.toolsets import TOOL_SETS, tools_of

if TYPE_CHECKING:
    from kbserver.mcp.binding import Binding

__all__ = ["TOOL_SET_TOOLS", "allowed_tools", "dialect_tools"]

TOOL_SET_TOOLS = TOOL_SETS
"""Tool set name -> the names of its tools: the registry of kbserver.services.access.toolsets."""

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
    return tools_of(caller.tools)


def _call(binding: "Binding", ctx: Context[Any, Any], run: str | None) -> DialectCall:
    """The dialect call of this tool call: the caller and its run (`run`, else the session's)."""
    return DialectCall.of(binding.services, binding.caller(), binding.run_of(ctx.request_context, run))


def _tool(fn: Callable[..., Any], title: str, annotations: ToolAnnotations) -> Tool:
    return KBTool.from_function(
        fn, title=title, description=inspect.cleandoc(fn.__doc__ or ""), annotations=annotations
    )


def auto_tools(binding: "Binding") -> list[Tool]:
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
        return ok_result(auto.add_memory(_call(binding, ctx, run), content, kb))

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
        return ok_result(auto.edit_memory(_call(binding, ctx, run), old_string, new_string, kb))

    return [
        _tool(add_memory, "Remember a fact (MEMORY.md)", _WRITES),
        _tool(edit_memory, "Edit or remove a MEMORY.md entry", _WRITES),
    ]


def memory_tool_tools(binding: "Binding") -> list[Tool]:
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
            _call(binding, ctx, run),
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
            content=[TextContent(type="text", text=outcome.text)], structured_content=dict(data)
        )

    return [_tool(memory, "Memory directory (/memories)", _WRITES)]


Type = Annotated[str, Field(description="self, relationship, topic or saved.")]
RecordId = Annotated[str, Field(description="The record's id, as save_memory or query_index gave it.")]
Date = Annotated[str, Field(description="A date written YYYY-MM-DD.")]


def typed_tools(binding: "Binding") -> list[Tool]:
    def save_memory(
        type: Type,
        summary: Annotated[
            str, Field(description="What to remember (Markdown); replaces the old one on update.")
        ],
        ctx: Context[Any, Any],
        title: Annotated[str | None, Field(description="A short label (any type).")] = None,
        category: Annotated[str | None, Field(description="self: the category, e.g. work, health.")] = None,
        key: Annotated[
            str | None, Field(description="self: the key within the category, e.g. employer.")
        ] = None,
        name: Annotated[
            str | None, Field(description="relationship and topic: the person's or topic's name.")
        ] = None,
        saved_kind: Annotated[
            str | None,
            Field(description="saved: conversation_ref, source_ref, text_note (default) or arrangement."),
        ] = None,
        saved_reason: Annotated[str | None, Field(description="saved: why it is worth keeping.")] = None,
        source_refs: Annotated[
            list[dict[str, str]] | None,
            Field(
                description='Where it comes from: {"kind": "conversation", "date": "YYYY-MM-DD"} (an '
                'archived day) or {"kind": "file", "path": "..."} (a KB file). get_memory(type="source") '
                "reads them."
            ),
        ] = None,
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, SaveOutput]:
        """Save a typed memory, as one version; a save that matches an existing record updates it in place.

        Types: `self` (facts about the user; matched by category+key), `relationship` and `topic` (matched
        by name), `saved` (always a new record). To correct something remembered wrong, save it again with
        the same category+key or name: the record keeps its id. USER.md (self, relationships) and
        CONTEXT.md (topics, saved arrangements) are recompiled in the same version.
        Returns {type, id, status: created|updated, taskId} (taskId is the version).
        """
        return ok_result(
            typed.save_memory(
                _call(binding, ctx, run),
                type,
                summary,
                title=title,
                category=category,
                key=key,
                name=name,
                saved_kind=saved_kind,
                saved_reason=saved_reason,
                source_refs=source_refs,
                kb=kb,
            )
        )

    def forget_memory(
        type: Type,
        id: RecordId,
        ctx: Context[Any, Any],
        reason: Annotated[
            str | None, Field(description="Why; it becomes part of the version's message.")
        ] = None,
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, SaveOutput]:
        """Forget (delete) one record, as one version whose message carries the reason.

        Unlike a plain delete this can be undone: the old record stays in the KB's history, and an admin
        (or an agent with read_write) can revert the version. USER.md / CONTEXT.md are recompiled.
        """
        return ok_result(typed.forget_memory(_call(binding, ctx, run), type, id, reason, kb=kb))

    def query_index(
        query: Annotated[str, Field(min_length=1, description="Words to look for (CJK works too).")],
        ctx: Context[Any, Any],
        types: Annotated[list[str] | None, Field(description="Only these types (default: all).")] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many entries.")] = 20,
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, QueryOutput]:
        """Find records: entries {type, id, label, summary}, best match first. get_memory reads one."""
        return ok_result(typed.query_index(_call(binding, ctx, run), query, types, limit, kb=kb))

    def get_memory(
        type: Annotated[str, Field(description="self, relationship, topic, saved, or source.")],
        id: Annotated[
            str,
            Field(description="The record's id; for source, an archived day's date or a KB file's path."),
        ],
        ctx: Context[Any, Any],
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, RecordOutput]:
        """Read one whole record with all its fields, or a source that a source_refs entry points to."""
        return ok_result(typed.get_memory(_call(binding, ctx, run), type, id, kb=kb))

    def recall_raw(
        ctx: Context[Any, Any],
        query: Annotated[str | None, Field(description="Words to look for in the archived days.")] = None,
        startDate: Annotated[str | None, Field(description="First day, YYYY-MM-DD.")] = None,
        endDate: Annotated[str | None, Field(description="Last day, YYYY-MM-DD.")] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many days.")] = 10,
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, RecallOutput]:
        """Search the raw day archive by words and/or a date range (at least one of them).

        Returns {days: [{date, summary, diary, facts}]}: best match first, or newest first for a range.
        """
        return ok_result(typed.recall_raw(_call(binding, ctx, run), query, startDate, endDate, limit, kb=kb))

    def archive_day(
        date: Date,
        ctx: Context[Any, Any],
        summary: Annotated[str | None, Field(description="The day's summary.")] = None,
        diary: Annotated[str | None, Field(description="The day's diary, in your own words.")] = None,
        facts: Annotated[list[str] | None, Field(description="Facts learned that day.")] = None,
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, ArchiveOutput]:
        """Archive a day as archive/YYYY-MM-DD.json, as one version. A day archived twice is merged:
        new text is added to the old, and facts are kept once each. Never archive raw transcripts."""
        return ok_result(typed.archive_day(_call(binding, ctx, run), date, summary, diary, facts, kb=kb))

    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    return [
        _tool(save_memory, "Save a typed memory", _WRITES),
        _tool(forget_memory, "Forget a typed memory", _WRITES),
        _tool(query_index, "Find typed memories", read_only),
        _tool(get_memory, "Read a typed memory", read_only),
        _tool(recall_raw, "Search the day archive", read_only),
        _tool(archive_day, "Archive a day", _WRITES),
    ]


MemoryId = Annotated[str, Field(description="The memory's id, as memory_add or memory_search gave it.")]
Time = Annotated[
    str | None, Field(description="An RFC 3339 time, e.g. 2026-12-01T10:00:00Z (compared with createdAt).")
]


def memory_tools(binding: "Binding") -> list[Tool]:
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
                _call(binding, ctx, run),
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
                _call(binding, ctx, run),
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
                _call(binding, ctx, run),
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
        return ok_result(memory.memory_delete(_call(binding, ctx, run), id, kb=kb))

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
        return ok_result(await memory.memory_task_wait(_call(binding, ctx, run), taskId, timeout, kb=kb))

    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    return [
        _tool(memory_add, "Add a memory", _WRITES),
        _tool(memory_search, "Search memories", read_only),
        _tool(memory_update, "Update a memory", _WRITES),
        _tool(memory_delete, "Delete a memory", _WRITES),
        _tool(memory_task_wait, "Wait until a memory is searchable", read_only),
    ]


def dialect_tools(binding: "Binding") -> list[Tool]:
    """Every dialect tool, bound to `binding`; the session middleware shows each caller its own sets."""
    tools = [
        *auto_tools(binding),
        *memory_tools(binding),
        *memory_tool_tools(binding),
        *semantic_tools(binding),
        *typed_tools(binding),
    ]
    _check_registry(t.name for t in tools)
    return tools


def _check_registry(names: Iterable[str]) -> None:
    registered = {n for set_names in TOOL_SET_TOOLS.values() for n in set_names} - set(TOOL_NAMES)
    assert registered == set(names), "TOOL_SET_TOOLS and the dialect tools disagree"
