"""The `typed` tool set: typed records (self, relationship, topic, saved), a raw day archive, and the
compiled USER.md and CONTEXT.md, written in the same version as the change that affects them.

- `save_memory` upserts: `self` is matched by category+key, `relationship` and `topic` by name
  (case and spacing ignored), and a match is updated in place, keeping its id; `saved` always adds.
- Ids are the record's path below its type folder without `.md` (`self/work/employer.md` has the id
  `work/employer`); file names are safe, stable forms of the names (Chinese kept).
- `forget_memory` deletes a record as one version whose message carries the reason; the record stays
  in history, so forgetting can be undone (revert or undo of that version).
- `archive_day` keeps one JSON file per day; a day written twice is merged. `recall_raw` finds days
  by words and/or a date range.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import cast

from kbserver.core.errors import InvalidRequest, NotFound
from kbserver.core.model import Create, Delete, FileChange, Overwrite, utc_iso
from kbserver.core.paths import check_path
from kbserver.dialects.registry import Dialect
from kbserver.dialects.results import (
    ArchiveResult,
    DayResult,
    IndexEntry,
    QueryResult,
    RecallResult,
    RecordResult,
    SaveResult,
)
from kbserver.dialects.session import Current, DialectCall, retry_stale
from kbserver.dialects.typed_records import (
    COMPILED,
    RECORD_TYPES,
    SAVED_KINDS,
    Day,
    Record,
    check_date,
    compile_context,
    compile_user,
    merge_day,
    one_line,
    parse_day,
    parse_record,
    query_words,
    record_ids,
    record_key,
    record_path,
    render_day,
    render_record,
    score,
)

__all__ = [
    "DIALECT",
    "TOOLS",
    "archive_day",
    "forget_memory",
    "get_memory",
    "query_index",
    "recall_raw",
    "save_memory",
]

TOOLS = ("save_memory", "forget_memory", "query_index", "get_memory", "recall_raw", "archive_day")
ARCHIVE = "archive"
MAX_LIMIT = 100
_CACHE_SIZE = 50_000


class _Parsed:
    """Parsed records and days by the sha256 of their file: a file's bytes fix what it holds, so an
    unchanged file is never read or parsed twice (listing a folder gives every file's sha256)."""

    def __init__(self, size: int) -> None:
        self._items: OrderedDict[str, Record | Day] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, sha256: str) -> Record | Day | None:
        with self._lock:
            found = self._items.get(sha256)
            if found is not None:
                self._items.move_to_end(sha256)
            return found

    def put(self, sha256: str, item: Record | Day) -> None:
        with self._lock:
            self._items[sha256] = item
            self._items.move_to_end(sha256)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


_parsed = _Parsed(_CACHE_SIZE)
_FIELDS_OF = {
    "self": {"category", "key"},
    "relationship": {"name"},
    "topic": {"name"},
    "saved": {"saved_kind", "saved_reason"},
}


def _type(value: object, allowed: Sequence[str] = RECORD_TYPES) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise InvalidRequest(f"type must be one of {', '.join(allowed)}", type=value)
    return value


def _text(value: str | None, field: str) -> str | None:
    if value is None:
        return None
    text = one_line(value)
    if not text:
        raise InvalidRequest(f"{field} must not be empty", field=field)
    return text


def _source_refs(refs: Sequence[dict[str, str]] | None) -> list[dict[str, str]] | None:
    if refs is None:
        return None
    out = []
    for ref in refs:
        kind = ref.get("kind")
        if kind == "conversation" and set(ref) == {"kind", "date"}:
            out.append({"kind": "conversation", "date": check_date(ref.get("date"))})
        elif kind == "file" and set(ref) == {"kind", "path"}:
            out.append({"kind": "file", "path": check_path(ref["path"])})
        else:
            raise InvalidRequest(
                'each source_refs entry is {"kind": "conversation", "date": "YYYY-MM-DD"} or '
                '{"kind": "file", "path": "..."}',
                source_ref=ref,
            )
    return out


