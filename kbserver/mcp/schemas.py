"""Output schemas of the context tools: the published `outputSchema` and what results are checked against."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ERROR_SCHEMA",
    "FileInfo",
    "ListOutput",
    "ProposalInfo",
    "ProposalOutput",
    "ReadOutput",
    "SearchHit",
    "SearchOutput",
    "StartRunOutput",
    "VersionItem",
    "VersionsOutput",
    "WriteOutput",
]


ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "set instead of the result when the call failed (isError); the text starts with the code",
    "properties": {
        "code": {"type": "string", "description": "the contract's error code, e.g. stale, not_found"},
        "message": {"type": "string", "description": "what went wrong and what to do next"},
    },
    "required": ["code", "message"],
    "additionalProperties": True,
}


def _or_error(schema: dict[str, Any]) -> None:
    """Publish `{"error": {...}}` as an alternative result: clients that check structuredContent against
    outputSchema even on isError results (the TypeScript SDK, the Inspector) then accept our errors."""
    alternatives = schema.pop("anyOf", None) or [{"required": schema.pop("required", [])}]
    schema.pop("required", None)
    schema["properties"]["error"] = ERROR_SCHEMA
    schema["anyOf"] = [*alternatives, {"required": ["error"]}]


class _Output(BaseModel):
    """A tool's result. The model validates successes; the published schema also admits the error."""

    model_config = ConfigDict(json_schema_extra=_or_error)


class FileInfo(BaseModel):
    path: str
    size: int = Field(description="bytes")
    sha256: str = Field(description="pass it as expected_sha256 when you change this file")


class ListOutput(_Output):
    kb: str
    version: str | None = Field(description="the version listed (the KB's current head)")
    files: list[FileInfo]


class ReadOutput(_Output):
    kb: str
    path: str
    content: str
    sha256: str = Field(description="pass it as expected_sha256 when you change this file")
    version: str | None = Field(description="the version read (the KB's current head)")


class VersionItem(BaseModel):
    version: str = Field(description="pass it as read_context_file's `version` to read a file as it was")
    author: str = Field(description="`agent:NAME` or `admin` (a person)")
    kind: str = Field(description="create, agent_write, human_edit, revert or approval")
    message: str
    time: str
    paths: list[str] = Field(description="the files this version changed")


class VersionsOutput(_Output):
    kb: str
    versions: list[VersionItem] = Field(description="newest first")


class WrittenFile(BaseModel):
    path: str
    mode: str
    sha256: str | None = Field(description="the file's new sha256; null after delete")


class ProposalInfo(BaseModel):
    id: str
    status: str


def _write_or_proposal(schema: dict[str, Any]) -> None:
    schema["anyOf"] = [{"required": ["version", "parent", "files"]}, {"required": ["proposal"]}]
    _or_error(schema)


class WriteOutput(_Output):
    """`{version, parent, files}` for a new version, or `{proposal}` when an admin must approve it."""

    model_config = ConfigDict(json_schema_extra=_write_or_proposal)
    version: str | None = Field(default=None, description="the new version")
    parent: str | None = Field(default=None, description="the version it was made on")
    files: list[WrittenFile] | None = None
    proposal: ProposalInfo | None = Field(
        default=None, description="set instead of a version when the write awaits an admin's approval"
    )
    approval: dict[str, Any] | None = Field(
        default=None,
        description="with proposal: what the approval card shows (kb, files, diff, status, admin_url)",
    )


class SearchHit(BaseModel):
    kb: str
    path: str
    score: float
    snippet: str = Field(description="plain text of the file around the best matches")
    highlights: list[tuple[int, int]] = Field(
        description="[start, end) character offsets of the matched words in snippet"
    )


class SearchOutput(_Output):
    hits: list[SearchHit]


class StartRunOutput(_Output):
    """start_run's answer: HTTP `POST /runs`'s, its `id` named `run`, plus the rules for the run."""

    run: str = Field(description="the run's handle: pass it as `run` in every later tool call")
    mounts: dict[str, str] = Field(description="slug -> the version pinned for this run")
    interactive: bool
    expires_at: str = Field(description="when the run ends (RFC 3339 UTC)")
    instructions: str = Field(description="the memory rules and how to use this run")


class ProposalFileInfo(BaseModel):
    path: str
    mode: str


class ProposalOutput(_Output):
    """get_proposal's answer."""

    id: str
    kb: str
    status: str = Field(description="pending, approved, rejected or stale (approving it now would fail)")
    version: str | None = Field(default=None, description="the version it became (approved)")
    reason: str | None = Field(default=None, description="why it was rejected, or why it is stale")
    files: list[ProposalFileInfo]
    message: str | None = None
    diff: list[dict[str, Any]] | None = Field(
        default=None, description="[{path, change, patch}]: what approving it now would change (pending)"
    )
