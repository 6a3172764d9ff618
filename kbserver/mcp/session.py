"""Who is calling and which run a call belongs to; per-caller instructions; the run of each MCP session.

- A run is an explicit handle: `start_run` returns it and every context and dialect tool takes it as
  `run` (kbserver.mcp.run_tools, binding.run_of); `kb://{slug}/{path}?run=RUN` reads its snapshot.
  An HTTP request's `Kb-Run` header names the run of every call in it that names none.
  Runs live in the control store, so any process serves them.
- A session of a protocol version with sessions (the initialize handshake; 2025-11-25 and older) is
  also one implicit interactive run, started when the session is initialized; a stdio process is one
  for its whole life. Calls that name no run belong to it.
- Sessionless calls (2026-07-28) that name no run have none: `kb://{slug}/{path}` reads the current
  head, and a `read_write_ask` agent's writes are refused as `approval_unavailable` with the advice to
  call start_run {"interactive": true}. The admin has no runs and reads the heads.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, INVALID_REQUEST

from kbserver.core import threads
from kbserver.core.errors import Forbidden, KBError, NotFound
from kbserver.core.model import Caller
from kbserver.dialects import registry
from kbserver.mcp.binding import RUN_KEY, Binding, RunInfo, connection_of, header_run
from kbserver.mcp.dialects import allowed_tools
from kbserver.mcp.errors import error_result
from kbserver.mcp.instructions import instructions
from kbserver.mcp.resources import mime_type, resource_page
from kbserver.services import kbs
from kbserver.services.access.toolsets import TOOL_SETS, tools_of

__all__ = ["Binding", "RunInfo", "SessionMiddleware"]  # Binding, RunInfo: re-exported from binding.py

log = logging.getLogger(__name__)

_Ctx = ServerRequestContext[Any, Any]


def _protocol_error(err: KBError, code: int = INVALID_REQUEST) -> MCPError:
    return MCPError(code=code, message=f"{err.code}: {err.message}", data=err.to_dict())


class SessionMiddleware:
    """Server middleware: starts a session's run at `initialize`, writes the caller's own instructions
    into `initialize` and `server/discover` results, lists the caller's files as resources, and shows
    and runs only the tools of the caller's tool sets (plus `always`)."""

    def __init__(self, binding: Binding, always: Iterable[str] = ()) -> None:
        self.binding = binding
        self.always = frozenset(always)

    async def __call__(self, ctx: _Ctx, call_next: CallNext) -> HandlerResult:
        if ctx.method in ("initialize", "server/discover"):
            return await self._with_instructions(ctx, call_next)
        if ctx.method == "resources/list":
            return await self._list_resources(ctx, call_next)
        if ctx.method == "tools/list":
            return await self._list_tools(ctx, call_next)
        if ctx.method == "tools/call":
            refused = await self._refused_tool(ctx)
            if refused is not None:
                return refused
        if ctx.method == "prompts/get":
            return await self._get_prompt(ctx, call_next)
        result = await call_next(ctx)
        if ctx.method == "resources/read" and isinstance(result, dict):
            for item in result.get("contents") or []:  # one template serves every kind of file
                uri = item.get("uri") if isinstance(item, dict) else None
                if isinstance(uri, str) and uri.startswith("kb://") and "text" in item:
                    item["mimeType"] = mime_type(uri)
        return result

    async def _get_prompt(self, ctx: _Ctx, call_next: CallNext) -> HandlerResult:
        """The SDK raises a bare ValueError for a prompt it does not know, which its dispatcher logs
        with two tracebacks and answers as an internal error: it is the client's mistake."""
        try:
            return await call_next(ctx)
        except ValueError:
            name = (ctx.params or {}).get("name")
            err = NotFound(f"prompt {name!r} does not exist; prompts/list names the prompts here", name=name)
            raise _protocol_error(err, INVALID_PARAMS) from None

    async def _caller(self) -> Caller:
        try:
            return await self._find_caller()
        except KBError as err:
            raise _protocol_error(err) from None

    async def _find_caller(self) -> Caller:
        """The caller: at hand when the token's check found it (no thread), else from a thread
        (it may query the control plane). Raises KBError."""
        known = self.binding.known()
        return known if known is not None else await threads.run(self.binding.caller)

    async def _with_instructions(self, ctx: _Ctx, call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if not isinstance(result, dict):
            return result
        try:
            caller = await self._find_caller()
        except KBError as err:  # e.g. the agent was deleted: keep the generic rules; its calls will fail
            log.warning("no caller for MCP instructions: %s: %s", err.code, err.message)
            return result
        try:
            run = await self._run_of(ctx)
        except KBError as err:  # a Kb-Run header naming no live run: each call naming none says so
            log.info("MCP Kb-Run header of agent %s: %s: %s", caller.name, err.code, err.message)
            run = None
        if ctx.method == "initialize" and run is None and header_run(ctx) is None:
            conn = connection_of(ctx)
            run = await threads.run(self.binding.start_run, caller)
            if run is not None:
                conn.state[RUN_KEY] = run
                log.info("MCP session %s of agent %s is run %s", conn.session_id, caller.name, run.id)
        reachable = await threads.run(kbs.visible, self.binding.services, caller)
        pinned = (run.id, run.mounts) if run is not None else None
        extra = []
        if not caller.is_admin and "context" not in caller.tools:
            extra.append(
                f"Your tool sets are {', '.join(caller.tools) or 'none'}: the context tools named above "
                "(read_context_file, write_context, ...) are not among your tools; use your own."
            )
        # Each of the caller's dialects adds its part, by rank (the agent's own MEMORY.md first).
        for dialect in sorted(registry.dialects(), key=lambda d: d.instructions_rank):
            if dialect.instructions is not None and dialect.name in caller.tools:
                part = await threads.run(dialect.instructions, self.binding.services, caller)
                if part:
                    extra.append(part)
        result["instructions"] = instructions(caller, reachable, pinned, extra)
        return result

    async def _run_of(self, ctx: _Ctx) -> RunInfo | None:
        """The call's run (binding.run_of); a `Kb-Run` header is looked up in the control store, in a
        thread. Raises NotFound for a header naming no live run of the caller's."""
        if header_run(ctx) is None:
            return self.binding.run_of(ctx)
        return await threads.run(self.binding.run_of, ctx)

    def _allowed(self, caller: Caller) -> set[str]:
        return allowed_tools(caller) | self.always

    async def _list_tools(self, ctx: _Ctx, call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return result
        allowed = self._allowed(await self._caller())
        result["tools"] = [t for t in result["tools"] if isinstance(t, dict) and t.get("name") in allowed]
        return result

    async def _refused_tool(self, ctx: _Ctx) -> HandlerResult | None:
        """A tool error for a tool outside the caller's tool sets; None when the call may go ahead."""
        name = (ctx.params or {}).get("name")
        try:
            caller = await self._find_caller()
        except KBError:
            return None  # the tool itself reports the missing or unknown caller
        if not isinstance(name, str) or name in self._allowed(caller):
            return None
        if name not in tools_of(TOOL_SETS):
            missing = NotFound(f"there is no tool {name}; tools/list names your tools", tool=name)
            return error_result(missing).model_dump(by_alias=True, mode="json", exclude_none=True)
        sets = ", ".join(caller.tools) or "none"
        err = Forbidden(
            f"the tool {name} is not in your tool sets ({sets}); ask an admin for an agent with the set "
            "that has it",
            tool=name,
        )
        return error_result(err).model_dump(by_alias=True, mode="json", exclude_none=True)

    async def _list_resources(self, ctx: _Ctx, call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if not isinstance(result, dict):
            return result
        caller = await self._caller()
        cursor = (ctx.params or {}).get("cursor")
        try:
            run = await self._run_of(ctx)
            page, next_cursor = await threads.run(
                resource_page,
                self.binding.services,
                caller,
                run.mounts if run else None,
                run.id if run else None,
                cursor,
            )
        except KBError as err:
            raise _protocol_error(err, INVALID_PARAMS) from None
        # Only the caller's files: the approval card (ui://) is found through write_context's _meta.
        result["resources"] = [r.model_dump(by_alias=True, mode="json", exclude_none=True) for r in page]
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        else:
            result.pop("nextCursor", None)
        return result
