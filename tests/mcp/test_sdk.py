"""kbserver.mcp.sdk against the installed MCP SDK: each accessor agrees with what the SDK itself does,
and an SDK it was not checked on is one loud error."""

from __future__ import annotations

import importlib.metadata
import inspect
import logging
import re
from pathlib import Path
from typing import Any

import mcp.server.streamable_http
import pytest
from mcp import Client
from mcp.server.connection import Connection
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.session import ServerSession

from kbserver.mcp import sdk

pytestmark = pytest.mark.anyio


def test_the_installed_sdk_is_the_checked_and_pinned_one() -> None:
    sdk.check(importlib.metadata.version("mcp"))
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert re.findall(r'"mcp([~=<>!][^"]*)"', pyproject) == [f"~={sdk.TESTED}.0"]


@pytest.mark.parametrize("version", ["2.4.0", "3.0.0", "2.2.9", "2.3", "2.3.0rc1", None])
def test_another_sdk_version_is_one_loud_error(version: str | None) -> None:
    with pytest.raises(sdk.SDKChanged) as err:
        sdk.check(version)
    message = str(err.value)
    assert message.startswith(f"mcp: version {version or 'not installed'} found, 2.3.x required")
    assert "mcp~=2.3.0" in message


def test_a_missing_attribute_or_log_line_is_named_in_the_same_error() -> None:
    with pytest.raises(sdk.SDKChanged) as err:
        sdk.check(
            "2.3.1",
            uses={ServerSession: ("_connection", "_conn"), MCPServer: ("_lowlevel",)},
            logs=((sdk.POST_FAILED_LOGGER, "Error handling PUT request"),),
        )
    message = str(err.value)
    assert "version" not in message.split(".")[0]  # 2.3.1 is fine: only what is missing is named
    assert "ServerSession no longer uses _conn;" in message and "_connection," not in message
    assert "MCPServer no longer uses _lowlevel" in message
    assert "mcp.server.streamable_http no longer logs 'Error handling PUT request'" in message


def test_connection_is_the_one_the_sessions_public_properties_read() -> None:
    conn = Connection(outbound=None, protocol_version="2025-11-25", session_id="s1")  # type: ignore[arg-type]
    session = ServerSession(None, conn)  # type: ignore[arg-type]
    assert sdk.connection(session) is conn
    conn.protocol_version = "2025-06-18"
    assert session.protocol_version == "2025-06-18"  # the SDK reads the same object


async def test_connection_state_outlives_a_request() -> None:
    server: MCPServer[Any] = MCPServer("probe")
    seen: list[Connection] = []

    @server.tool()
    def count(ctx: Context) -> int:
        """How many calls this connection has made."""
        conn = sdk.connection(ctx.request_context.session)
        seen.append(conn)
        conn.state["calls"] = conn.state.get("calls", 0) + 1
        return int(conn.state["calls"])

    async with Client(server, mode="legacy") as client:
        first = await client.call_tool("count", {})
        second = await client.call_tool("count", {})
    assert [first.structured_content, second.structured_content] == [{"result": 1}, {"result": 2}]
    assert seen[0] is seen[1]


async def test_lowlevel_server_answers_the_servers_own_tool_schemas() -> None:
    server: MCPServer[Any] = MCPServer("probe")

    @server.tool()
    def echo(text: str) -> str:
        """Echoes."""
        return text

    lowlevel = sdk.lowlevel_server(server)
    assert lowlevel.name == server.name == "probe"
    assert lowlevel.get_tool_input_schema is not None
    (tool,) = await server.list_tools()
    assert lowlevel.get_tool_input_schema("echo") == tool.input_schema
    assert lowlevel.get_tool_input_schema("nope") is None


def test_the_post_failure_is_logged_where_http_py_listens() -> None:
    module = mcp.server.streamable_http
    assert module.logger is logging.getLogger(sdk.POST_FAILED_LOGGER)
    assert f'logger.exception("{sdk.POST_FAILED_MESSAGE}")' in inspect.getsource(module)


async def test_wrap_tool_input_schema_puts_the_wrapper_where_the_schema_is_looked_up() -> None:
    server: MCPServer[Any] = MCPServer("probe")

    @server.tool()
    def echo(text: str) -> str:
        """Echoes."""
        return text

    asked: list[str] = []

    def wrap(lookup: sdk.SchemaLookup) -> sdk.SchemaLookup:
        def counting(name: str) -> Any:
            asked.append(name)
            return lookup(name)

        return counting

    sdk.wrap_tool_input_schema(server, wrap)
    (tool,) = await server.list_tools()
    lowlevel = sdk.lowlevel_server(server)
    assert lowlevel.get_tool_input_schema is not None
    assert lowlevel.get_tool_input_schema("echo") == tool.input_schema  # the SDK's own answer, through it
    assert lowlevel.get_tool_input_schema("nope") is None
    assert asked == ["echo", "nope"]
    lowlevel.get_tool_input_schema = None  # a low-level server without the lookup: one loud error
    with pytest.raises(sdk.SDKChanged, match="get_tool_input_schema"):
        sdk.wrap_tool_input_schema(server, wrap)
