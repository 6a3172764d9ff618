"""Output schemas of the dialect tools (published as `outputSchema`, each also admitting the error)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from kbserver.mcp.schemas import ProposalInfo, _or_error, _Output

__all__ = [
    "ArchiveOutput",
    "MemoryFileOutput",
    "MemoryToolOutput",
    "QueryOutput",
    "RecallOutput",
    "RecordOutput",
    "SaveOutput",
]

_VERSION = "the new version (null when the change awaits an admin's approval: see proposal)"


class MemoryFileOutput(_Output):
    kb: str
    path: str = Field(description="memory/{agent}/MEMORY.md")
    version: str | None = Field(description=_VERSION)
    bytes: int = Field(description="the file's size after the change")
    bytes_left: int = Field(description="bytes left under the 2000-byte cap")
    proposal: ProposalInfo | None = None


class MemoryToolOutput(_Output):
    kb: str
    result: str = Field(description="the memory tool's answer (the same text as the content)")
    version: str | None = Field(default=None, description=_VERSION)
    proposal: ProposalInfo | None = None


class SaveOutput(_Output):
    type: str
    id: str
    status: str = Field(description="created, updated or forgotten")
    taskId: str | None = Field(description="the version that holds the change (null for a proposal)")
    proposal: ProposalInfo | None = None


class ArchiveOutput(_Output):
    date: str
    status: str = Field(description="created or merged")
    taskId: str | None = Field(description="the version that holds the change (null for a proposal)")
    proposal: ProposalInfo | None = None


class IndexEntry(BaseModel):
    type: str
    id: str
    label: str
    summary: str


class QueryOutput(_Output):
    entries: list[IndexEntry]


class RecordOutput(BaseModel):
    """Every field of the record (or of the source); the fields depend on the type."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_or_error)
    type: str
    id: str


class DayOutput(BaseModel):
    date: str
    summary: str
    diary: str
    facts: list[str]


class RecallOutput(_Output):
    days: list[DayOutput]