def _read_record(call: DialectCall, slug: str, kind: str, record_id: str) -> tuple[Record, Current] | None:
    try:
        path = record_path(kind, record_id)
    except InvalidRequest:
        return None
    current = call.read(slug, path)
    return None if current is None else _as_record(current, kind, record_id)


def _as_record(current: Current, kind: str, record_id: str) -> tuple[Record, Current] | None:
    """The record `record_id` of `kind` that the file `current` holds, or None."""
    cached = _parsed.get(current.sha256)
    if isinstance(cached, Record):
        record = cached
    else:
        try:
            record = parse_record(current.content)
        except InvalidRequest:
            return None  # a file someone else put there: not a record of this dialect
        _parsed.put(current.sha256, record)
    if record.type != kind or record.id != record_id:
        return None
    return record, current


def _records(call: DialectCall, slug: str, kinds: Sequence[str]) -> list[Record]:
    """Every record of `kinds`; only files not seen before (by sha256) are read and parsed."""
    out = []
    for kind in kinds:
        for path, (_, sha256) in call.entries(slug, kind + "/").items():
            if not path.endswith(".md"):
                continue
            record_id = path[len(kind) + 1 : -3]
            cached = _parsed.get(sha256)
            if isinstance(cached, Record):
                if cached.type == kind and cached.id == record_id:
                    out.append(cached)
                continue
            found = _read_record(call, slug, kind, record_id)
            if found is not None:
                out.append(found[0])
    return out


def _compiled(
    call: DialectCall, slug: str, kinds: set[str], changed: Record | None, removed: tuple[str, str] | None
) -> list[FileChange]:
    """The changes that bring USER.md / CONTEXT.md in step with the records after this change."""
    out: list[FileChange] = []
    for target, compile_ in (("USER.md", compile_user), ("CONTEXT.md", compile_context)):
        feeds = [k for k, f in COMPILED.items() if f == target]
        if not kinds & set(feeds):
            continue
        records = [
            r
            for r in _records(call, slug, feeds)
            if (changed is None or (r.type, r.id) != (changed.type, changed.id)) and (r.type, r.id) != removed
        ]
        if changed is not None and changed.type in feeds:
            records.append(changed)
        text = compile_(records)
        current = call.read(slug, target)
        if current is None:
            out.append(Create(path=target, mode="create", content=text))
        elif current.content != text:
            out.append(Overwrite(path=target, mode="overwrite", content=text, expected_sha256=current.sha256))
    return out


