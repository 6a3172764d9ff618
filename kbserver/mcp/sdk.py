"""Every private part of the MCP SDK that kbserver relies on, checked against `mcp~=2.3.0` at import.

The SDK gives no public way to a request's connection (a session's run lives there) or to the
low-level server (whose tool-schema lookup server.py wraps), and http.py recognises one of its log
lines. At import `check` refuses an SDK
outside 2.3.x, or one lacking any of these, with one error: never a silently sessionless server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.session import ServerSession

from kbserver.core.pins import installed, missing_strings, missing_uses

__all__ = [
    "POST_FAILED_LOGGER",
    "POST_FAILED_MESSAGE",
    "TESTED",
    "SDKChanged",
    "SchemaLookup",
    "check",
    "connection",
    "lowlevel_server",
    "wrap_tool_input_schema",
]

DIST = "mcp"
TESTED = "2.3"  # the release series this module was checked on: pyproject.toml pins mcp~=2.3.0
POST_FAILED_LOGGER = "mcp.server.streamable_http"
POST_FAILED_MESSAGE = "Error handling POST request"
"""The logger and message of the transport's ERROR when handing a POSTed message to a session fails."""

# Instance attributes: what each class's own methods must still set or read (their code names it).
USES: Mapping[type, tuple[str, ...]] = {
    ServerSession: ("_connection",),
    MCPServer: ("_lowlevel_server", "_tool_input_schema"),
    Server: ("get_tool_input_schema",),
}
# Strings a module's code must still hold: (module, string).
LOGS: tuple[tuple[str, str], ...] = ((POST_FAILED_LOGGER, POST_FAILED_MESSAGE),)


class SDKChanged(RuntimeError):
    """The installed MCP SDK is not the one this module was checked on: fix the pin, or this module."""


def check(
    version: str | None,
    uses: Mapping[type, tuple[str, ...]] = USES,
    logs: tuple[tuple[str, str], ...] = LOGS,
) -> None:
    """Raise SDKChanged, naming every problem at once, unless `version` is a 2.3.x release and every
    attribute of `uses` and string of `logs` is there."""
    problems = []
    if version is None or re.fullmatch(re.escape(TESTED) + r"\.\d+", version) is None:
        problems.append(f"version {version or 'not installed'} found, {TESTED}.x required")
    problems += missing_uses(uses) + missing_strings(logs)
    if problems:
        raise SDKChanged(
            f"{DIST}: {'; '.join(problems)}. kbserver.mcp.sdk reads MCP SDK internals checked on "
            f"{DIST}~={TESTED}.0 only: install that version (pyproject.toml pins it)"
        )


check(installed(DIST))


def connection(session: ServerSession) -> Connection:
    """The connection of a per-request session: its `state` outlives the request (a session's run)."""
    conn: Connection = session._connection
    return conn


def lowlevel_server(server: MCPServer[Any]) -> Server[Any]:
    """The low-level server under an MCPServer (the one whose `get_tool_input_schema` the transport calls)."""
    lowlevel: Server[Any] = server._lowlevel_server
    return lowlevel


SchemaLookup = Callable[[str], Any]


def wrap_tool_input_schema(server: MCPServer[Any], wrap: Callable[[SchemaLookup], SchemaLookup]) -> None:
    """Put `wrap(lookup)` in place of the low-level server's `get_tool_input_schema`: the lookup the
    transport's `Mcp-Param-*` header check calls before every tools/call (MCPServer always sets it)."""
    lowlevel = lowlevel_server(server)
    lookup = lowlevel.get_tool_input_schema
    if lookup is None:
        raise SDKChanged(
            f"{DIST}: the low-level server has no get_tool_input_schema; checked on {TESTED}.x only"
        )
    lowlevel.get_tool_input_schema = wrap(lookup)
