"""Every private Whoosh attribute kbserver reads, in one place (tests/index/test_whoosh_private.py).

The index needs a few things whoosh-reloaded has no public way to give: a segment's raw postings
(block by block, deleted documents included), its one-byte field lengths as a buffer, a filter
matcher's set, a reader re-pointed at a segment's newer deletions, the table of contents of the
latest commit. Each accessor below names the private attribute it reads; pyproject.toml pins
whoosh-reloaded to the version they were checked on (TESTED), and the tests compare every
accessor with what the public API says of the same index, so a Whoosh that changed fails there,
loudly, before a search returns a wrong score.
"""

from __future__ import annotations

import copy
from typing import Any

from whoosh import query as q
from whoosh.codec.whoosh3 import LENGTHS_COLUMN

__all__ = [
    "TESTED",
    "add_block_postings",
    "block_ids",
    "block_ids_and_weights",
    "block_max_id",
    "byte_ids",
    "column_bytes",
    "filter_set",
    "is_null_query",
    "leaf_position",
    "leaf_term",
    "length_column",
    "next_block",
    "postings_writer",
    "raw_matcher",
    "read_toc",
    "rebind",
]

TESTED = "2.7.5"  # the whoosh-reloaded version pyproject.toml pins and the tests check these on


# -- a segment reader's files -----------------------------------------------------------------------
def length_column(reader: Any, field: str) -> Any | None:
    """The per-document one-byte length column of `field` in a segment (None: the field has none)."""
    return reader._perdoc._cached_reader(f"_{field}_len", LENGTHS_COLUMN)


def column_bytes(column: Any) -> bytes:
    """All the bytes of a fixed one-byte-per-document column, in document order."""
    return bytes(column._dbfile.get(column._basepos, column._count))


def raw_matcher(reader: Any, field: str, text: bytes) -> Any:
    """A segment's matcher of a term with no deletion filter (deleted documents' postings too)."""
    return reader._terms.matcher(field, text, reader.schema[field].format)


# -- a W3LeafMatcher's blocks -----------------------------------------------------------------------
def byte_ids(m: Any) -> bool:
    """True when the matcher's ids are bytes (a vector's postings), not document numbers."""
    return bool(m._byteids)


def block_ids(m: Any) -> Any:
    """The document numbers of the current block (decoded on first use; ids only)."""
    if m._ids is None:
        m._read_ids()
    return m._ids


def block_ids_and_weights(m: Any) -> tuple[Any, Any]:
    """The current block's raw ids (the first absolute, then deltas) and weights (None: all 1, a
    float: one for the whole block, else an array of 32-bit floats), as the block stores them."""
    if m._data is None:
        m._read_data()
    return m._data[0], m._data[1]


def block_max_id(m: Any) -> int:
    """The last document number of the current block."""
    return int(m._maxid)


def next_block(m: Any) -> None:
    """Move to the next block (inactive after the last)."""
    m._next_block()


def leaf_term(m: Any) -> tuple[str, bytes]:
    """(field, term bytes) of a term matcher."""
    field, text = m._term
    return field, text


def leaf_position(m: Any) -> int:
    """The matcher's index inside its current block."""
    return int(m._i)


# -- matchers, queries, the index -------------------------------------------------------------------
def filter_set(m: Any) -> tuple[Any, bool]:
    """A FilterMatcher's set of document numbers and whether it excludes (True) or keeps them."""
    return m._ids, bool(m._exclude)


def is_null_query(query: Any) -> bool:
    """True for Whoosh's NullQuery (a query that matches nothing)."""
    return isinstance(query, q.qcore._NullQuery)


def read_toc(ix: Any) -> Any:
    """The table of contents (schema, segments, generation) of the index's latest commit."""
    return ix._read_toc()


def rebind(reader: Any, segment: Any, generation: int) -> Any:
    """A view of a segment reader's open files with `segment`'s (newer) deletions and `generation`."""
    view = copy.copy(reader)
    view.__dict__.pop("deleted_docs_set", None)  # a cached_property over the old deletions
    view._segment = segment
    view._gen = generation
    view._perdoc = copy.copy(reader._perdoc)
    view._perdoc._segment = segment
    return view


# -- writing a new segment's postings (index/bulk.py) --------------------------------------------------
def postings_writer(fieldwriter: Any) -> Any:
    """A W3FieldWriter's postings writer of the term it started (start_term)."""
    return fieldwriter._postwriter


def add_block_postings(postings: Any, flat: list[Any], lengths: list[int]) -> None:
    """W3PostingsWriter.add_posting for each (docnum, weight, value) of `flat`, a block at a time:
    the same buffered ids, weights, values and block statistics, a full block written before the
    next posting is added (tests/index/test_index_rebuild.py compares the segment with Whoosh's)."""
    ids, weights, values = flat[0::3], flat[1::3], flat[2::3]
    limit = postings._blocklimit
    for start in range(0, len(ids), limit):
        if start:
            postings._write_block()
        block = ids[start : start + limit]
        postings._ids.extend(block)
        top = max(weights[start : start + limit])
        postings._weights.extend(weights[start : start + limit])
        if top > postings._maxweight:
            postings._maxweight = top
        postings._values.extend(v for v in values[start : start + limit] if v)
        held = [n for n in (lengths[d] for d in block) if n]
        if held:
            low, high = min(held), max(held)
            if postings._minlength is None or low < postings._minlength:
                postings._minlength = low
            if high > postings._maxlength:
                postings._maxlength = high
