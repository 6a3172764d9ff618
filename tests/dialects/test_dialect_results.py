"""The dialects' results are their models exactly (as sent); the published outputSchemas are those types."""

from __future__ import annotations

import types
import typing
from typing import Any

import anyio
from pydantic import BaseModel, TypeAdapter

from kbserver.dialects import auto, memory, memory_tool, results, semantic, typed
from kbserver.dialects.memory_records import Memory
from kbserver.dialects.session import DialectCall
from kbserver.dialects.typed_records import Day, Record
from kbserver.mcp import dialect_schemas
from kbserver.mcp.errors import ok_result
from kbserver.services import Services
from kbserver.services.access.auth import caller_for
from kbserver.services.session import start_run
from tests.helpers import make_agent

ALL_SETS = ["memory", "semantic", "typed", "auto", "memory_tool"]


def _sent(value: BaseModel) -> dict[str, Any]:
    """What the tool sends for `value`: the structured content of its result."""
    data = ok_result(value).structured_content
    assert isinstance(data, dict)
    return data


def _conforms(value: object, hint: Any, where: str) -> None:
    """`value` (as sent) has exactly the shape of `hint`: a result model's required keys, no key it does
    not name, no null where the key is only absent (`Absent`), and every value (nested lists and models
    included) of its declared type."""
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        if any(isinstance(m, results._NoneIsAbsent) for m in hint.__metadata__):
            assert value is not None, where
        _conforms(value, typing.get_args(hint)[0], where)
    elif isinstance(hint, type) and issubclass(hint, results.Result):
        if isinstance(value, BaseModel):
            assert type(value) is hint, (where, type(value))
            value = _sent(value)
        assert isinstance(value, dict), where
        fields = typing.get_type_hints(hint, include_extras=True)
        required = {name for name, f in hint.model_fields.items() if f.is_required()}
        assert required <= set(value), (where, required - set(value))
        assert set(value) <= set(hint.model_fields), (where, set(value) - set(hint.model_fields))
        for key, item in value.items():
            _conforms(item, fields[key], f"{where}.{key}")
    elif origin in (typing.Union, types.UnionType):
        errors = []
        for option in typing.get_args(hint):
            try:
                _conforms(value, option, where)
                return
            except AssertionError as err:
                errors.append(err)
        raise AssertionError(where, value, errors)
    elif origin is list:
        assert isinstance(value, list), where
        for i, item in enumerate(value):
            _conforms(item, typing.get_args(hint)[0], f"{where}[{i}]")
    elif origin is dict:
        assert isinstance(value, dict), where
    elif hint is type(None) or hint is None:
        assert value is None, where
    elif hint is float:
        assert isinstance(value, int | float) and not isinstance(value, bool), where
    elif hint is Any:
        pass
    else:
        assert isinstance(value, hint), (where, value, hint)


def test_every_published_dialect_schema_is_a_dialect_result_type() -> None:
    """One source of truth: a published type adds no field to the dialect's, only the error answer."""
    published = [getattr(dialect_schemas, name) for name in dialect_schemas.__all__]
    assert len(published) == 16
    for output in published:
        (base,) = output.__bases__
        assert issubclass(base, results.Result) and getattr(results, base.__name__) is base, output
        assert {n: f.annotation for n, f in output.model_fields.items()} == {
            n: f.annotation for n, f in base.model_fields.items()
        }, output
        schema = TypeAdapter(output).json_schema()
        assert set(schema["properties"]) == set(base.model_fields) | {"error"}, output
        assert {"required": ["error"]} in schema["anyOf"], output


