"""What every MCP tool and resource needs besides its arguments: the services, the caller, the run.

Its own module (not session.py), so that tools, resources and dialect bindings import it without
importing the session middleware that imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from pydantic import Field

from kbserver.core.model import Caller
from kbserver.mcp import sdk
from kbserver.services import Services
from kbserver.services.session import AgentSession, SessionRun, named_run, start_run

__all__ = ["RUN_HEADER", "RUN_KEY", "Binding", "RunArg", "RunInfo", "connection_of", "header_run"]

RunArg = Annotated[
    str | None,
    Field(
        max_length=64,
        description="The run this call belongs to: the `run` that start_run returned. With it, writes "
        "carry the run's id and, in an interactive run, a read_write_ask agent's writes become "
        "proposals. Omit it outside a run (or in a session or stdio process, which has its own).",
    ),
]
"""The optional `run` argument of every context and dialect tool."""

RUN_HEADER = "kb-run"
"""The HTTP header that names the run of every tool call that names none (CONTRACT.md §9)."""

RUN_KEY = "kbserver.run"
"""Where a session's run is kept in its connection's state."""

RunInfo = SessionRun
"""The run of an MCP session or stdio process (its id and the versions it mounted)."""

_Ctx = ServerRequestContext[Any, Any]


@dataclass
class Binding:
    """The services, the caller, and the run of the session a call belongs to.

    `caller` is synchronous (it may query the control plane) and raises Unauthorized or NotFound.
    `known` is the caller when it is at hand without I/O (HTTP: found with the bearer token), else
    None: the middleware then needs no thread for it. `process_run` is the run of a whole stdio
    process; HTTP keeps runs per session instead.
    """

    services: Services
    caller: Callable[[], Caller]
    process_run: RunInfo | None = None
    public_url: str | None = None  # the web admin's address (KBSERVER_PUBLIC_URL); None: relative links
    known: Callable[[], Caller | None] = lambda: None

    def run_of(self, rctx: _Ctx | None, run: str | None = None) -> RunInfo | None:
        """The run the current call belongs to: `run` (a handle from start_run), else the request's
        `Kb-Run` header, else the session's or the process's implicit run, else None (sessionless,
        admin). Raises NotFound for a run that is unknown, ended, expired or another agent's."""
        if run is None and rctx is not None:
            run = header_run(rctx)
        if run is not None:
            return named_run(self.services, self.caller(), run)
        if self.process_run is not None:
            return self.process_run
        conn = connection_of(rctx) if rctx is not None else None
        run = conn.state.get(RUN_KEY) if conn is not None else None
        return run if isinstance(run, SessionRun) else None

    def start_run(self, caller: Caller) -> RunInfo | None:
        """A new interactive run pinning the heads of the caller's KBs (None for the admin)."""
        return start_run(self.services, caller)

    def session(self, rctx: _Ctx | None, run: str | None = None) -> AgentSession:
        """The agent session of the current call: its caller and its run (see run_of)."""
        return AgentSession.of(self.services, self.caller(), self.run_of(rctx, run))


def header_run(rctx: _Ctx) -> str | None:
    """The run the HTTP request's `Kb-Run` header names (None: no header, or not over HTTP), so a
    sandbox host sets the run once in the client's configuration and the model never passes it."""
    headers = getattr(rctx.request, "headers", None)
    value = headers.get(RUN_HEADER) if headers is not None else None
    return (value.strip() or None) if isinstance(value, str) else None


def connection_of(rctx: _Ctx) -> Connection:
    """The per-connection object of the current request (its `state` outlives a single request):
    the SDK hands tools and middleware only a per-request session (kbserver.mcp.sdk reaches it)."""
    return sdk.connection(rctx.session)
