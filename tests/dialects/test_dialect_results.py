"""The dialects' results are their TypedDicts exactly, and the published outputSchemas are those types."""

from __future__ import annotations

import types
import typing
from typing import Any

import anyio
from pydantic import TypeAdapter
from typing_extensions import is_typeddict

from kbserver.dialects import auto, memory, memory_tool, results, semantic, typed
from kbserver.dialects.memory_records import Memory
from kbserver.dialects.session import DialectCall
from kbserver.dialects.typed_records import Day, Record
from kbserver.mcp import dialect_schemas
from kbserver.services import Services
from kbserver.services.access.auth import caller_for
from kbserver.services.session import start_run
from tests.helpers import make_agent

ALL_SETS = ["memory", "semantic", "typed", "auto", "memory_tool"]


def _conforms(value: object, hint: Any, where: str) -> None:
    """`value` has exactly the shape of `hint`: a TypedDict's required keys, no key it does not name,
    and every value (nested lists and TypedDicts included) of its declared type."""
    origin = typing.get_origin(hint)
    if origin in (typing.Annotated, typing.NotRequired, typing.Required):
        _conforms(value, typing.get_args(hint)[0], where)
    elif is_typeddict(hint):
        assert isinstance(value, dict), where
        fields = typing.get_type_hints(hint, include_extras=True)
        assert hint.__required_keys__ <= set(value), (where, hint.__required_keys__ - set(value))
        assert set(value) <= set(fields), (where, set(value) - set(fields))
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
        (base,) = output.__orig_bases__
        assert is_typeddict(base) and getattr(results, base.__name__) is base, output
        assert output.__annotations__ == base.__annotations__, output
        schema = TypeAdapter(output).json_schema()
        assert set(schema["properties"]) == set(base.__annotations__) | {"error"}, output
        assert {"required": ["error"]} in schema["anyOf"], output


def test_the_typed_results_name_every_field_the_records_give() -> None:
    """get_memory and recall_raw answer the records' own fields: the result types must name them all."""
    assert set(Record.model_fields) <= set(results.RecordResult.__annotations__)
    assert set(Day.model_fields) <= set(results.RecordResult.__annotations__)
    assert list(Day.model_fields) == list(results.DayResult.__annotations__)
    item = set(results.MemoryItem.__annotations__) - {"score"}
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
    check(memory.memory_update(call, added["id"], "Alice drinks black tea"), results.UpdateResult)
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
    check(semantic.update_memory_importance(call, stored["id"], 0.9), results.ImportanceResult)
    check(semantic.update_memory_importance(call, stored["id"], 0.9), results.ImportanceResult)  # no change
    check(semantic.search_memories_by_semantics(call, "club", include_superseded=True), results.RankedResult)
    check(semantic.recall_related(call, "club"), results.RankedResult)
    check(semantic.list_due_memories(call, before="2099-01-01T00:00:00Z"), results.DueResult)
    saved = check(
        typed.save_memory(call, "self", "Works at Acme", category="work", key="employer"), results.SaveResult
    )
    check(typed.save_memory(call, "topic", "Green tea", name="Tea"), results.SaveResult)
    check(typed.query_index(call, "tea"), results.QueryResult)
    check(typed.get_memory(call, "self", saved["id"]), results.RecordResult)
    check(typed.archive_day(call, "2026-11-28", summary="tea day", facts=["tea"]), results.ArchiveResult)
    check(typed.get_memory(call, "source", "2026-11-28"), results.RecordResult)
    check(typed.get_memory(call, "source", "README.md"), results.RecordResult)
    check(typed.recall_raw(call, "tea"), results.RecallResult)
    check(typed.forget_memory(call, "topic", "tea", "done"), results.SaveResult)
    check(memory.memory_delete(call, added["id"]), results.DeleteResult)
    for value, hint in got:
        _conforms(value, hint, hint.__name__)
    due = semantic.list_due_memories(call, before="2099-01-01T00:00:00Z")["memories"]
    assert due and due[0]["recurrence"] == "FREQ=DAILY"  # the NotRequired keys were met too
    ranked = semantic.search_memories_by_semantics(call, "club", include_superseded=True)["memories"]
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
        assert value["proposal"]["status"] == "pending", hint  # type: ignore[index]