# The keys each published type requires, and those it sends only when they apply (pinned before the
# results became pydantic models: the conversion must not move a key between the two).
KEYS: dict[str, tuple[set[str], set[str]]] = {
    "AddOutput": ({"id", "taskId", "similar"}, {"proposal"}),
    "ArchiveOutput": ({"date", "status", "taskId"}, {"proposal"}),
    "DeleteOutput": ({"id", "deleted", "taskId"}, {"proposal"}),
    "DueOutput": ({"memories"}, set()),
    "ImportanceOutput": ({"id", "importance", "taskId"}, {"proposal"}),
    "MemoryFileOutput": ({"kb", "path", "version", "bytes", "bytes_left"}, {"proposal"}),
    "MemorySearchOutput": ({"memories", "total"}, {"unembedded"}),
    "MemoryToolOutput": ({"kb", "result"}, {"version", "proposal"}),
    "QueryOutput": ({"entries"}, set()),
    "RankedOutput": ({"memories"}, {"unembedded"}),
    "RecallOutput": ({"days"}, set()),
    "RecordOutput": (
        {"type", "id"},
        {
            "summary",
            "title",
            "name",
            "category",
            "key",
            "saved_kind",
            "saved_reason",
            "source_refs",
            "created",
        }
        | {"updated", "kind", "date", "diary", "facts", "path", "content", "sha256"},
    ),
    "SaveOutput": ({"type", "id", "status", "taskId"}, {"proposal"}),
    "StoreOutput": ({"id", "taskId", "superseded"}, {"proposal"}),
    "TaskOutput": ({"taskId", "status"}, set()),
    "UpdateOutput": ({"id", "taskId"}, {"proposal"}),
    "DayResult": ({"date", "summary", "diary", "facts"}, set()),
    "DueItem": ({"id", "content", "due", "user_id", "memory_type", "overdue"}, {"recurrence"}),
    "IndexEntry": ({"type", "id", "label", "summary"}, set()),
    "MemoryItem": (
        {"id", "content", "category", "tags", "agentId", "sessionId", "metadata", "createdAt", "updatedAt"},
        {"score"},
    ),
    "Proposal": ({"id", "status"}, set()),
    "RankedItem": (
        {"id", "content", "memory_type", "user_id", "importance", "access_count", "score"},
        {"superseded_by"},
    ),
    "Similar": ({"id", "content", "score"}, set()),
}


def test_the_published_output_schemas_require_and_admit_the_pinned_keys() -> None:
    """Each published type (and each type it nests) requires exactly its pinned keys and admits the
    pinned optional ones without requiring them; an optional key is never published with a default."""
    seen: dict[str, tuple[set[str], set[str]]] = {}
    for output in (getattr(dialect_schemas, name) for name in dialect_schemas.__all__):
        schema = TypeAdapter(output).json_schema()
        assert "required" not in schema, output  # the result's keys are the first alternative to the error
        required = set(schema["anyOf"][0]["required"])
        seen[output.__name__] = (required, set(schema["properties"]) - required - {"error"})
        for name, nested in schema.get("$defs", {}).items():
            nested_required = set(nested.get("required", []))
            seen[name] = (nested_required, set(nested["properties"]) - nested_required)
        for part in [schema, *schema.get("$defs", {}).values()]:
            assert not any("default" in p for p in part["properties"].values()), output
    assert seen == KEYS


def test_the_typed_results_name_every_field_the_records_give() -> None:
    """get_memory and recall_raw answer the records' own fields: the result types must name them all."""
    assert set(Record.model_fields) <= set(results.RecordResult.model_fields)
    assert set(Day.model_fields) <= set(results.RecordResult.model_fields)
    assert list(Day.model_fields) == list(results.DayResult.model_fields)
    item = set(results.MemoryItem.model_fields) - {"score"}
    assert item <= set(Memory.model_fields)


