"""Build the MCP server: the context tools, the resources, per-caller instructions and session runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mcp.server import CacheHint
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from pydantic import AnyHttpUrl

from kbserver import __version__
from kbserver.mcp.binding import Binding
from kbserver.mcp.card import card_apps
from kbserver.mcp.dialects import dialect_tools
from kbserver.mcp.instructions import MEMORY_RULES
from kbserver.mcp.resources import register_resources
from kbserver.mcp.run_tools import RUN_TOOL_NAMES, run_tools
from kbserver.mcp.session import SessionMiddleware
from kbserver.mcp.tools import context_tools

__all__ = ["TOOLS_TTL_MS", "build_server"]

# Every one of these answers depends on who asks: never share a cached copy across callers.
_PRIVATE = CacheHint(ttl_ms=0, scope="private")
TOOLS_TTL_MS = 300_000
"""tools/list is the same for every request of one agent (its tool sets, plus the run tools): a client
may keep it this long; an admin's change of the agent's tool sets shows within that time."""
_CACHE_HINTS = {
    "server/discover": _PRIVATE,  # carries the instructions: MEMORY.md, due reminders
    "resources/list": _PRIVATE,
    "resources/read": _PRIVATE,
    "tools/list": CacheHint(ttl_ms=TOOLS_TTL_MS, scope="private"),
    "resources/templates/list": _PRIVATE,
}


def build_server(
    binding: Binding,
    *,
    token_verifier: TokenVerifier | None = None,
    extra_tools: Sequence[Callable[..., Any]] = (),
) -> MCPServer[Any]:
    """The MCP server for `binding`. With `token_verifier`, HTTP requests need a bearer token.

    `extra_tools` are added as they are (the benchmark adds a no-op tool; nothing else should).
    """
    auth = None
    if token_verifier is not None:
        # Tokens are kbserver's own bearer tokens, not OAuth: no authorization server to advertise, so no
        # protected-resource metadata either. The SDK still wants an issuer URL; nothing serves or uses it.
        auth = AuthSettings(issuer_url=AnyHttpUrl("http://localhost/"), resource_server_url=None)
    server: MCPServer[Any] = MCPServer(
        "kbserver",
        title="kbserver",
        description="Versioned, reviewable memory for AI agents: every knowledge base is a git repository.",
        version=__version__,
        instructions=MEMORY_RULES,  # replaced per caller at initialize and server/discover
        token_verifier=token_verifier,
        auth=auth,
        tools=[*context_tools(binding), *dialect_tools(binding), *run_tools(binding)],
        log_level="WARNING",
        cache_hints=_CACHE_HINTS,  # type: ignore[arg-type]
        extensions=[card_apps()],
        middleware=[SessionMiddleware(binding, always=[*RUN_TOOL_NAMES, *map(_name, extra_tools)])],
    )
    register_resources(server, binding)
    for fn in extra_tools:
        server.add_tool(fn)
    return server


def _name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__name__", ""))
