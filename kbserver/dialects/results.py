"""What the dialect tools answer: one pydantic model per result, the only definition of its fields.

The dialects build these; the MCP edge sends their dump (kbserver.mcp.errors.ok_result), publishes them
as the tools' `outputSchema` (kbserver.mcp.dialect_schemas) and checks every result against them. A key
that is optional is sent only when it applies: when it was given, and for a key that cannot be null
(`Absent[...]`), only when it is not None. The keys are sent in the order the fields are declared.
"""

# No `from __future__ import annotations`: pydantic reads these annotations to publish the schemas.

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer
from pydantic.json_schema import JsonSchemaValue, SkipJsonSchema
from pydantic_core import CoreSchema

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
    "Result",
    "SaveResult",
    "Similar",
    "StoreResult",
    "TaskResult",
    "UpdateResult",
]

T = TypeVar("T")


class _NoneIsAbsent:
    """Marks an optional field that cannot be null: None there means the key is not sent."""


Absent = Annotated[T | SkipJsonSchema[None], _NoneIsAbsent()]


class Result(BaseModel):
    """A dialect result (or a part of one). Its dump holds only the keys that apply (an optional field
    only when given, an `Absent` one only when not None); its schema gives no default for an optional
    field, which is absent rather than null when it does not apply."""

    model_config = ConfigDict(frozen=True)

    @model_serializer(mode="wrap")
    def _only_what_applies(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name, field in type(self).model_fields.items():
            if field.is_required():
                continue
            absent = any(isinstance(m, _NoneIsAbsent) for m in field.metadata) and getattr(self, name) is None
            if name not in self.model_fields_set or absent:
                data.pop(name, None)
        return data

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: Any) -> JsonSchemaValue:
        schema: JsonSchemaValue = handler(core_schema)
        for prop in handler.resolve_ref_schema(schema).get("properties", {}).values():
            prop.pop("default", None)  # an optional key is absent, not null, when it does not apply
        return schema


_VERSION = "the new version (null when the change awaits an admin's approval: see proposal)"
_TASK = "the version that holds the change (null for a proposal, or when nothing changed)"
_UNEMBEDDED = "memories whose meaning is not indexed yet (found by their words meanwhile); absent when none"

Version = Annotated[str | None, Field(description=_VERSION)]
TaskId = Annotated[str | None, Field(description=_TASK)]


class Proposal(Result):
    """A change that awaits an admin's approval (a `read_write_ask` agent's write)."""

    id: str
    status: str


# -- auto and memory_tool ----------------------------------------------------------------------------
class MemoryFileResult(Result):
    """add_memory and edit_memory."""

    kb: str
    path: Annotated[str, Field(description="memory/{agent}/MEMORY.md")]
    version: Version
    proposal: Absent[Proposal] = None
    bytes: Annotated[int, Field(description="the file's size after the change")]
    bytes_left: Annotated[int, Field(description="bytes left under the 2000-byte cap")]


class MemoryToolResult(Result):
    """memory: the memory tool's text, and for a command that changes files its version."""

    kb: str
    result: Annotated[str, Field(description="the memory tool's answer (the same text as the content)")]
    version: Version = None
    proposal: Absent[Proposal] = None


# -- typed --------------------------------------------------------------------------------------------
class SaveResult(Result):
    """save_memory and forget_memory."""

    type: str
    id: str
    status: Annotated[str, Field(description="created, updated or forgotten")]
    taskId: Annotated[
        str | None, Field(description="the version that holds the change (null for a proposal)")
    ]
    proposal: Absent[Proposal] = None


class ArchiveResult(Result):
    """archive_day."""

    date: str
    status: Annotated[str, Field(description="created or merged")]
    taskId: Annotated[
        str | None, Field(description="the version that holds the change (null for a proposal)")
    ]
    proposal: Absent[Proposal] = None


class IndexEntry(Result):
    type: str
    id: str
    label: str
    summary: str


class QueryResult(Result):
    """query_index."""

    entries: Annotated[list[IndexEntry], Field(description="best match first")]


class RecordResult(Result):
    """get_memory: every field of the record (or of the source) that is set; they depend on the type."""

    type: str
    id: str
    # type `source`: an archived day (kind conversation) or a KB file (kind file)
    kind: Absent[str] = Field(
        default=None, description="source: conversation (an archived day) or file (a KB file)"
    )
    date: Absent[str] = None
    summary: Absent[str] = None
    title: Absent[str] = None
    name: Absent[str] = None
    category: Absent[str] = None
    key: Absent[str] = None
    saved_kind: Absent[str] = None
    saved_reason: Absent[str] = None
    source_refs: Absent[list[dict[str, str]]] = None
    created: Absent[str] = None
    updated: Absent[str] = None
    diary: Absent[str] = None
    facts: Absent[list[str]] = None
    path: Absent[str] = None
    content: Absent[str] = None
    sha256: Absent[str] = None


class DayResult(Result):
    date: str
    summary: str
    diary: str
    facts: list[str]


class RecallResult(Result):
    """recall_raw."""

    days: Annotated[list[DayResult], Field(description="best match first, or newest first for a range")]


# -- memory -------------------------------------------------------------------------------------------
class Similar(Result):
    id: str
    content: str
    score: float


class AddResult(Result):
    """memory_add."""

    id: str
    taskId: TaskId
    proposal: Absent[Proposal] = None
    similar: Annotated[list[Similar], Field(description="existing memories that say much the same")]


class UpdateResult(Result):
    """memory_update."""

    id: str
    taskId: TaskId
    proposal: Absent[Proposal] = None


class DeleteResult(Result):
    """memory_delete."""

    id: str
    deleted: Annotated[bool, Field(description="false while the deletion awaits an admin's approval")]
    taskId: TaskId
    proposal: Absent[Proposal] = None


class MemoryItem(Result):
    id: str
    content: str
    category: str | None
    tags: list[str]
    agentId: str | None
    sessionId: str | None
    metadata: Annotated[dict[str, Any], Field(description="the JSON object given, plus history")]
    createdAt: str
    updatedAt: str
    score: Absent[float] = None


class MemorySearchResult(Result):
    """memory_search."""

    memories: list[MemoryItem]
    total: int
    unembedded: Absent[int] = Field(default=None, description=_UNEMBEDDED)


class TaskResult(Result):
    """memory_task_wait."""

    taskId: str
    status: Annotated[str, Field(description="done (search covers the change) or pending (the wait ran out)")]


# -- semantic -----------------------------------------------------------------------------------------
class StoreResult(Result):
    """store_memory."""

    id: str
    taskId: TaskId
    superseded: Annotated[list[str], Field(description="ids of the memories this one superseded")]
    proposal: Absent[Proposal] = None


class ImportanceResult(Result):
    """update_memory_importance."""

    id: str
    importance: float
    taskId: TaskId
    proposal: Absent[Proposal] = None


class RankedItem(Result):
    id: str
    content: str
    memory_type: str | None
    user_id: str | None
    importance: float
    access_count: int
    score: float
    superseded_by: Annotated[
        str | None, Field(description="with include_superseded: the id of the newer memory")
    ] = None


class RankedResult(Result):
    """search_memories_by_semantics and recall_related."""

    memories: Annotated[list[RankedItem], Field(description="best score first")]
    unembedded: Absent[int] = Field(default=None, description=_UNEMBEDDED)


class DueItem(Result):
    id: str
    content: str
    due: str
    user_id: str | None
    memory_type: str | None
    overdue: bool
    recurrence: Absent[str] = None


class DueResult(Result):
    """list_due_memories."""

    memories: Annotated[list[DueItem], Field(description="soonest first")]
