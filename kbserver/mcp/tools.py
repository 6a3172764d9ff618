"""The `context` tool set: list_context_files, read_context_file, list_context_versions, write_context,
search_context."""

# No `from __future__ import annotations` here: the SDK reads the tools' annotations at registration, and
# the `files` annotation carries a description built from the server's limits inside context_tools().

import inspect
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from kbserver.core.model import FileChange, Limits
from kbserver.mcp.binding import RunArg
from kbserver.mcp.card import CARD_META, approval, approval_result
from kbserver.mcp.errors import KBTool, ok_result
from kbserver.mcp.schemas import ListOutput, ReadOutput, SearchOutput, VersionsOutput, WriteOutput
from kbserver.services.access.toolsets import CONTEXT_TOOLS
from kbserver.services.models import ProposalAccepted
from kbserver.services.reading import files as kb_files
from kbserver.services.reading.search import MAX_LIMIT
from kbserver.services.reviewing import versions
from kbserver.services.writing.idempotency import KEY_PATTERN

if TYPE_CHECKING:
    from kbserver.mcp.binding import Binding

__all__ = ["TOOL_NAMES", "context_tools"]

log = logging.getLogger(__name__)

TOOL_NAMES = CONTEXT_TOOLS

Kb = Annotated[
    str | None,
    Field(
        description="The KB's slug. Omit it when you can reach exactly one KB (the server instructions list "
        "your KBs)."
    ),
]
Prefix = Annotated[str | None, Field(description="Only paths starting with this text, e.g. `notes/`.")]
FilePath = Annotated[
    str,
    Field(
        min_length=1,
        description="Relative, /-separated path inside the KB, e.g. `README.md`, `log/2026-11.md`.",
    ),
]
Message = Annotated[
    str | None, Field(max_length=10_000, description="Why you make this change (the version's message).")
]
IdempotencyKey = Annotated[
    str | None,
    Field(
        pattern=KEY_PATTERN,
        description="Any unique text (a UUID) naming this write: if you are unsure whether a write went "
        "through, repeat it with the same key; within 24 hours the repeat answers the first result and "
        "writes nothing.",
    ),
]
Query = Annotated[str, Field(min_length=1, description="Words to look for (full-text; CJK works too).")]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description=f"At most this many hits (1 to {MAX_LIMIT}).")]
Version = Annotated[
    str | None,
    Field(
        description="A version id (40 hex, from list_context_versions) to read the file as it was then; "
        "omit it for the current file."
    ),
]
HistoryPath = Annotated[
    str | None, Field(description="Only the versions that changed this file, e.g. `notes/a.md`.")
]
VersionsLimit = Annotated[
    int,
    Field(
        ge=1, le=versions.MAX_LIMIT, description=f"At most this many versions (1 to {versions.MAX_LIMIT})."
    ),
]
_VERSION_FIELDS = ("version", "author", "kind", "message", "time", "paths")


def _files_description(limits: Limits) -> str:
    size = f"{limits.max_file_bytes} bytes"
    if limits.max_file_bytes % 1024 == 0:
        size = f"{limits.max_file_bytes // 1024} KiB"
    return (
        f"The changes, 1 to {limits.max_files} files (default limit; a KB may set its own), each path at "
        "most once. Modes: `create` a new file (fails if it exists); `append` `content` at the end; `edit` "
        "replaces `old_string`, which must occur exactly once, by `new_string`; `overwrite` the whole "
        f"file; `delete` it. Every file must stay under {size} (default limit) after the change. Read a file "
        "first and pass its sha256 as `expected_sha256` (every mode but create): if it changed since, the "
        "whole call fails as `stale` and changes nothing."
    )


