"""What a dialect's MCP binder builds its tools with; the API for third-party dialects as well.

A binder is `tools(binding) -> list[Tool]`: each tool parses its arguments, builds a DialectCall with
`call_of` and calls the dialect, which decides; `ok_result` sends its answer, and a KBError it raises
reaches the agent as `"{code}: {message}"`. Annotate the return as
`Annotated[CallToolResult, published(MyResult)]` to publish the result's type (a pydantic model, such as
kbserver.dialects.results.Result, or a TypedDict) as `outputSchema`.
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations at registration.

import functools
import inspect
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field, with_config

from kbserver.dialects.session import DialectCall
from kbserver.mcp.binding import RunArg
from kbserver.mcp.dialect_schemas import PUBLISHED
from kbserver.mcp.errors import KBTool, ok_result

if TYPE_CHECKING:
    from kbserver.mcp.binding import Binding

__all__ = ["READS", "WRITES", "Kb", "RunArg", "call_of", "ok_result", "published", "tool"]

Kb = Annotated[
    str | None,
    Field(
        description="The KB's slug. Omit it to use the only KB you can write (see the server instructions)."
    ),
]

WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)
READS = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


def call_of(binding: "Binding", ctx: Context[Any, Any], run: str | None) -> DialectCall:
    """The dialect call of this tool call: the caller and its run (`run`, else the session's)."""
    return DialectCall.of(binding.services, binding.caller(), binding.run_of(ctx.request_context, run))


def tool(fn: Callable[..., Any], title: str, annotations: ToolAnnotations) -> Tool:
    """`fn` as a tool: its name, its docstring as the description, its annotations as the schemas."""
    return KBTool.from_function(
        fn, title=title, description=inspect.cleandoc(fn.__doc__ or ""), annotations=annotations
    )


@functools.cache
def published(result: type) -> type:
    """The result type `result` as published: its own fields, with the error as the other answer. A
    pydantic model (as kbserver.dialects.results), or a plugin's TypedDict."""
    name = result.__name__.removesuffix("Result") + "Output"
    if issubclass(result, BaseModel):
        return types.new_class(name, (result,), {}, lambda ns: ns.update(model_config=PUBLISHED))
    return with_config(PUBLISHED)(types.new_class(name, (result,), {}))
