"""MCP edge: the `context` tools, `kb://` resources and per-caller instructions, over HTTP and stdio.

Owns everything that speaks MCP (the only package that imports the `mcp` SDK). Calls kbserver.services
and uses kbserver.core; never store, index, control or changes directly. Every KBError reaches the agent
as a tool error whose text starts with the contract's code (`stale: ...`).
"""

from kbserver.mcp.binding import Binding, RunInfo
from kbserver.mcp.http import mount_mcp
from kbserver.mcp.run_tools import RUN_TOOL_NAMES
from kbserver.mcp.server import build_server
from kbserver.mcp.stdio import run_stdio, stdio_server
from kbserver.mcp.tools import TOOL_NAMES

__all__ = [
    "RUN_TOOL_NAMES",
    "TOOL_NAMES",
    "Binding",
    "RunInfo",
    "build_server",
    "mount_mcp",
    "run_stdio",
    "stdio_server",
]
