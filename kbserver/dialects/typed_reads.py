"""The reads of the `typed` dialect: query_index finds records, get_memory reads one whole record
or a source that a record's source_refs point to."""

from __future__ import annotations

from collections.abc import Sequence

from kbserver.core.errors import InvalidRequest, NotFound
from kbserver.core.paths import check_path
from kbserver.dialects.results import (
    IndexEntry,
    QueryResult,
    RecordResult,
)
from kbserver.dialects.session import DialectCall
from kbserver.dialects.typed_archive import _day
from kbserver.dialects.typed_base import MAX_LIMIT, _read_record, _records, _type
from kbserver.dialects.typed_records import (
    RECORD_TYPES,
    Record,
    check_date,
    one_line,
    query_words,
    score,
)

__all__ = ["get_memory", "query_index"]


def _fields(record: Record) -> RecordResult:
    # The record's fields are RecordResult's (tests/dialects/test_dialect_results.py checks it).
    return RecordResult.model_validate(record.model_dump(exclude_none=True))


def query_index(
    call: DialectCall,
    query: str,
    types: Sequence[str] | None = None,
    limit: int = 20,
    *,
    kb: str | None = None,
) -> QueryResult:
    """Entries `{type, id, label, summary}` whose words match `query`, best first."""
    kinds = [_type(t) for t in types] if types else list(RECORD_TYPES)
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"limit must be between 1 and {MAX_LIMIT}", limit=limit)
    words = query_words(query) if isinstance(query, str) else []
    if not words:
        raise InvalidRequest("query must hold at least one word to look for", query=query)
    slug = call.kb_to_read(kb)
    scored = []
    for r in _records(call, slug, kinds):
        extra = [r.name or "", r.category or "", r.key or "", r.saved_reason or ""]
        value = score(words, r.summary, *extra, boost=[r.label])
        if value > 0:
            scored.append((value, r))
    scored.sort(key=lambda item: (-item[0], item[1].type, item[1].id))
    entries = [
        IndexEntry(type=r.type, id=r.id, label=r.label, summary=one_line(r.summary))
        for _, r in scored[:limit]
    ]
    return QueryResult(entries=entries)


def get_memory(call: DialectCall, type: str, id: str, *, kb: str | None = None) -> RecordResult:
    """The whole record; for type `source`, the archived day (id = its date) or the KB file (its path)."""
    kind = _type(type, (*RECORD_TYPES, "source"))
    slug = call.kb_to_read(kb)
    if not isinstance(id, str) or not id:
        raise NotFound("pass the id of a memory (query_index lists them)", type=kind, id=id)
    if kind == "source":
        return _source(call, slug, id)
    found = _read_record(call, slug, kind, id)
    if found is None:
        raise NotFound(f"no {kind} memory with id {id}; query_index lists the ids", type=kind, id=id)
    return _fields(found[0])


def _source(call: DialectCall, slug: str, id: str) -> RecordResult:
    try:
        date = check_date(id, "id")
    except InvalidRequest:
        date = None
    if date is not None:
        day = _day(call, slug, date)
        if day is None:
            raise NotFound(f"no archived day {date}; archive_day writes one", type="source", id=id)
        d = day[0]
        return RecordResult(
            type="source",
            id=id,
            kind="conversation",
            date=d.date,
            summary=d.summary,
            diary=d.diary,
            facts=list(d.facts),
        )
    try:
        current = call.read(slug, check_path(id))
    except InvalidRequest:
        current = None
    if current is None:
        raise NotFound(
            f"no source {id}: neither an archived day nor a file of KB {slug}", type="source", id=id
        )
    return RecordResult(
        type="source", id=id, kind="file", path=id, content=current.content, sha256=current.sha256
    )
