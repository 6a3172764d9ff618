"""The MCP binding of the `typed` tool set (kbserver.dialects.typed): parse, call, render."""

# No `from __future__ import annotations`: the SDK reads the tools' annotations at registration.

from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from kbserver.dialects import typed
from kbserver.mcp.binders.kit import WRITES, Kb, RunArg, call_of, ok_result, tool
from kbserver.mcp.dialect_schemas import ArchiveOutput, QueryOutput, RecallOutput, RecordOutput, SaveOutput

if TYPE_CHECKING:
    from kbserver.mcp.binding import Binding

__all__ = ["tools"]

Type = Annotated[str, Field(description="self, relationship, topic or saved.")]
RecordId = Annotated[str, Field(description="The record's id, as save_memory or query_index gave it.")]
Date = Annotated[str, Field(description="A date written YYYY-MM-DD.")]


def tools(binding: "Binding") -> list[Tool]:
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
                call_of(binding, ctx, run),
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
        return ok_result(typed.forget_memory(call_of(binding, ctx, run), type, id, reason, kb=kb))

    def query_index(
        query: Annotated[str, Field(min_length=1, description="Words to look for (CJK works too).")],
        ctx: Context[Any, Any],
        types: Annotated[list[str] | None, Field(description="Only these types (default: all).")] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many entries.")] = 20,
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, QueryOutput]:
        """Find records: entries {type, id, label, summary}, best match first. get_memory reads one."""
        return ok_result(typed.query_index(call_of(binding, ctx, run), query, types, limit, kb=kb))

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
        return ok_result(typed.get_memory(call_of(binding, ctx, run), type, id, kb=kb))

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
        return ok_result(
            typed.recall_raw(call_of(binding, ctx, run), query, startDate, endDate, limit, kb=kb)
        )

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
        return ok_result(typed.archive_day(call_of(binding, ctx, run), date, summary, diary, facts, kb=kb))

    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    return [
        tool(save_memory, "Save a typed memory", WRITES),
        tool(forget_memory, "Forget a typed memory", WRITES),
        tool(query_index, "Find typed memories", read_only),
        tool(get_memory, "Read a typed memory", read_only),
        tool(recall_raw, "Search the day archive", read_only),
        tool(archive_day, "Archive a day", WRITES),
    ]
