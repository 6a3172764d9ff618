"""What every part of the `typed` dialect shares: its limits, a cache of parsed records, and the
checks and reads of typed records."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from kbserver.core.errors import InvalidRequest
from kbserver.core.paths import check_path
from kbserver.dialects.session import Current, DialectCall
from kbserver.dialects.typed_records import (
    RECORD_TYPES,
    Day,
    Record,
    check_date,
    one_line,
    parse_record,
    record_path,
)

__all__ = ["ARCHIVE", "MAX_LIMIT"]

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
