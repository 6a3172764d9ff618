"""The Whoosh schema: searchable fields with their boosts, exact filter fields, and the meta document."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from whoosh import columns, fields
from whoosh.system import pack_uint

from kbserver.index.analysis import CHARS_ANALYZER, SPLIT_ANALYZER, TEXT_ANALYZER, char_terms, index_terms

__all__ = [
    "CHARS",
    "DIRS",
    "FIELDS",
    "FILTER_PREFIX",
    "FORMAT",
    "META_PATH",
    "PATH",
    "SEARCH_FIELDS",
    "SHA",
    "make_schema",
]

# Bump when the analyzer or the schema changes: an index of another format is reported corrupt and rebuilt.
FORMAT = "kbserver-index-1"

PATH = "path"  # the exact path: unique key, sortable column (listing order)
DIRS = "dirs"  # every folder of the path ("a/", "a/b/"): a prefix ending in "/" is one term lookup
SHA = "sha"  # column: sha256 (raw bytes) of the indexed text
FIELDS = "fields"  # stored: the Hit.fields dict
CHARS = "chars"  # single CJK characters of all searchable text, for one-character queries
FILTER_PREFIX = "f_"  # f_<key>: exact values of a front-matter field, for filters
META_PATH = "\x00meta"  # the document holding the version; no valid path contains NUL

# Searchable fields and their BM25F boosts: title first, then the body, then the rest.
SEARCH_FIELDS: dict[str, float] = {
    "title": 3.0,
    "body": 2.0,
    "tags": 1.5,
    "category": 1.2,
    "path_text": 1.0,
}


class _Words(fields.TEXT):  # type: ignore[misc]
    """A TEXT field of TEXT_ANALYZER that indexes through analysis.index_terms: the same postings
    (terms, frequencies, weights, encoded positions) as Whoosh's analyzer pipeline, ~3x faster."""

    def index(self, value: Any, **kwargs: Any) -> Iterator[tuple[bytes, int, float, bytes]]:
        if kwargs or not isinstance(value, str):
            yield from super().index(value, **kwargs)
            return
        first, found = index_terms(value)
        positions: dict[str, list[int]] = {}
        for pos, text in enumerate(found, first):
            at = positions.get(text)
            if at is None:
                positions[text] = [pos]
            else:
                at.append(pos)
        fmt = self.format
        boost = fmt.field_boost
        for text, at in positions.items():
            yield text.encode("utf-8"), len(at), len(at) * boost, fmt.encode(at)


class _Chars(fields.TEXT):  # type: ignore[misc]
    """The TEXT field of CHARS_ANALYZER (no positions), indexing through analysis.char_terms."""

    def index(self, value: Any, **kwargs: Any) -> Iterator[tuple[bytes, int, float, bytes]]:
        if kwargs or not isinstance(value, str):
            yield from super().index(value, **kwargs)
            return
        counts: dict[str, int] = {}
        for text in char_terms(value):
            counts[text] = counts.get(text, 0) + 1
        boost = self.format.field_boost
        for text, n in counts.items():
            yield text.encode("utf-8"), n, n * boost, pack_uint(n)


def make_schema() -> Any:
    """A fresh schema object (Whoosh mutates schemas, so never share one between indexes)."""
    schema = fields.Schema(
        path=fields.ID(stored=True, unique=True, sortable=True),
        dirs=fields.KEYWORD(analyzer=SPLIT_ANALYZER),
        sha=fields.COLUMN(columns.VarBytesColumn()),
        fields=fields.STORED(),
        version=fields.STORED(),
        format=fields.STORED(),
        chars=_Chars(analyzer=CHARS_ANALYZER, phrase=False),
        body=_Words(analyzer=TEXT_ANALYZER, stored=True),
        **{name: _Words(analyzer=TEXT_ANALYZER) for name in SEARCH_FIELDS if name != "body"},
    )
    schema.add(FILTER_PREFIX + "*", fields.KEYWORD(analyzer=SPLIT_ANALYZER), glob=True)
    return schema
