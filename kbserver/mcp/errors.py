"""KBErrors at the MCP edge: tool errors whose text starts with the contract's code, and resource errors."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, TextContent
from pydantic import BaseModel, ValidationError

from kbserver.core.errors import InvalidRequest, KBError
from kbserver.core.inputs import check_input
from kbserver.core.problems import problems

__all__ = ["KBTool", "error_result", "ok_result", "resource_error"]

log = logging.getLogger(__name__)


def error_result(err: KBError) -> CallToolResult:
    """`is_error` with text `"{code}: {message}"` and `structured_content={"error": {code, message, ...}}`."""
    return CallToolResult(
        is_error=True,
        content=[TextContent(type="text", text=f"{err.code}: {err.message}")],
        structured_content={"error": err.to_dict()},
    )


def ok_result(result: BaseModel | Mapping[str, Any]) -> CallToolResult:
    """A structured result; the text block carries the same JSON for clients that only read text."""
    data = result.model_dump(mode="json") if isinstance(result, BaseModel) else dict(result)
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(data, ensure_ascii=False))], structured_content=data
    )


def resource_error(err: KBError, uri: str) -> MCPError:
    """Resource reads fail as JSON-RPC errors (the protocol has no error result there); same text."""
    data = {"uri": uri, **err.to_dict()}
    return MCPError(code=INVALID_PARAMS, message=f"{err.code}: {err.message}", data=data)


def _invalid_arguments(tool: str, exc: ValidationError) -> InvalidRequest:
    said = [f"{p['field']}: {p['problem']}" for p in problems(exc, "arguments")]
    return InvalidRequest(f"bad arguments for {tool}: " + "; ".join(said), errors=said)


class KBTool(Tool):
    """A tool whose failures all reach the agent as `"{code}: {message}"`: KBErrors raised by the body and
    arguments the input schema rejects (`invalid_request`). Anything else is a bug: logged, `internal`."""

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        try:
            check_input(arguments)  # NUL and lone surrogates, in any argument, before any store sees them
        except InvalidRequest as err:
            return error_result(err)
        try:
            return await super().run(arguments, context, convert_result=convert_result)
        except ToolError as exc:  # the SDK wraps what the body raised; __cause__ is the original
            cause = exc.__cause__
            if isinstance(cause, KBError):
                return error_result(cause)
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                return error_result(_invalid_arguments(self.name, cause))
            log.error("MCP tool %s failed", self.name, exc_info=cause or exc)
            return error_result(KBError("the server failed on this call; it has been logged"))
