"""What the services return: one pydantic model per answer, dumped as they are by every edge.

The API answers `model.model_dump(mode="json")` (and /openapi.json is generated from these models), MCP
tools build their results from them, templates read their attributes. Field order is the order of the
keys in the JSON answers, which outside tests check exactly: append new fields, never reorder.
A field that is left out of an answer when it does not apply uses `exclude_if` (not `None` as a value).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from kbserver.core.model import FileEntry, Limits, Permission, Role, VersionInfo, WriteResult

__all__ = [
    "Access",
    "Agent",
    "AgentDeleted",
    "AgentList",
    "Approval",
    "Change",
    "DiffEntry",
    "EditConflict",
    "ErrorInfo",
    "ExportResult",
    "FileContent",
    "FileEntry",
    "FileList",
    "FileNow",
    "ImportResult",
    "IndexStatus",
    "KBInfo",
    "KBOverview",
    "KBSummary",
    "Link",
    "Person",
    "PersonList",
    "Proposal",
    "ProposalAccepted",
    "ProposalFile",
    "ProposalList",
    "ProposalPending",
    "ProposalStatus",
    "Rejection",
    "ReviewStatus",
    "RunEnded",
    "RunStarted",
    "SearchHit",
    "SearchResults",
    "VersionCompare",
    "VersionDetail",
    "VersionInfo",
    "VersionPage",
    "WriteOutcome",
    "WriteResult",
]

Access = Literal["admin", "read", "read_write", "read_write_ask"]
"""What a caller may do with a KB: `admin`, or the agent's link permission."""

ProposalStatus = Literal["pending", "applying", "approved", "rejected"]
Change = Literal["added", "modified", "deleted"]


def _unset(value: object) -> bool:
    return value is None


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class ErrorInfo(_Out):
    """An error as the edges render it: `{code, message, ...details}`."""

    model_config = ConfigDict(frozen=True, extra="allow")
    code: str
    message: str


# -- KBs -------------------------------------------------------------------------------------------
class KBSummary(_Out):
    slug: str
    description: str
    head: str | None
    permission: Access


class KBInfo(_Out):
    slug: str
    description: str
    head: str | None
    file_count: int
    indexed_version: str | None
    permission: Access
    limits: Limits


class KBOverview(_Out):
    """One KB of the admin's KB list: its head and the head's time and writer, and what awaits review."""

    slug: str
    description: str
    head: str | None
    time: str | None  # of the head
    last_writer: str | None  # the head's author
    file_count: int
    pending: int  # pending proposals
    unreviewed: int  # agent writes and approvals after the "reviewed up to" marker (at most 500)
    unreviewed_more: bool  # there are more than `unreviewed`


class ImportResult(_Out):
    """What an import did: `version` is the new version, or the unchanged head when nothing changed."""

    slug: str
    version: str | None
    files: int  # files added or changed
    skipped: list[str]
    deleted: int = 0  # files removed from the KB (only with delete=True)
    unchanged: int = 0  # files the KB already held with the same bytes

    @property
    def changed(self) -> bool:
        return bool(self.files or self.deleted)


# -- files -----------------------------------------------------------------------------------------
class FileList(_Out):
    version: str | None
    files: list[FileEntry]


class FileContent(_Out):
    path: str
    content: str
    sha256: str
    version: str | None


class ExportResult(_Out):
    slug: str
    version: str | None
    files: int
    folder: str


# -- versions --------------------------------------------------------------------------------------
class VersionPage(_Out):
    versions: list[VersionInfo]
    next_cursor: str | None


class DiffEntry(_Out):
    path: str
    change: Change
    patch: str


class VersionDetail(VersionInfo):
    model_config = ConfigDict(frozen=True)
    diff: list[DiffEntry]