def save_memory(
    call: DialectCall,
    type: str,
    summary: str,
    *,
    title: str | None = None,
    category: str | None = None,
    key: str | None = None,
    name: str | None = None,
    saved_kind: str | None = None,
    saved_reason: str | None = None,
    source_refs: Sequence[dict[str, str]] | None = None,
    kb: str | None = None,
) -> SaveResult:
    """Create or update (same id) a record and recompile what it feeds, in one version."""
    kind = _type(type)
    given = {
        "category": category,
        "key": key,
        "name": name,
        "saved_kind": saved_kind,
        "saved_reason": saved_reason,
    }
    stray = sorted(f for f, v in given.items() if v is not None and f not in _FIELDS_OF[kind])
    if stray:
        raise InvalidRequest(f"{', '.join(stray)} do not apply to type {kind}", fields=stray)
    missing = sorted(f for f in _FIELDS_OF[kind] - {"saved_reason", "saved_kind"} if given[f] is None)
    if missing:
        raise InvalidRequest(f"type {kind} needs {' and '.join(missing)}", fields=missing)
    text = summary.strip() if isinstance(summary, str) else ""
    if not text:
        raise InvalidRequest("summary must not be empty")
    if kind == "saved" and saved_kind is not None and saved_kind not in SAVED_KINDS:
        raise InvalidRequest(f"saved_kind must be one of {', '.join(SAVED_KINDS)}", saved_kind=saved_kind)
    fields = {
        "title": _text(title, "title"),
        "category": _text(category, "category"),
        "key": _text(key, "key"),
        "name": _text(name, "name"),
        "saved_kind": (saved_kind or "text_note") if kind == "saved" else None,
        "saved_reason": _text(saved_reason, "saved_reason"),
    }
    refs = _source_refs(source_refs)
    slug = call.kb(kb)

    def attempt() -> SaveResult:
        now = utc_iso(time.time())
        old: tuple[Record, Current] | None = None
        if kind == "saved":
            record_id = f"{now[:10]}-{secrets.token_hex(3)}"
        else:
            matched, first, second = record_ids(kind, fields["category"], fields["key"], fields["name"])
            record_id = second
            for candidate in (first, second):
                # One read decides both "is it this record" and "is the name free": with two reads,
                # a save of the same name landing in between made a second record (under `second`).
                current = call.read(slug, record_path(kind, candidate))
                found = None if current is None else _as_record(current, kind, candidate)
                if found is not None and record_key(found[0]) == matched:
                    old, record_id = found, candidate
                    break
                if current is None:
                    record_id = candidate
                    break
        previous = old[0] if old else None
        record = Record(
            type=kind,  # type: ignore[arg-type]
            id=record_id,
            summary=text,
            title=fields["title"] if fields["title"] is not None else (previous.title if previous else None),
            category=fields["category"],
            key=fields["key"],
            name=fields["name"],
            saved_kind=fields["saved_kind"],
            saved_reason=fields["saved_reason"],
            source_refs=refs if refs is not None else (previous.source_refs if previous else None),
            created=previous.created if previous else now,
            updated=now,
        )
        path = record_path(kind, record_id)
        content = render_record(record)
        change: FileChange = (
            Overwrite(path=path, mode="overwrite", content=content, expected_sha256=old[1].sha256)
            if old
            else Create(path=path, mode="create", content=content)
        )
        status = "updated" if old else "created"
        feeds = {kind} if kind != "saved" or record.saved_kind == "arrangement" else set()
        changes = [change, *_compiled(call, slug, feeds, record, None)]
        written = call.write(slug, changes, f"typed memory: {status} {kind} {record_id}", "typed")
        return {"type": kind, "id": record_id, "status": status, **written.task()}

    return retry_stale(attempt)


def forget_memory(
    call: DialectCall, type: str, id: str, reason: str | None = None, *, kb: str | None = None
) -> SaveResult:
    """Delete a record and recompile what it fed, in one version whose message carries the reason."""
    kind = _type(type)
    slug = call.kb(kb)
    why = one_line(reason) if reason else ""

    def attempt() -> SaveResult:
        found = _read_record(call, slug, kind, id) if isinstance(id, str) else None
        if found is None:
            raise NotFound(f"no {kind} memory with id {id}; query_index lists the ids", type=kind, id=id)
        record, current = found
        changes: list[FileChange] = [
            Delete(path=record_path(kind, id), mode="delete", expected_sha256=current.sha256)
        ]
        feeds = {kind} if kind != "saved" or record.saved_kind == "arrangement" else set()
        changes += _compiled(call, slug, feeds, None, (kind, id))
        message = f"typed memory: forget {kind} {id}" + (f" (reason: {why})" if why else "")
        written = call.write(slug, changes, message, "typed")
        return {"type": kind, "id": id, "status": "forgotten", **written.task()}

    return retry_stale(attempt)


def _fields(record: Record) -> RecordResult:
    # The record's fields are RecordResult's (tests/dialects/test_dialect_results.py checks it).
    return cast(RecordResult, record.model_dump(exclude_none=True))


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
    entries: list[IndexEntry] = [
        {"type": r.type, "id": r.id, "label": r.label, "summary": one_line(r.summary)}
        for _, r in scored[:limit]
    ]
    return {"entries": entries}


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
        return {
            "type": "source",
            "id": id,
            "kind": "conversation",
            "date": d.date,
            "summary": d.summary,
            "diary": d.diary,
            "facts": list(d.facts),
        }
    try:
        current = call.read(slug, check_path(id))
    except InvalidRequest:
        current = None
    if current is None:
        raise NotFound(
            f"no source {id}: neither an archived day nor a file of KB {slug}", type="source", id=id
        )
    return {
        "type": "source",
        "id": id,
        "kind": "file",
        "path": id,
        "content": current.content,
        "sha256": current.sha256,
    }


