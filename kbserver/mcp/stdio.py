"""MCP over stdio for one agent (`kbserver mcp --agent NAME`): the same tools; the process is one run."""

from __future__ import annotations

import logging
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

from kbserver.mcp.binding import Binding
from kbserver.mcp.server import build_server
from kbserver.services import Services
from kbserver.services.access.auth import caller_for

__all__ = ["run_stdio", "stdio_server"]

log = logging.getLogger(__name__)


def stdio_server(services: Services, agent: str, public_url: str | None = None) -> MCPServer[Any]:
    """The server for `agent`, with one interactive run pinned now. Raises NotFound for an unknown agent.

    `public_url` is the web admin's address its approval links use (else they are relative)."""
    caller = caller_for(services, agent)
    # Links are read again on every call, so an admin's change applies without a restart.
    binding = Binding(services, lambda: caller_for(services, agent), public_url=public_url)
    binding.process_run = binding.start_run(caller)
    if binding.process_run is not None:
        log.info("MCP stdio for agent %s is run %s", agent, binding.process_run.id)
    return build_server(binding)


def run_stdio(services: Services, agent: str, public_url: str | None = None) -> None:
    """Serve MCP on stdin/stdout until the client closes it. Raises NotFound for an unknown agent.

    Other processes (a running `kbserver serve`) may share the data folder: writes go through the
    services' cross-process lock, and search catches its index up with the repositories on demand.
    """
    server = stdio_server(services, agent, public_url)
    anyio.run(server.run_stdio_async)
