"""The Whoosh schema: searchable fields with their boosts, exact filter fields, and the meta document."""

from __future__ import annotations

from typing import Any

from whoosh import columns, fields

from kbserver.index.analysis import CHARS_ANALYZER, SPLIT_ANALYZER, TEXT_ANALYZER

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


def make_schema() -> Any:
    """A fresh schema object (Whoosh mutates schemas, so never share one between indexes)."""
    schema = fields.Schema(
        path=fields.ID(stored=True, unique=True, sortable=True),
        dirs=fields.KEYWORD(analyzer=SPLIT_ANALYZER),
        sha=fields.COLUMN(columns.VarBytesColumn()),
        fields=fields.STORED(),
        version=fields.STORED(),
        format=fields.STORED(),
        chars=fields.TEXT(analyzer=CHARS_ANALYZER, phrase=False),
        body=fields.TEXT(analyzer=TEXT_ANALYZER, stored=True),
        **{name: fields.TEXT(analyzer=TEXT_ANALYZER) for name in SEARCH_FIELDS if name != "body"},
    )
    schema.add(FILTER_PREFIX + "*", fields.KEYWORD(analyzer=SPLIT_ANALYZER), glob=True)
    return schema
