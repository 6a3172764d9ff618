"""Whoosh's per-document reader remembers which fields have no length column.

`W3PerDocReader.doc_field_length` looks the field's length column up in `_cached_reader`, which
caches the columns it finds but not the ones it does not: for every field without lengths (the
path, folder and filter fields are indexed but never scored) each call asks the storage whether
the column file exists, a `stat` of the disk. A merge asks for every field of every document it
copies and for every posting it writes (~130,000 calls, ~8% of a merge of 40 small segments), a
new segment for every posting. A segment's files never change once written, so a missing column
stays missing: `install` makes the cache remember that too (the same answers, one look per field).
"""

from __future__ import annotations

from typing import Any

from whoosh.codec import whoosh3

__all__ = ["install"]

_MISSING = object()


def _cached_reader(self: Any, fieldname: str, column: Any) -> Any:
    found = self._readers.get(fieldname, _MISSING)
    if found is not _MISSING:
        return found  # a column reader, or None: the segment has no such column
    reader = self.column_reader(fieldname, column) if self.has_column(fieldname) else None
    self._readers[fieldname] = reader
    return reader


def install() -> None:
    """Replace W3PerDocReader._cached_reader by the one above (idempotent)."""
    original = getattr(whoosh3.W3PerDocReader, "_cached_reader", None)
    if not callable(original):
        raise RuntimeError("whoosh3.W3PerDocReader._cached_reader is gone: check kbserver.index.lengths")
    whoosh3.W3PerDocReader._cached_reader = _cached_reader
