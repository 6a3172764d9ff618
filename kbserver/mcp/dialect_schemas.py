"""Output schemas of the dialect tools: the dialects' result types (kbserver.dialects.results), each
published as `outputSchema` with the error admitted as an alternative result (kbserver.mcp.schemas)."""

# No `from __future__ import annotations`: pydantic reads these classes to publish the schemas.

from pydantic import ConfigDict, with_config

from kbserver.dialects import results
from kbserver.mcp.schemas import _or_error

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

# The fields are the dialect's; a published type only adds `{"error": {...}}` as the other answer.
PUBLISHED = ConfigDict(json_schema_extra=_or_error)


@with_config(PUBLISHED)
class MemoryFileOutput(results.MemoryFileResult):
    pass


@with_config(PUBLISHED)
class MemoryToolOutput(results.MemoryToolResult):
    pass


@with_config(PUBLISHED)
class SaveOutput(results.SaveResult):
    pass


@with_config(PUBLISHED)
class ArchiveOutput(results.ArchiveResult):
    pass


@with_config(PUBLISHED)
class QueryOutput(results.QueryResult):
    pass


@with_config(PUBLISHED)
class RecordOutput(results.RecordResult):
    pass


@with_config(PUBLISHED)
class RecallOutput(results.RecallResult):
    pass


@with_config(PUBLISHED)
class AddOutput(results.AddResult):
    pass


@with_config(PUBLISHED)
class UpdateOutput(results.UpdateResult):
    pass


@with_config(PUBLISHED)
class DeleteOutput(results.DeleteResult):
    pass


@with_config(PUBLISHED)
class MemorySearchOutput(results.MemorySearchResult):
    pass


@with_config(PUBLISHED)
class TaskOutput(results.TaskResult):
    pass


@with_config(PUBLISHED)
class StoreOutput(results.StoreResult):
    pass


@with_config(PUBLISHED)
class RankedOutput(results.RankedResult):
    pass


@with_config(PUBLISHED)
class ImportanceOutput(results.ImportanceResult):
    pass


@with_config(PUBLISHED)
class DueOutput(results.DueResult):
    pass
