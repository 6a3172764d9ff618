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
import time
from collections.abc import Sequence

from kbserver.core.errors import InvalidRequest, NotFound
from kbserver.core.model import Create, Delete, FileChange, Overwrite, utc_iso
from kbserver.dialects.registry import Dialect
from kbserver.dialects.results import (
    ArchiveResult,
    QueryResult,
    RecallResult,
    RecordResult,
    SaveResult,
)
from kbserver.dialects.session import Current, DialectCall, retry_stale
from kbserver.dialects.typed_archive import archive_day, recall_raw
from kbserver.dialects.typed_base import (
    _FIELDS_OF,
    _as_record,
    _read_record,
    _records,
    _source_refs,
    _text,
    _type,
)
from kbserver.dialects.typed_reads import get_memory, query_index
from kbserver.dialects.typed_records import (
    COMPILED,
    RECORD_TYPES,
    SAVED_KINDS,
    Record,
    compile_context,
    compile_user,
    one_line,
    record_ids,
    record_key,
    record_path,
    render_record,
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
        return SaveResult(
            type=kind, id=record_id, status=status, taskId=written.version, proposal=written.proposal
        )

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
        return SaveResult(
            type=kind, id=id, status="forgotten", taskId=written.version, proposal=written.proposal
        )

    return retry_stale(attempt)


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
)
