"""The registry of tool sets: each set's name and the names of its tools (CONTRACT.md §5).

`kbserver agent create --tools` and `POST /agents` accept exactly the names registered here; an
agent sees and may call the tools of its sets only.

How a dialect registers its tool set:
1. Add `"NAME": ("tool_a", "tool_b")` to `TOOL_SETS` below (the tool names are the contract's).
2. Write the dialect in `kbserver/dialects/NAME.py`: pure mapping plus calls through an
   `AgentSession` (kbserver.services.session), whose `submit` is the one write path; set
   `TOOLS = TOOL_SETS["NAME"]` there.
3. Bind its tools in the MCP edge (`kbserver/mcp/dialects.py`: a `NAME_tools(binding)` added to
   `dialect_tools`). The MCP server checks at start that the tools it binds and this registry agree.
"""

from __future__ import annotations

from collections.abc import Iterable

from kbserver.core.errors import InvalidRequest

__all__ = ["DEFAULT_TOOL_SETS", "TOOL_SETS", "check_tool_sets", "tools_of"]

CONTEXT_TOOLS = (
    "list_context_files",
    "read_context_file",
    "list_context_versions",
    "write_context",
    "search_context",
)

TOOL_SETS: dict[str, tuple[str, ...]] = {
    "context": CONTEXT_TOOLS,
    "memory": ("memory_add", "memory_search", "memory_update", "memory_delete", "memory_task_wait"),
    "semantic": (
        "store_memory",
        "search_memories_by_semantics",
        "recall_related",
        "update_memory_importance",
        "list_due_memories",
    ),
    "typed": ("save_memory", "forget_memory", "query_index", "get_memory", "recall_raw", "archive_day"),
    "auto": ("add_memory", "edit_memory"),
    "memory_tool": ("memory",),
}
"""Tool set name -> the names of its tools."""

DEFAULT_TOOL_SETS = ("context",)


def check_tool_sets(names: Iterable[str]) -> tuple[str, ...]:
    """`names` as a tuple, when each is a registered set and none repeats. Raises InvalidRequest."""
    chosen = tuple(names)
    unknown = [n for n in chosen if n not in TOOL_SETS]
    if unknown or len(set(chosen)) != len(chosen) or not chosen:
        what = f"unknown tool set {unknown[0]!r}" if unknown else "each tool set at most once, at least one"
        raise InvalidRequest(f"tools: {what}; the tool sets are {', '.join(TOOL_SETS)}", tools=list(chosen))
    return chosen


def tools_of(sets: Iterable[str]) -> set[str]:
    """The names of every tool of `sets` (unknown names have none)."""
    return {tool for name in sets for tool in TOOL_SETS.get(name, ())}
