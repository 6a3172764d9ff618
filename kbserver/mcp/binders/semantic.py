"""The MCP binding of the `semantic` tool set (kbserver.dialects.semantic): parse, call, render."""

# No `from __future__ import annotations`: the SDK reads the tools' annotations at registration.

from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from kbserver.dialects import semantic
from kbserver.mcp.binders.kit import Kb, RunArg, call_of, ok_result, tool
from kbserver.mcp.dialect_schemas import DueOutput, ImportanceOutput, RankedOutput, StoreOutput

if TYPE_CHECKING:
    from kbserver.mcp.binding import Binding

__all__ = ["tools"]

UserId = Annotated[
    str,
    Field(
        description="Whose memory this is (the person you work for); memories of one user_id never show up "
        "for another."
    ),
]
Limit = Annotated[int, Field(ge=1, le=semantic.MAX_LIMIT, description="At most this many memories.")]
History = Annotated[
    bool,
    Field(
        description="Also return memories that a newer, near-identical one superseded (with superseded_by)."
    ),
]
Importance = Annotated[float, Field(ge=0, le=1, description="How much it matters, from 0 to 1.")]

_WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
# Retrieval counts accesses in the control plane but changes no file and makes no version.
_READS = ToolAnnotations(read_only_hint=True, idempotent_hint=False, open_world_hint=False)


def tools(binding: "Binding") -> list[Tool]:
    def store_memory(
        content: Annotated[str, Field(description="What to remember, in your own words.")],
        ctx: Context[Any, Any],
        memory_type: Annotated[
            str, Field(description="fact (default), preference, task or reflection.")
        ] = "fact",
        user_id: UserId = semantic.DEFAULT_USER,
        importance: Importance = 0.5,
        remind_at: Annotated[
            str | None,
            Field(
                description="When to remind you (years 1900 to 2199), RFC 3339 with an offset, e.g. "
                "2026-12-01T09:00:00+01:00; "
                "add an RFC 9557 time zone, e.g. 2026-12-01T09:00:00+01:00[Europe/Paris], so that a "
                "recurrence keeps the local time across daylight-saving changes."
            ),
        ] = None,
        recurrence: Annotated[
            str | None,
            Field(
                description="Repeat the reminder: an RFC 5545 RRULE from remind_at, e.g. "
                "FREQ=WEEKLY;BYDAY=MO (DAILY, WEEKLY, MONTHLY or YEARLY; COUNT at most 1000 and "
                "within ten years, else UNTIL)."
            ),
        ] = None,
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, StoreOutput]:
        """Remember one thing as memories/{id}.md, as one version of the KB (people can review it).

        A memory of the same user_id and memory_type that says nearly the same (similarity at least 0.9),
        or that the new one updates ("The user now prefers coffee" after "The user prefers tea": say
        now, no longer, instead...), is marked superseded_by the new one in the same version, and
        searches skip it from then on: to correct or update something, store its new form. Returns
        {id, taskId, superseded}; taskId is the version. Never store secrets.
        """
        return ok_result(
            semantic.store_memory(
                call_of(binding, ctx, run),
                content,
                memory_type=memory_type,
                user_id=user_id,
                importance=importance,
                remind_at=remind_at,
                recurrence=recurrence,
                kb=kb,
            )
        )

    def search_memories_by_semantics(
        query: Annotated[
            str,
            Field(
                description="What you are looking for, in any language; its first 1000 characters are "
                "embedded."
            ),
        ],
        ctx: Context[Any, Any],
        user_id: UserId = semantic.DEFAULT_USER,
        limit: Limit = 5,
        include_superseded: History = False,
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, RankedOutput]:
        """Find the user's memories by meaning (an English question finds a Chinese memory).

        Ranked by 0.6·similarity + 0.3·importance + 0.1·recency; importance grows each time a memory is
        retrieved, recency fades with the days since it was last retrieved. Returns {memories: [{id,
        content, memory_type, user_id, importance, access_count, score}]}. Searching changes no file.
        """
        return ok_result(
            semantic.search_memories_by_semantics(
                call_of(binding, ctx, run),
                query,
                user_id=user_id,
                limit=limit,
                include_superseded=include_superseded,
                kb=kb,
            )
        )

    def recall_related(
        query: Annotated[
            str,
            Field(description="What the memories should be about; its first 1000 characters are embedded."),
        ],
        ctx: Context[Any, Any],
        user_id: UserId = semantic.DEFAULT_USER,
        limit: Limit = 5,
        include_superseded: History = False,
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, RankedOutput]:
        """Recall the best match for the query and the memories related to it: also those close to that
        best match even when they share nothing with the query (associations). Same ranking and result
        as search_memories_by_semantics."""
        return ok_result(
            semantic.recall_related(
                call_of(binding, ctx, run),
                query,
                user_id=user_id,
                limit=limit,
                include_superseded=include_superseded,
                kb=kb,
            )
        )

    def update_memory_importance(
        id: Annotated[str, Field(description="The memory's id, as store_memory or a search gave it.")],
        importance: Importance,
        ctx: Context[Any, Any],
        user_id: Annotated[
            str | None, Field(description="The memory's user_id; when given, it must match.")
        ] = None,
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, ImportanceOutput]:
        """Set how much a memory matters (0 to 1), as one version. Returns {id, importance, taskId}."""
        return ok_result(
            semantic.update_memory_importance(
                call_of(binding, ctx, run), id, importance, user_id=user_id, kb=kb
            )
        )

    def list_due_memories(
        ctx: Context[Any, Any],
        user_id: Annotated[
            str | None, Field(description="Only this user's reminders (default: all of yours).")
        ] = None,
        before: Annotated[str | None, Field(description="RFC 3339 time; default: one hour from now.")] = None,
        kb: Kb = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, DueOutput]:
        """Reminders due before a time, soonest first: {memories: [{id, content, due, user_id,
        memory_type, overdue, recurrence?}]}. A one-off stays due (overdue) until a new memory supersedes
        it; a recurring one is due at its next occurrence from now."""
        return ok_result(
            semantic.list_due_memories(call_of(binding, ctx, run), user_id=user_id, before=before, kb=kb)
        )

    return [
        tool(store_memory, "Store a memory", _WRITES),
        tool(search_memories_by_semantics, "Search memories by meaning", _READS),
        tool(recall_related, "Recall related memories", _READS),
        tool(update_memory_importance, "Change a memory's importance", _WRITES),
        tool(list_due_memories, "List due reminders", _READS),
    ]