class VersionCompare(_Out):
    """What changed from one version to another (`from` is a Python keyword: the field is `from_`)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, serialize_by_alias=True)
    from_: VersionInfo = Field(alias="from")
    to: VersionInfo
    diff: list[DiffEntry]


class FileNow(_Out):
    """A file as it is at the head."""

    content: str
    sha256: str
    version: str | None


class EditConflict(_Out):
    """What a stale edit ran into: the file now (None: deleted), the latest version that changed it,
    and the diff from the file now to the text that was typed."""

    current: FileNow | None
    changed_by: VersionInfo | None
    diff: list[DiffEntry]


class ReviewStatus(_Out):
    reviewed: str | None = Field(description='the "reviewed up to" version, null before the first review')
    unreviewed: list[VersionInfo] = Field(description="agent writes and approvals after it, newest first")
    more: bool = Field(description="true when more unreviewed versions exist than are listed (500)")


# -- search ----------------------------------------------------------------------------------------
class SearchHit(_Out):
    path: str
    score: float
    snippet: str = Field(description="plain text of the file around the best matches")
    highlights: list[tuple[int, int]] = Field(
        description="[start, end) character offsets of the matched words in snippet",
    )


class SearchResults(_Out):
    hits: list[SearchHit]
    total: int
    version: str | None


class IndexStatus(_Out):
    head: str | None
    indexed_version: str | None
    covered: bool | None = Field(
        default=None, exclude_if=_unset, description="whether the index covers wait_for (only with it)"
    )
    index_error: str | None = Field(
        default=None, exclude_if=_unset, description="why the index cannot be used now (it is being rebuilt)"
    )


# -- proposals -------------------------------------------------------------------------------------
class ProposalPending(_Out):
    id: str
    status: Literal["pending"]


class ProposalAccepted(_Out):
    """The answer to a `read_write_ask` agent's write (HTTP 202)."""

    proposal: ProposalPending


WriteOutcome = WriteResult | ProposalAccepted
"""A write made a version, or is a pending proposal."""


class ProposalFile(_Out):
    path: str
    mode: str


class Proposal(_Out):
    """A proposal; a pending one shown with its diff also carries `diff` and `conflict`."""

    id: str
    agent: str
    created: str
    status: ProposalStatus
    files: list[ProposalFile]
    message: str | None
    run: str | None
    base: str | None
    reason: str | None
    decided_by: str | None
    decided: str | None
    version: str | None
    diff: list[DiffEntry] | None = Field(
        default=None, description="what approving now would change (pending proposals only)"
    )
    conflict: ErrorInfo | None = Field(
        default=None, description="why approving now would be refused (with diff; null when it would apply)"
    )

    # No return annotation on purpose: pydantic would publish it as the answer's schema (`{}` for Any)
    # instead of this model's fields.
    @model_serializer(mode="wrap")
    def _without_diff(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        out = handler(self)
        if self.diff is None and isinstance(out, dict):  # decided: no diff, and so no conflict either
            out.pop("diff", None)
            out.pop("conflict", None)
        return out


class ProposalList(_Out):
    proposals: list[Proposal]


class Approval(_Out):
    version: str
    status: Literal["approved"]
    id: str


class Rejection(_Out):
    status: Literal["rejected"]
    id: str


# -- runs ------------------------------------------------------------------------------------------
class RunStarted(_Out):
    """A run as HTTP shows it (`POST /runs`, `GET /runs/{id}`); MCP's start_run names `id` `run`."""

    id: str = Field(description="the run's handle: pass it as `run_id` (HTTP writes) or `run` (MCP)")
    mounts: dict[str, str] = Field(description="slug -> the version pinned for this run")
    interactive: bool
    expires_at: str = Field(description="when the run ends (RFC 3339 UTC); later calls naming it fail")


class RunEnded(_Out):
    """A run ended by `POST /runs/{id}/end`: reads and writes naming it are `not_found` from now on."""

    id: str
    ended_at: str = Field(description="when it was ended (RFC 3339 UTC); ending it again keeps this time")


# -- agents ----------------------------------------------------------------------------------------
class Link(_Out):
    kb: str
    permission: Permission


class Agent(_Out):
    name: str
    parent: str | None
    tools: list[str]
    auto_record: bool
    links: list[Link]


class AgentList(_Out):
    agents: list[Agent]


class AgentDeleted(_Out):
    name: str
    deleted: bool


class Person(_Out):
    """A person as `kbserver person list --json` shows one (never a hash)."""

    name: str
    email: str
    role: Role
    kbs: list[str]  # the KBs a reviewer decides on
    password: bool  # whether a password is set (sign-in with email and password)
    token: bool  # whether a personal token is set
    created: str


class PersonList(_Out):
    people: list[Person]
