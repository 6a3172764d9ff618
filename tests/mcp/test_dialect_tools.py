"""The dialect tools' names and arguments are exactly the contract's (§5), in every tool set."""

from __future__ import annotations

import pytest

from kbserver.mcp import RUN_TOOL_NAMES
from kbserver.mcp.dialects import TOOL_SET_TOOLS
from kbserver.services import Services
from kbserver.services.access import agents
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
    assert set(tools) == set(EXPECTED_ARGS) | set(RUN_TOOL_NAMES)
    for name, (args, required) in EXPECTED_ARGS.items():
        schema = tools[name].input_schema
        assert set(schema["properties"]) == args | {"run"}, name
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


async def test_results_and_errors_match_the_published_output_schemas(services: Services, kb: str) -> None:
    """TypeScript clients (and the Inspector) check structuredContent against outputSchema, errors too."""
    import jsonschema

    make_agent(services, "all", {kb: "read_write"}, tools=["auto", "memory_tool", "typed"])
    make_agent(services, "asker", {kb: "read_write_ask"}, tools=["auto", "typed"])
    calls: list[tuple[str, dict[str, object]]] = [
        ("add_memory", {"content": "likes tea"}),
        ("edit_memory", {"old_string": "tea", "new_string": "green tea"}),
        ("edit_memory", {"old_string": "coffee", "new_string": "x"}),
        ("memory", {"command": "view", "path": "/memories"}),
        ("memory", {"command": "create", "path": "/memories/a.md", "file_text": "a\n"}),
        ("memory", {"command": "view", "path": "/memories/a.md"}),
        ("memory", {"command": "view", "path": "/etc"}),
        ("save_memory", {"type": "topic", "name": "Tea", "summary": "Green tea"}),
        ("save_memory", {"type": "nope", "summary": "x"}),
        ("query_index", {"query": "tea"}),
        ("get_memory", {"type": "topic", "id": "tea"}),
        ("get_memory", {"type": "source", "id": "README.md"}),
        ("archive_day", {"date": "2026-11-28", "facts": ["tea"]}),
        ("recall_raw", {"query": "tea"}),
        ("recall_raw", {}),
        ("forget_memory", {"type": "topic", "id": "tea", "reason": "done"}),
    ]
    async with memory_client(services, "all") as client:
        schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
        assert all(schemas.values())
        for name, args in calls:
            result = await client.call_tool(name, args)
            assert result.structured_content is not None, name
            jsonschema.validate(result.structured_content, schemas[name])  # type: ignore[arg-type]
    async with memory_client(services, "asker", mode="legacy") as client:
        for name, args in [
            ("add_memory", {"content": "x"}),
            ("save_memory", {"type": "topic", "name": "T", "summary": "s"}),
        ]:
            result = await client.call_tool(name, args)
            assert result.structured_content and result.structured_content["proposal"]["status"] == "pending"
            jsonschema.validate(result.structured_content, schemas[name])  # type: ignore[arg-type]