def test_every_dialect_result_has_its_declared_shape(services: Services, kb: str) -> None:
    make_agent(services, "alice", {kb: "read_write"}, tools=ALL_SETS)
    call = DialectCall(services, caller_for(services, "alice"))
    got: list[tuple[object, Any]] = []

    def check(value: object, hint: Any) -> Any:
        got.append((value, hint))
        return value

    check(auto.add_memory(call, "likes tea"), results.MemoryFileResult)
    check(auto.edit_memory(call, "tea", "green tea"), results.MemoryFileResult)
    tool = memory_tool.memory(call, "create", path="/memories/a.md", file_text="a\n")
    check(tool.result("create"), results.MemoryToolResult)
    check(memory_tool.memory(call, "view", path="/memories").result("view"), results.MemoryToolResult)
    added = check(memory.memory_add(call, "Alice drinks green tea", tags=["tea"]), results.AddResult)
    check(memory.memory_add(call, "Alice drinks green tea daily"), results.AddResult)
    check(memory.memory_update(call, added.id, "Alice drinks black tea"), results.UpdateResult)
    head = services.repos.repo(kb).head()
    assert head is not None and services.progress.wait_blocking(kb, head, 120)
    check(memory.memory_search(call, "tea"), results.MemorySearchResult)
    check(memory.memory_search(call, ""), results.MemorySearchResult)
    waited = anyio.run(memory.memory_task_wait, call, head, 30)
    check(waited, results.TaskResult)
    stored = check(
        semantic.store_memory(
            call, "Call the club", remind_at="2026-12-01T09:00:00Z", recurrence="FREQ=DAILY"
        ),
        results.StoreResult,
    )
    check(semantic.store_memory(call, "Call the club today"), results.StoreResult)
    check(semantic.update_memory_importance(call, stored.id, 0.9), results.ImportanceResult)
    check(semantic.update_memory_importance(call, stored.id, 0.9), results.ImportanceResult)  # no change
    check(semantic.search_memories_by_semantics(call, "club", include_superseded=True), results.RankedResult)
    check(semantic.recall_related(call, "club"), results.RankedResult)
    check(semantic.list_due_memories(call, before="2099-01-01T00:00:00Z"), results.DueResult)
    saved = check(
        typed.save_memory(call, "self", "Works at Acme", category="work", key="employer"), results.SaveResult
    )
    check(typed.save_memory(call, "topic", "Green tea", name="Tea"), results.SaveResult)
    check(typed.query_index(call, "tea"), results.QueryResult)
    check(typed.get_memory(call, "self", saved.id), results.RecordResult)
    check(typed.archive_day(call, "2026-11-28", summary="tea day", facts=["tea"]), results.ArchiveResult)
    check(typed.get_memory(call, "source", "2026-11-28"), results.RecordResult)
    check(typed.get_memory(call, "source", "README.md"), results.RecordResult)
    check(typed.recall_raw(call, "tea"), results.RecallResult)
    check(typed.forget_memory(call, "topic", "tea", "done"), results.SaveResult)
    check(memory.memory_delete(call, added.id), results.DeleteResult)
    for value, hint in got:
        _conforms(value, hint, hint.__name__)
    due = _sent(semantic.list_due_memories(call, before="2099-01-01T00:00:00Z"))["memories"]
    assert due and due[0]["recurrence"] == "FREQ=DAILY"  # the optional keys were met too
    ranked = _sent(semantic.search_memories_by_semantics(call, "club", include_superseded=True))["memories"]
    assert any("superseded_by" in m for m in ranked)


def test_a_proposal_has_its_declared_shape(services: Services, kb: str) -> None:
    make_agent(services, "asker", {kb: "read_write_ask"}, tools=ALL_SETS)
    asker = caller_for(services, "asker")
    call = DialectCall.of(services, asker, start_run(services, asker))
    pending = [
        (auto.add_memory(call, "x"), results.MemoryFileResult),
        (memory.memory_add(call, "y"), results.AddResult),
        (semantic.store_memory(call, "z"), results.StoreResult),
        (typed.save_memory(call, "topic", "s", name="T"), results.SaveResult),
        (typed.archive_day(call, "2026-11-28", summary="s"), results.ArchiveResult),
        (
            memory_tool.memory(call, "create", path="/memories/p.md", file_text="p").result("create"),
            results.MemoryToolResult,
        ),
    ]
    for value, hint in pending:
        _conforms(value, hint, hint.__name__)
        assert _sent(value)["proposal"]["status"] == "pending", hint
