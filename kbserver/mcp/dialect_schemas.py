"""Output schemas of the dialect tools: the dialects' result types (kbserver.dialects.results), each
published as `outputSchema` with the error admitted as an alternative result (kbserver.mcp.schemas)."""

# No `from __future__ import annotations`: pydantic reads these classes to publish the schemas.

from pydantic import ConfigDict

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


class MemoryFileOutput(results.MemoryFileResult):
    model_config = PUBLISHED


class MemoryToolOutput(results.MemoryToolResult):
    model_config = PUBLISHED


class SaveOutput(results.SaveResult):
    model_config = PUBLISHED


class ArchiveOutput(results.ArchiveResult):
    model_config = PUBLISHED


class QueryOutput(results.QueryResult):
    model_config = PUBLISHED


class RecordOutput(results.RecordResult):
    model_config = PUBLISHED


class RecallOutput(results.RecallResult):
    model_config = PUBLISHED


class AddOutput(results.AddResult):
    model_config = PUBLISHED


class UpdateOutput(results.UpdateResult):
    model_config = PUBLISHED


class DeleteOutput(results.DeleteResult):
    model_config = PUBLISHED


class MemorySearchOutput(results.MemorySearchResult):
    model_config = PUBLISHED


class TaskOutput(results.TaskResult):
    model_config = PUBLISHED


class StoreOutput(results.StoreResult):
    model_config = PUBLISHED


class RankedOutput(results.RankedResult):
    model_config = PUBLISHED


class ImportanceOutput(results.ImportanceResult):
    model_config = PUBLISHED


class DueOutput(results.DueResult):
    model_config = PUBLISHED
