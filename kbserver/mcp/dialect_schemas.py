"""Output schemas of the dialect tools (published as `outputSchema`, each also admitting the error)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from kbserver.mcp.schemas import ProposalInfo, _or_error, _Output

__all__ = [
    "AddOutput",
    "ArchiveOutput",
    "DeleteOutput",
    "DueOutput",
    "ImportanceOutput",
    "MemoryFileOutput",
    "MemorySearchOutput",
    "MemoryToolOutput",
    "QueryOutput",
    "RankedOutput",
    "RecallOutput",
    "RecordOutput",
    "SaveOutput",
    "StoreOutput",
    "TaskOutput",
    "UpdateOutput",
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


# -- the memory and semantic sets: the contract's fields; more may come (e.g. `unembedded`) --------
_TASK = "the version that holds the change (null for a proposal, or when nothing changed)"


class _Open(_Output):
    model_config = ConfigDict(extra="allow", json_schema_extra=_or_error)


class _Item(BaseModel):
    model_config = ConfigDict(extra="allow")


class Similar(_Item):
    id: str
    content: str
    score: float


class AddOutput(_Open):
    id: str
    taskId: str | None = Field(description=_TASK)
    similar: list[Similar] = Field(description="existing memories that say much the same")
    proposal: ProposalInfo | None = None


class UpdateOutput(_Open):
    id: str
    taskId: str | None = Field(description=_TASK)
    proposal: ProposalInfo | None = None


class DeleteOutput(UpdateOutput):
    deleted: bool = Field(description="false while the deletion awaits an admin's approval")


class MemoryItem(_Item):
    id: str
    content: str
    category: str | None = None
    tags: list[str] | None = None
    agentId: str | None = None
    sessionId: str | None = None
    metadata: dict[str, object] | None = None
    createdAt: str | None = None
    updatedAt: str | None = None
    score: float | None = None


class MemorySearchOutput(_Open):
    memories: list[MemoryItem]
    total: int


class TaskOutput(_Open):
    taskId: str
    status: str = Field(description="done (search covers the change) or pending (the wait ran out)")


class StoreOutput(_Open):
    id: str
    taskId: str | None = Field(description=_TASK)
    superseded: list[str] = Field(description="ids of the memories this one superseded")
    proposal: ProposalInfo | None = None


class RankedItem(_Item):
    id: str
    content: str
    memory_type: str
    user_id: str
    importance: float
    access_count: int
    score: float


class RankedOutput(_Open):
    memories: list[RankedItem] = Field(description="best score first")


class ImportanceOutput(_Open):
    id: str
    importance: float
    taskId: str | None = Field(description=_TASK)
    proposal: ProposalInfo | None = None


class DueItem(_Item):
    id: str
    content: str
    due: str


class DueOutput(_Open):
    memories: list[DueItem] = Field(description="soonest first")
