"""Build the MCP server: the context tools, the resources, per-caller instructions and session runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mcp.server import CacheHint
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.shared.inbound import X_MCP_HEADER_KEY
from pydantic import AnyHttpUrl

from kbserver import __version__
from kbserver.mcp import sdk
from kbserver.mcp.binding import Binding
from kbserver.mcp.card import card_apps
from kbserver.mcp.dialects import dialect_tools
from kbserver.mcp.instructions import MEMORY_RULES
from kbserver.mcp.oauth import oauth_enabled
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
    public_url: str = "http://127.0.0.1:8765",
) -> MCPServer[Any]:
    """The MCP server for `binding`. With `token_verifier`, HTTP requests need a bearer token for
    `{public_url}/mcp`.

    `extra_tools` are added as they are (the benchmark adds a no-op tool; nothing else should).
    """
    auth = None
    if token_verifier is not None:
        # Bearer tokens (an agent's static token, or an OAuth access token of a connection) are bound
        # to `{public URL}/mcp`; a 401 points at its protected resource metadata (RFC 9728).
        oauth = oauth_enabled(public_url)  # else no issuer to point a client at: static tokens only
        auth = AuthSettings(
            issuer_url=AnyHttpUrl(public_url),
            resource_server_url=AnyHttpUrl(public_url + "/mcp") if oauth else None,
            validate_token_resource=oauth,
        )
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
    _skip_header_checks_of_plain_tools(server)
    return server


def _mentions(node: object, key: str) -> bool:
    """Whether any object anywhere in the JSON value `node` has the key `key`."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if key in item:
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _skip_header_checks_of_plain_tools(server: MCPServer[Any]) -> None:
    """Before every tools/call the SDK walks the tool's input schema twice for `x-mcp-header`
    annotations, to check `Mcp-Param-*` headers against them (event-loop CPU on every call,
    docs/performance.md). No tool of ours declares one, and where a schema declares none the check
    passes whatever the headers say; so the schema is handed to the check only when it mentions the
    keyword anywhere (looked up once per schema), which leaves the check exactly as it was."""

    def only_where_declared(schema_of: sdk.SchemaLookup) -> sdk.SchemaLookup:
        declares: dict[str, tuple[object, bool]] = {}

        def input_schema(name: str) -> Any:
            schema = schema_of(name)
            if schema is None:
                return None
            known = declares.get(name)
            if known is None or known[0] is not schema:
                known = declares[name] = (schema, _mentions(schema, X_MCP_HEADER_KEY))
            return schema if known[1] else None

        return input_schema

    sdk.wrap_tool_input_schema(server, only_where_declared)


def _name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__name__", ""))
