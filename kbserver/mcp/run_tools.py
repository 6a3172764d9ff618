"""The tools every agent has, whatever its tool sets: start_run and get_proposal. None of them decides a
proposal: a person approves in the web admin (the approval card opens it; see kbserver.mcp.card)."""

# No `from __future__ import annotations` here: the SDK reads the tools' annotations at registration.

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from kbserver.mcp.errors import KBTool, ok_result
from kbserver.mcp.instructions import MEMORY_RULES
from kbserver.mcp.schemas import ProposalOutput, StartRunOutput
from kbserver.services.reading import runs
from kbserver.services.writing import asks

if TYPE_CHECKING:
    from kbserver.mcp.binding import Binding

__all__ = ["RUN_TOOL_NAMES", "run_tools"]

RUN_TOOL_NAMES = ("start_run", "get_proposal")
"""Tools of every agent, outside the tool sets (CONTRACT.md §4: runs do not depend on MCP sessions)."""


def run_rules(run_id: str, mounts: dict[str, str], interactive: bool) -> str:
    """What start_run's answer tells the agent: the memory rules, the snapshot, how to use the handle."""
    pinned = ", ".join(f"{slug} at {version or '(empty)'}" for slug, version in mounts.items()) or "no KB"
    ask = (
        "In this interactive run a read_write_ask write becomes a proposal; get_proposal tells you "
        "what became of it."
        if interactive
        else 'A read_write_ask write needs an interactive run (start_run {"interactive": true}).'
    )
    return (
        f"Run {run_id} pinned {pinned}. Pass run={run_id!r} in every tool call of this run. "
        f"kb://{{slug}}/{{path}}?run={run_id} reads the pinned snapshot; read_context_file reads the "
        f"current file, and read_context_file version=... a pinned version. {ask}\n\n{MEMORY_RULES}"
    )


def run_tools(binding: "Binding") -> list[Tool]:
    """start_run and get_proposal, bound to `binding`."""
    services = binding.services

    def start_run(
        kbs: Annotated[
            list[str] | None,
            Field(max_length=100, description="Slugs of the KBs to pin; default: every KB you can read."),
        ] = None,
        interactive: Annotated[
            bool,
            Field(
                strict=True,
                description="true when a person follows this run and can approve your writes: then a "
                "read_write_ask write becomes a proposal instead of being refused.",
            ),
        ] = False,
        label: Annotated[
            str | None,
            Field(
                max_length=200,
                description="What this run is for, in a few words (e.g. 'triage open issues'): the "
                "person reviewing your writes sees them grouped under it.",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, StartRunOutput]:
        """Start a run: pin the current version of each KB you can read (or of `kbs`) for this task.

        Call it once at the start of a task and pass the `run` it returns as `run` in every later tool
        call. Returns {run, mounts: {slug: version}, expires_at, instructions}; after expires_at, calls
        naming the run fail as not_found (start a new one).
        """
        started = runs.start(services, binding.caller(), kbs, interactive, label)
        data = started.model_dump(mode="json")
        data = {"run": data.pop("id"), **data}
        data["instructions"] = run_rules(started.id, dict(started.mounts), interactive)
        return ok_result(data)

    def get_proposal(
        id: Annotated[str, Field(min_length=1, max_length=64, description="The proposal's id (prop_...).")],
    ) -> Annotated[CallToolResult, ProposalOutput]:
        """What became of one of your proposals: pending, approved (with its version), rejected (with
        the admin's reason) or stale (approving it now would fail, e.g. the file changed since: write
        again on the current file). Returns {id, kb, status, version?, reason?, files}."""
        return ok_result(asks.status(services, binding.caller(), id))

    return [
        _tool(start_run, "Start a run (pin a snapshot)", ToolAnnotations(read_only_hint=False)),
        _tool(
            get_proposal,
            "What became of a proposal",
            ToolAnnotations(read_only_hint=True, idempotent_hint=False, open_world_hint=False),
        ),
    ]


def _tool(
    fn: Callable[..., Any], title: str, annotations: ToolAnnotations, meta: dict[str, Any] | None = None
) -> Tool:
    return KBTool.from_function(
        fn, title=title, description=inspect.cleandoc(fn.__doc__ or ""), annotations=annotations, meta=meta
    )
