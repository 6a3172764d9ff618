"""Clients for the MCP tests: the SDK's own, in-memory and over HTTP, and result checks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult

from kbserver.mcp import Binding, build_server
from kbserver.services import Services
from kbserver.services.access.auth import caller_for

# A raw initialize request over HTTP and the headers /mcp needs (for tests that read the status).
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def agent_server(services: Services, agent: str) -> MCPServer[Any]:
    """The MCP server as `agent` sees it, for the in-memory client (no transport, no token)."""
    return build_server(Binding(services, lambda: caller_for(services, agent)))


@asynccontextmanager
async def memory_client(services: Services, agent: str, mode: str = "auto") -> AsyncIterator[Client]:
    async with Client(agent_server(services, agent), mode=mode) as client:
        yield client


@asynccontextmanager
async def http_client(url: str, headers: dict[str, str], mode: str = "auto") -> AsyncIterator[Client]:
    """The SDK client against `url` (the server's base URL) with `headers` (the bearer token)."""
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as hc:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=hc), mode=mode) as client:
            yield client


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def error(result: CallToolResult) -> dict[str, Any]:
    """The contract error of a failed call; its text starts with the code."""
    assert result.is_error
    assert isinstance(result.structured_content, dict)
    err = result.structured_content["error"]
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith(f"{err['code']}: "), text
    assert err["message"] and text == f"{err['code']}: {err['message']}"
    return err  # type: ignore[no-any-return]
