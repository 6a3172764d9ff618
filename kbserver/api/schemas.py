"""Pydantic models of the HTTP API's query strings, bodies and answers (the source of /openapi.json)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from kbserver.core.model import (
    AGENT_PATTERN,
    SLUG_PATTERN,
    VERSION_PATTERN,
    FileEntry,
    Message,
    Permission,
    VersionInfo,
    WriteRequest,
    WriteResult,
)
from kbserver.core.paths import MAX_PATH_BYTES, PATH_PATTERN

__all__ = [
    "AgentCreate",
    "AgentOut",
    "AgentWithToken",
    "AgentsOut",
    "ErrorOut",
    "FileOut",
    "FilesOut",
    "FilesQuery",
    "IndexOut",
    "IndexQuery",
    "KBCreate",
    "KBOut",
    "KBSummary",
    "KBsOut",
    "LinkIn",
    "ProposalOut",
    "ProposalsOut",
    "ProposalsQuery",
    "ReadQuery",
    "RejectIn",
    "RevertIn",
    "ReviewIn",
    "ReviewOut",
    "RunIn",
    "RunOut",
    "SearchOut",
    "SearchQuery",
    "UndoIn",
    "VersionDetail",
    "VersionsOut",
    "VersionsQuery",
    "WriteRequest",
    "WriteResult",
]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


# What /openapi.json states about the values the server checks (the services enforce them all).
Version = Annotated[str, Field(pattern=VERSION_PATTERN, description="a version: a 40-hex commit id on main")]
Slug = Annotated[str, Field(pattern=SLUG_PATTERN)]
AgentName = Annotated[str, Field(pattern=AGENT_PATTERN)]
FilePath = Annotated[
    str,
    Field(
        min_length=1,
        description="a KB file path (CONTRACT.md §3 Paths)",
        json_schema_extra={"pattern": PATH_PATTERN, "maxLength": MAX_PATH_BYTES},
    ),
]
SearchText = Annotated[str, Field(min_length=1, pattern=r"\S", description="non-blank search text")]
ToolSet = Literal["context", "memory", "semantic", "typed", "auto", "memory_tool"]


class ErrorBody(BaseModel):
    code: str
    message: str


class ErrorOut(BaseModel):
    error: ErrorBody


class KBCreate(_In):
    slug: str = Field(pattern=SLUG_PATTERN)
    description: str = Field(default="", max_length=2000)


class KBSummary(BaseModel):
    slug: str
    description: str
    head: str | None
    permission: str


class KBsOut(BaseModel):
    kbs: list[KBSummary]


class KBOut(BaseModel):
    slug: str
    description: str
    head: str | None
    file_count: int
    indexed_version: str | None
    permission: str | None = None
    limits: dict[str, int] | None = None


class FilesQuery(_In):
    prefix: str = ""
    version: Version | None = None


class ReadQuery(_In):
    version: Version | None = None


class FilesOut(BaseModel):
    version: str | None
    files: list[FileEntry]


class FileOut(BaseModel):
    path: str
    content: str
    sha256: str
    version: str | None


class VersionsQuery(_In):
    path: FilePath | None = None
    limit: int = Field(default=50, ge=1, le=200)
    cursor: Version | None = None


class VersionsOut(BaseModel):
    versions: list[VersionInfo]
    next_cursor: str | None


class DiffEntry(BaseModel):
    path: str
    change: Literal["added", "modified", "deleted"]
    patch: str


class VersionDetail(VersionInfo):
    diff: list[DiffEntry]


class RevertIn(_In):
    version: Version
    message: Message | None = None


class UndoIn(_In):
    message: Message | None = None


class ReviewIn(_In):
    version: Version


class ReviewOut(BaseModel):
    reviewed: str | None = Field(description='the "reviewed up to" version, null before the first review')
    unreviewed: list[VersionInfo] = Field(description="agent writes and approvals after it, newest first")
    more: bool = Field(description="true when more unreviewed versions exist than are listed (500)")


class SearchQuery(_In):
    q: SearchText
    limit: int = Field(default=10, ge=1, le=100)
    offset: int = Field(default=0, ge=0)
    prefix: str | None = None


class SearchHit(BaseModel):
    path: str
    score: float
    snippet: str


class SearchOut(BaseModel):
    hits: list[SearchHit]
    total: int
    version: str | None


class IndexQuery(_In):
    wait_for: Version | None = None
    timeout: float = Field(default=10.0, ge=0, le=60)


class IndexOut(BaseModel):
    head: str | None
    indexed_version: str | None
    covered: bool | None = None
    index_error: str | None = None  # the follower's last failure on this index, until it catches up


class ProposalsQuery(_In):
    status: Literal["pending", "applying", "approved", "rejected"] | None = None


class ProposalFile(BaseModel):
    path: str
    mode: str


class ProposalOut(BaseModel):
    id: str
    agent: str
    created: str | None
    status: Literal["pending", "applying", "approved", "rejected"]
    files: list[ProposalFile]
    message: str | None = None
    run: str | None = None
    reason: str | None = None
    version: str | None = None
    diff: list[DiffEntry] | None = None


class ProposalsOut(BaseModel):
    proposals: list[ProposalOut]


class RejectIn(_In):
    reason: str | None = Field(default=None, max_length=10_000)


class ProposalPending(BaseModel):
    id: str
    status: Literal["pending"]


class ProposalAccepted(BaseModel):
    proposal: ProposalPending


class RunIn(_In):
    kbs: list[Slug] | None = None
    interactive: StrictBool = False


class RunOut(BaseModel):
    id: str
    mounts: dict[str, str]
    interactive: bool
    expires: str


def _default_tools() -> list[ToolSet]:
    return ["context"]


class AgentCreate(_In):
    name: str = Field(pattern=AGENT_PATTERN)
    parent: AgentName | None = None
    tools: list[ToolSet] = Field(default_factory=_default_tools, json_schema_extra={"uniqueItems": True})
    auto_record: StrictBool = False


class LinkOut(BaseModel):
    kb: str
    permission: Permission


class AgentOut(BaseModel):
    name: str
    parent: str | None
    tools: list[str]
    auto_record: bool
    links: list[LinkOut]


class AgentWithToken(AgentOut):
    token: str


class AgentsOut(BaseModel):
    agents: list[AgentOut]


class LinkIn(_In):
    kb: Slug
    permission: Permission
