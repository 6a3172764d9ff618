"""What the dialect tools answer: one TypedDict per result, the only definition of its fields.

The dialects build these (plain dicts at run time, so a result's keys and their order are exactly what
the tool sends); the MCP edge publishes them as the tools' `outputSchema` (kbserver.mcp.dialect_schemas)
and checks every result against them. A key marked NotRequired is sent only when it applies.
"""

# No `from __future__ import annotations`: pydantic reads these annotations to publish the schemas.
# typing_extensions.TypedDict, not typing's: pydantic refuses the latter below Python 3.12.

from typing import Annotated, Any, NotRequired, Required

from pydantic import Field
from typing_extensions import TypedDict

__all__ = [
    "AddResult",
    "ArchiveResult",
    "DayResult",
    "DeleteResult",
    "DueItem",
    "DueResult",
    "ImportanceResult",
    "IndexEntry",
    "MemoryFileResult",
    "MemoryItem",
    "MemorySearchResult",
    "MemoryToolResult",
    "Proposal",
    "QueryResult",
    "RankedItem",
    "RankedResult",
    "RecallResult",
    "RecordResult",
    "SaveResult",
    "Similar",
    "StoreResult",
    "TaskFields",
    "TaskResult",
    "UpdateResult",
    "VersionFields",
]

_VERSION = "the new version (null when the change awaits an admin's approval: see proposal)"
_TASK = "the version that holds the change (null for a proposal, or when nothing changed)"
_UNEMBEDDED = "memories whose meaning is not indexed yet (found by their words meanwhile); absent when none"

Version = Annotated[str | None, Field(description=_VERSION)]
TaskId = Annotated[str | None, Field(description=_TASK)]


class Proposal(TypedDict):
    """A change that awaits an admin's approval (a `read_write_ask` agent's write)."""

    id: str
    status: str


class VersionFields(TypedDict):
    """`{version}`, or `{version: null, proposal}` for a pending proposal."""

    version: Version
    proposal: NotRequired[Proposal]


class TaskFields(TypedDict):
    """`{taskId}` (the version), plus `proposal` when the change awaits an admin's approval."""

    taskId: TaskId
    proposal: NotRequired[Proposal]


# -- auto and memory_tool ----------------------------------------------------------------------------
class MemoryFileResult(TypedDict):
    """add_memory and edit_memory."""

    kb: str
    path: Annotated[str, Field(description="memory/{agent}/MEMORY.md")]
    version: Version
    proposal: NotRequired[Proposal]
    bytes: Annotated[int, Field(description="the file's size after the change")]
    bytes_left: Annotated[int, Field(description="bytes left under the 2000-byte cap")]


class MemoryToolResult(TypedDict):
    """memory: the memory tool's text, and for a command that changes files its version."""

    kb: str
    result: Annotated[str, Field(description="the memory tool's answer (the same text as the content)")]
    version: NotRequired[Version]
    proposal: NotRequired[Proposal]


# -- typed --------------------------------------------------------------------------------------------
class SaveResult(TypedDict):
    """save_memory and forget_memory."""

    type: str
    id: str
    status: Annotated[str, Field(description="created, updated or forgotten")]
    taskId: Annotated[
        str | None, Field(description="the version that holds the change (null for a proposal)")
    ]
    proposal: NotRequired[Proposal]


class ArchiveResult(TypedDict):
    """archive_day."""

    date: str
    status: Annotated[str, Field(description="created or merged")]
    taskId: Annotated[
        str | None, Field(description="the version that holds the change (null for a proposal)")
    ]
    proposal: NotRequired[Proposal]


class IndexEntry(TypedDict):
    type: str
    id: str
    label: str
    summary: str


class QueryResult(TypedDict):
    """query_index."""

    entries: Annotated[list[IndexEntry], Field(description="best match first")]


class RecordResult(TypedDict, total=False):
    """get_memory: every field of the record (or of the source) that is set; they depend on the type."""

    type: Required[str]
    id: Required[str]
    summary: str
    title: str
    name: str
    category: str
    key: str
    saved_kind: str
    saved_reason: str
    source_refs: list[dict[str, str]]
    created: str
    updated: str
    # type `source`: an archived day (kind conversation) or a KB file (kind file)
    kind: Annotated[str, Field(description="source: conversation (an archived day) or file (a KB file)")]
    date: str
    diary: str
    facts: list[str]
    path: str
    content: str
    sha256: str


class DayResult(TypedDict):
    date: str
    summary: str
    diary: str
    facts: list[str]


class RecallResult(TypedDict):
    """recall_raw."""

    days: Annotated[list[DayResult], Field(description="best match first, or newest first for a range")]


# -- memory -------------------------------------------------------------------------------------------
class Similar(TypedDict):
    id: str
    content: str
    score: float


class AddResult(TypedDict):
    """memory_add."""

    id: str
    taskId: TaskId
    proposal: NotRequired[Proposal]
    similar: Annotated[list[Similar], Field(description="existing memories that say much the same")]


class UpdateResult(TypedDict):
    """memory_update."""

    id: str
    taskId: TaskId
    proposal: NotRequired[Proposal]


class DeleteResult(TypedDict):
    """memory_delete."""

    id: str
    deleted: Annotated[bool, Field(description="false while the deletion awaits an admin's approval")]
    taskId: TaskId
    proposal: NotRequired[Proposal]


class MemoryItem(TypedDict):
    id: str
    content: str
    category: str | None
    tags: list[str]
    agentId: str | None
    sessionId: str | None
    metadata: Annotated[dict[str, Any], Field(description="the JSON object given, plus history")]
    createdAt: str
    updatedAt: str
    score: NotRequired[float]


class MemorySearchResult(TypedDict):
    """memory_search."""

    memories: list[MemoryItem]
    total: int
    unembedded: NotRequired[Annotated[int, Field(description=_UNEMBEDDED)]]


class TaskResult(TypedDict):
    """memory_task_wait."""

    taskId: str
    status: Annotated[str, Field(description="done (search covers the change) or pending (the wait ran out)")]


# -- semantic -----------------------------------------------------------------------------------------
class StoreResult(TypedDict):
    """store_memory."""

    id: str
    taskId: TaskId
    superseded: Annotated[list[str], Field(description="ids of the memories this one superseded")]
    proposal: NotRequired[Proposal]


class ImportanceResult(TypedDict):
    """update_memory_importance."""

    id: str
    importance: float
    taskId: TaskId
    proposal: NotRequired[Proposal]


class RankedItem(TypedDict):
    id: str
    content: str
    memory_type: str | None
    user_id: str | None
    importance: float
    access_count: int
    score: float
    superseded_by: NotRequired[
        Annotated[str | None, Field(description="with include_superseded: the id of the newer memory")]
    ]


class RankedResult(TypedDict):
    """search_memories_by_semantics and recall_related."""

    memories: Annotated[list[RankedItem], Field(description="best score first")]
    unembedded: NotRequired[Annotated[int, Field(description=_UNEMBEDDED)]]


class DueItem(TypedDict):
    id: str
    content: str
    due: str
    user_id: str | None
    memory_type: str | None
    overdue: bool
    recurrence: NotRequired[str]


class DueResult(TypedDict):
    """list_due_memories."""

    memories: Annotated[list[DueItem], Field(description="soonest first")]