def context_tools(binding: "Binding") -> list[Tool]:
    """The context tools, bound to `binding` (services, caller, run)."""
    services = binding.services
    limits = services.options.limits
    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

    def list_context_files(
        ctx: Context[Any, Any], kb: Kb = None, prefix: Prefix = None, run: RunArg = None
    ) -> Annotated[CallToolResult, ListOutput]:
        """List the files of a KB at its current version: path, size and sha256 of each, sorted by path.

        Start with README.md, which holds the KB's rules and index.
        """
        session = binding.session(ctx.request_context, run)
        caller = session.caller
        slug = session.default_kb(kb)
        listing = kb_files.listing(services, caller, slug, prefix or "")
        return ok_result({"kb": slug, **listing.model_dump(mode="json")})

    def read_context_file(
        path: FilePath, ctx: Context[Any, Any], kb: Kb = None, version: Version = None, run: RunArg = None
    ) -> Annotated[CallToolResult, ReadOutput]:
        """Read the current content of one file, with its sha256 and the KB version read.

        Without `version`, always the current file, including your own earlier writes. Keep the sha256:
        pass it as `expected_sha256` when you change the file. With `version` (from
        list_context_versions), the file as it was at that version. Within a run, the version it pinned
        is in start_run's `mounts`.
        """
        session = binding.session(ctx.request_context, run)
        caller = session.caller
        slug = session.default_kb(kb)
        found = kb_files.read(services, caller, slug, path, version)
        return ok_result({"kb": slug, **found.model_dump(mode="json")})

    def list_context_versions(
        ctx: Context[Any, Any],
        kb: Kb = None,
        path: HistoryPath = None,
        limit: VersionsLimit = 20,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, VersionsOutput]:
        """List a KB's versions newest first: who wrote each (an agent or a person), its kind, message,
        time and the paths it changed.

        KB files may have been written by other agents. When something looks wrong, check the history of
        that file (`path`) and read older content with read_context_file's `version`.
        """
        session = binding.session(ctx.request_context, run)
        caller = session.caller
        slug = session.default_kb(kb)
        page = versions.listing(services, caller, slug, path=path or None, limit=limit)
        shown = [v.model_dump(mode="json", include=set(_VERSION_FIELDS)) for v in page.versions]
        return ok_result({"kb": slug, "versions": shown})

    def write_context(
        files: Annotated[list[FileChange], Field(min_length=1, description=_files_description(limits))],
        ctx: Context[Any, Any],
        kb: Kb = None,
        message: Message = None,
        idempotency_key: IdempotencyKey = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, WriteOutput]:
        """Change one or more files of a KB in one all-or-nothing call that becomes exactly one version.

        Put one complete update in one call. Never write secrets, credentials, tokens or raw
        transcripts (refused as `secret_detected`). Returns {version, parent, files}, or {proposal} when
        your permission is read_write_ask and an admin must approve the change (only inside an
        interactive run: pass `run` from start_run {"interactive": true}).
        """
        session = binding.session(ctx.request_context, run)
        result = session.submit(session.default_kb(kb), files, message, idempotency_key=idempotency_key)
        if isinstance(result, ProposalAccepted):  # the approval card's data, and its text
            card = approval(services, session.caller, result.proposal.id, binding.public_url)
            return approval_result(result.model_dump(mode="json"), card)
        return ok_result(result)

    def search_context(
        query: Query,
        ctx: Context[Any, Any],
        kb: Kb = None,
        limit: Limit = 10,
        prefix: Prefix = None,
        run: RunArg = None,
    ) -> Annotated[CallToolResult, SearchOutput]:
        """Full-text search of a KB's current version; best hits first, each with a snippet.

        Read a hit with read_context_file before relying on it or changing it.
        """
        session = binding.session(ctx.request_context, run)
        slug = session.default_kb(kb)
        found = session.search(slug, query, limit=limit, prefix=prefix)
        return ok_result({"hits": [{"kb": slug, **hit.model_dump(mode="json")} for hit in found.hits]})

    write_annotations = ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
    )
    return [
        _tool(list_context_files, "List KB files", read_only),
        _tool(read_context_file, "Read a KB file", read_only),
        _tool(list_context_versions, "List a KB's versions", read_only),
        _tool(write_context, "Write to a KB", write_annotations, CARD_META),
        _tool(search_context, "Search a KB", read_only),
    ]


def _tool(
    fn: Callable[..., Any], title: str, annotations: ToolAnnotations, meta: dict[str, Any] | None = None
) -> Tool:
    description = inspect.cleandoc(fn.__doc__ or "")
    return KBTool.from_function(fn, title=title, description=description, annotations=annotations, meta=meta)
