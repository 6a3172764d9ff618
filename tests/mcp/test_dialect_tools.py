"""The dialect tools' names and arguments are exactly the contract's (§5), in every tool set."""

from __future__ import annotations

import pytest

from kbserver.mcp.dialects import TOOL_SET_TOOLS
from kbserver.services import Services, agents
from tests.helpers import make_agent
from tests.mcp.clients import memory_client

pytestmark = pytest.mark.anyio

EXPECTED_ARGS = {
    "add_memory": ({"content", "kb"}, {"content"}),
    "edit_memory": ({"old_string", "new_string", "kb"}, {"old_string", "new_string"}),
    "memory": (
        {
            "command",
            "path",
            "view_range",
            "file_text",
            "old_str",
            "new_str",
            "insert_line",
            "insert_text",
            "old_path",
            "new_path",
            "kb",
        },
        {"command"},
    ),
    "save_memory": (
        {
            "type",
            "summary",
            "title",
            "category",
            "key",
            "name",
            "saved_kind",
            "saved_reason",
            "source_refs",
            "kb",
        },
        {"type", "summary"},
    ),
    "forget_memory": ({"type", "id", "reason", "kb"}, {"type", "id"}),
    "query_index": ({"query", "types", "limit", "kb"}, {"query"}),
    "get_memory": ({"type", "id", "kb"}, {"type", "id"}),
    "recall_raw": ({"query", "startDate", "endDate", "limit", "kb"}, set()),
    "archive_day": ({"date", "summary", "diary", "facts", "kb"}, {"date"}),
}


async def test_dialect_tool_names_and_arguments(services: Services, kb: str) -> None:
    make_agent(services, "all", {kb: "read_write"}, tools=["auto", "memory_tool", "typed"])
    async with memory_client(services, "all") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == set(EXPECTED_ARGS)
    for name, (args, required) in EXPECTED_ARGS.items():
        schema = tools[name].input_schema
        assert set(schema["properties"]) == args, name
        assert set(schema.get("required", [])) == required, name
        assert tools[name].description, name
    assert tools["query_index"].input_schema["properties"]["limit"]["default"] == 20
    assert tools["recall_raw"].input_schema["properties"]["limit"]["default"] == 10
    assert "undone" in (tools["forget_memory"].description or "")  # unlike the seed skill: history keeps it
    for command in ("view", "create", "str_replace", "insert", "delete", "rename"):
        assert command in (tools["memory"].description or "")


def test_registry_matches_the_tool_set_names() -> None:
    assert set(TOOL_SET_TOOLS) <= set(agents.TOOL_SETS)
    assert {"context", "auto", "memory_tool", "typed"} <= set(TOOL_SET_TOOLS)
    assert TOOL_SET_TOOLS["memory_tool"] == ("memory",)