def _day(call: DialectCall, slug: str, date: str) -> tuple[Day, Current] | None:
    path = f"{ARCHIVE}/{date}.json"
    current = call.read(slug, path)
    if current is None:
        return None
    cached = _parsed.get(current.sha256)
    if isinstance(cached, Day):
        return cached, current
    day = parse_day(current.content, path)
    _parsed.put(current.sha256, day)
    return day, current


def archive_day(
    call: DialectCall,
    date: str,
    summary: str | None = None,
    diary: str | None = None,
    facts: Sequence[str] | None = None,
    *,
    kb: str | None = None,
) -> ArchiveResult:
    """Write (or merge into) `archive/{date}.json`, as one version."""
    day = check_date(date)
    if not any(v and v.strip() for v in (summary, diary, *(facts or []))):
        raise InvalidRequest("archive_day needs a summary, a diary or at least one fact")
    slug = call.kb(kb)
    path = f"{ARCHIVE}/{day}.json"

    def attempt() -> ArchiveResult:
        old = _day(call, slug, day)
        merged = merge_day(old[0] if old else None, day, summary, diary, facts)
        content = render_day(merged)
        change: FileChange = (
            Overwrite(path=path, mode="overwrite", content=content, expected_sha256=old[1].sha256)
            if old
            else Create(path=path, mode="create", content=content)
        )
        status = "merged" if old else "created"
        written = call.write(slug, [change], f"typed memory: archive {day} ({status})", "typed")
        return {"date": day, "status": status, **written.task()}

    return retry_stale(attempt)


def recall_raw(
    call: DialectCall,
    query: str | None = None,
    startDate: str | None = None,
    endDate: str | None = None,
    limit: int = 10,
    *,
    kb: str | None = None,
) -> RecallResult:
    """Archived days matching `query` and/or within [startDate, endDate]: best match (or newest) first."""
    words = query_words(query) if query else []
    if query is not None and query.strip() and not words:
        raise InvalidRequest("query must hold at least one word to look for", query=query)
    start = check_date(startDate, "startDate") if startDate is not None else None
    end = check_date(endDate, "endDate") if endDate is not None else None
    if not words and start is None and end is None:
        raise InvalidRequest("recall_raw needs a query, a date range (startDate, endDate) or both")
    if start and end and start > end:
        raise InvalidRequest("startDate must not be after endDate", startDate=start, endDate=end)
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"limit must be between 1 and {MAX_LIMIT}", limit=limit)
    slug = call.kb_to_read(kb)
    found: list[tuple[float, Day]] = []
    for path, (_, sha256) in call.entries(slug, ARCHIVE + "/").items():
        name = path[len(ARCHIVE) + 1 :]
        if not name.endswith(".json") or "/" in name:
            continue
        try:
            date = check_date(name[:-5])
        except InvalidRequest:
            continue
        if (start and date < start) or (end and date > end):
            continue
        cached = _parsed.get(sha256)
        if isinstance(cached, Day) and cached.date == date:
            day = cached
        else:
            loaded = _day(call, slug, date)
            if loaded is None:
                continue
            day = loaded[0]
        value = score(words, day.summary, day.diary, *day.facts) if words else 1.0
        if value > 0:
            found.append((value, day))
    found.sort(key=lambda item: (-item[0], _neg(item[1].date)))
    return {"days": [_day_result(day) for _, day in found[:limit]]}


def _day_result(day: Day) -> DayResult:
    return {"date": day.date, "summary": day.summary, "diary": day.diary, "facts": list(day.facts)}


def _neg(date: str) -> tuple[int, ...]:
    return tuple(-int(p) for p in date.split("-"))


DIALECT = Dialect(
    name="typed",
    tools=TOOLS,
    bind="kbserver.mcp.binders.typed:tools",
    results={
        "save_memory": SaveResult,
        "forget_memory": SaveResult,
        "query_index": QueryResult,
        "get_memory": RecordResult,
        "recall_raw": RecallResult,
        "archive_day": ArchiveResult,
    },
    folders=tuple(f"{kind}/" for kind in RECORD_TYPES),
    summary="typed records (self, relationship, topic, saved) and a day archive",
)
