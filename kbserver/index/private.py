"""Every private Whoosh attribute kbserver reads and every patch it makes, checked at import.

Whoosh gives no public way to some of what the index needs (raw postings, one-byte field lengths,
a reader re-pointed at newer deletions), and two of its behaviours are patched (`install`). At
import `check` refuses any Whoosh but TESTED, or one lacking an attribute used here, with one error.
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import Any

import whoosh.codec.base
import whoosh.filedb.compound
import whoosh.filedb.filestore
import whoosh.filedb.structfile
import whoosh.multiproc
import whoosh.util
import whoosh.writing
from whoosh import columns, scoring
from whoosh.codec import whoosh3
from whoosh.index import FileIndex
from whoosh.matching import FilterMatcher
from whoosh.query import qcore
from whoosh.reading import SegmentReader
from whoosh.writing import SegmentWriter

from kbserver.core.pins import installed, missing_attributes, missing_uses

__all__ = [
    "TESTED",
    "LengthScorer",
    "SegmentWriterBase",
    "WhooshChanged",
    "add_block_postings",
    "block_ids",
    "block_ids_and_weights",
    "block_max_id",
    "byte_ids",
    "check",
    "column_bytes",
    "filter_set",
    "install",
    "is_null_query",
    "leaf_position",
    "leaf_term",
    "length_column",
    "next_block",
    "plain_small_blocks_writer",
    "postings_writer",
    "random_name",
    "raw_matcher",
    "read_toc",
    "rebind",
    "replace_pool",
    "term_blocks",
    "term_files",
    "wrap_written_files",
    "written_files",
]

DIST = "whoosh-reloaded"
TESTED = "2.7.5"  # the only version this module was checked on; pyproject.toml pins it

# Every module that does `from whoosh.util import random_name` (see `install`).
_NAME_HOLDERS: tuple[ModuleType, ...] = (
    whoosh.util,
    whoosh.codec.base,
    whoosh.filedb.compound,
    whoosh.filedb.filestore,
    whoosh.multiproc,
    whoosh.writing,
)
# What must exist on a class or module itself (methods, classes, constants).
HAS: Mapping[Any, tuple[str, ...]] = {
    whoosh3: ("LENGTHS_COLUMN", "W3PerDocReader", "W3LeafMatcher", "W3PostingsWriter", "W3FieldWriter"),
    whoosh3.W3PerDocReader: ("_cached_reader", "column_reader", "has_column"),
    whoosh3.W3LeafMatcher: ("_read_ids", "_read_weights", "_read_values", "_read_data", "_next_block"),
    whoosh3.W3TermsReader: ("items",),
    whoosh3.W3TermInfo: ("is_inlined", "inlined_postings", "extent"),
    whoosh3.W3PostingsWriter: ("_write_block",),
    SegmentWriter: (
        "_flush_segment",
        "_check_state",
        "_doc_boost",
        "_check_fields",
        "_field_boost",
        "add_postings_to_pool",  # what add_reader calls (index/bulk.py's MergeWriter replaces it)
        "write_per_doc",  # add_reader calls it first (MergeWriter wraps it to stop a merge)
    ),
    scoring.WeightLengthScorer: ("_score",),
    FileIndex: ("_read_toc",),
    qcore: ("_NullQuery",),
    whoosh.util: ("IDCHARS", "random_name"),
    **{module: ("random_name",) for module in _NAME_HOLDERS[1:]},
}
# Instance attributes: what the class's own methods must still read or set (their code names it).
USES: Mapping[type, tuple[str, ...]] = {
    whoosh3.W3PerDocReader: ("_readers", "_segment"),
    SegmentReader: ("_perdoc", "_terms", "_segment", "_gen"),
    columns.FixedBytesColumn.Reader: ("_dbfile", "_basepos", "_count"),
    whoosh3.W3LeafMatcher: ("_byteids", "_ids", "_weights", "_values", "_data", "_maxid", "_i", "_term"),
    whoosh3.W3TermsReader: ("_postfile",),
    FilterMatcher: ("_ids", "_exclude"),
    whoosh3.W3FieldWriter: ("_postwriter", "_postfile", "_fieldid", "_tindex", "_format"),
    whoosh3.W3PostingsWriter: (
        "_inlinelimit",
        "_byteids",
        "_blocklimit",
        "_compression",
        "_ids",
        "_weights",
        "_values",
        "_maxweight",
        "_minlength",
        "_maxlength",
    ),
    whoosh3.W3Codec: ("_blocklimit", "_compression", "_inlinelimit"),
    SegmentWriter: ("_added", "pool"),  # pool: public-named, replaced by replace_pool
    whoosh.filedb.structfile.StructFile: ("file",),  # wrapped by wrap_written_files
}


class WhooshChanged(RuntimeError):
    """The installed Whoosh is not the one this module was checked on: fix the pin, or this module."""


def check(
    version: str | None, has: Mapping[Any, tuple[str, ...]] = HAS, uses: Mapping[type, tuple[str, ...]] = USES
) -> None:
    """Raise WhooshChanged, naming every problem at once, unless `version` is TESTED and every
    attribute of `has` and `uses` is there."""
    problems = []
    if version != TESTED:
        problems.append(f"version {version or 'not installed'} found, {TESTED} required")
    problems += missing_attributes(has) + missing_uses(uses)
    if problems:
        raise WhooshChanged(
            f"{DIST}: {'; '.join(problems)}. kbserver.index.private reads Whoosh internals checked on "
            f"{DIST}=={TESTED} only: install that version (pyproject.toml pins it)"
        )


check(installed(DIST))


# -- a segment reader's files -----------------------------------------------------------------------
def length_column(reader: Any, field: str) -> Any | None:
    """The per-document one-byte length column of `field` in a segment (None: the field has none)."""
    return reader._perdoc._cached_reader(f"_{field}_len", whoosh3.LENGTHS_COLUMN)


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
    return isinstance(query, qcore._NullQuery)


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


class LengthScorer(scoring.WeightLengthScorer):  # type: ignore[misc]
    """WeightLengthScorer for subclasses that define `score_of(weight, length)`, which Whoosh calls
    by its documented but private name `_score` (bound once per class: no extra call per posting)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._score = cls.score_of

    def score_of(self, weight: float, length: float) -> float:
        raise NotImplementedError


# -- writing segments (index/codec.py, index/bulk.py) -------------------------------------------------
class _PlainSmallBlocks(whoosh3.W3PostingsWriter):  # type: ignore[misc]
    """W3's postings writer, writing blocks of fewer than `compress_from` postings uncompressed."""

    compress_from = 0

    def _write_block(self, last: bool = False) -> None:
        this: Any = self
        level = this._compression
        if len(this._ids) < self.compress_from:
            this._compression = 0  # recorded in the block's info: read back uncompressed
        try:
            super()._write_block(last)
        finally:
            this._compression = level


def plain_small_blocks_writer(codec: Any, dbfile: Any, byteids: bool, compress_from: int) -> Any:
    """What `codec.postings_writer(dbfile, byteids)` gives (a W3Codec's settings), except that a
    block of fewer than `compress_from` postings is written uncompressed."""
    writer = _PlainSmallBlocks(
        dbfile,
        blocklimit=codec._blocklimit,
        byteids=byteids,
        compression=codec._compression,
        inlinelimit=codec._inlinelimit,
    )
    writer.compress_from = compress_from
    return writer


def postings_writer(fieldwriter: Any) -> Any:
    """A W3FieldWriter's postings writer of the term it started (start_term)."""
    return fieldwriter._postwriter


def written_files(fieldwriter: Any) -> tuple[Any, Any]:
    """The StructFiles a W3FieldWriter writes: the postings and the terms table."""
    return fieldwriter._postfile, fieldwriter._tindex.dbfile


def wrap_written_files(fieldwriter: Any, wrap: Callable[[Any], Any]) -> None:
    """Put `wrap(file)` in place of the file under each StructFile a W3FieldWriter writes
    (`written_files`): every read, write and tell of Whoosh's then goes through the wrapper."""
    for structfile in written_files(fieldwriter):
        structfile.file = wrap(structfile.file)


def term_files(fieldwriter: Any) -> tuple[Any, Any, int, Any, tuple[int, int, int, int, bool]]:
    """What a W3FieldWriter in a field (start_field) writes a term with: the postings file, the terms
    table, the field's number and format, and its postings writer's (block limit, inline limit,
    compression level, size under which a block is written plain (0: none), whether ids are bytes)."""
    postings = fieldwriter._postwriter
    limits = (postings._blocklimit, postings._inlinelimit, postings._compression, 0, bool(postings._byteids))
    if isinstance(postings, _PlainSmallBlocks):
        limits = (*limits[:3], postings.compress_from, limits[4])
    return fieldwriter._postfile, fieldwriter._tindex, fieldwriter._fieldid, fieldwriter._format, limits


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


# -- reading a segment's postings for a merge (index/bulk.py) -----------------------------------------
def term_blocks(reader: Any) -> Iterator[tuple[str, bytes, Any, Any, Any]]:
    """Every term of a segment reader in the terms file's order (by field number, then term bytes),
    as (field, term bytes, ids, weights, values) a block at a time, deleted documents included: the
    terms file read front to back, each block decoded as W3LeafMatcher decodes it, with no hash
    lookup, matcher or deletion filter a term."""
    terms = reader._terms
    postfile = terms._postfile
    schema = reader.schema
    for (field, text), info in terms.items():
        if field not in schema:
            continue
        if info.is_inlined():
            ids, weights, values = info.inlined_postings()
            yield field, text, ids, weights, values
            continue
        offset, length = info.extent()
        m = whoosh3.W3LeafMatcher(postfile, offset, length, schema[field].format, term=(field, text))
        while m.is_active():
            m._read_ids()
            m._read_weights()
            m._read_values()
            yield field, text, m._ids, m._weights, m._values
            m._next_block()


class SegmentWriterBase(SegmentWriter):  # type: ignore[misc]
    """Whoosh's SegmentWriter with the private helpers index/bulk.py reuses under public names, and
    its segment flush (the private `_flush_segment` that commit calls) overridable as `flush_segment`."""

    def _flush_segment(self) -> None:
        self.flush_segment()

    def flush_segment(self) -> None:
        super()._flush_segment()

    def check_state(self) -> None:
        self._check_state()

    def doc_boost(self, fields: Mapping[str, Any]) -> float:
        return float(self._doc_boost(fields))

    def field_boost(self, fields: Mapping[str, Any], fieldname: str, docboost: float) -> float:
        return float(self._field_boost(fields, fieldname, docboost))

    def check_fields(self, schema: Any, fieldnames: list[str]) -> None:
        self._check_fields(schema, fieldnames)

    def mark_added(self) -> None:
        """Record that a document was added (what commit checks before it writes a segment)."""
        self._added = True


def replace_pool(writer: Any, pool: Any) -> None:
    """Put `pool` in place of a SegmentWriter's posting pool (Whoosh's own cleaned up first): the
    writer's add_document and add_postings_to_pool hand their postings to `pool.add`."""
    writer.pool.cleanup()
    writer.pool = pool


# -- patches ------------------------------------------------------------------------------------------
_MISSING = object()
_WHOOSHS_CACHED_READER = vars(whoosh3.W3PerDocReader)["_cached_reader"]  # replaced by install()


def _cached_reader(self: Any, fieldname: str, column: Any) -> Any:
    """W3PerDocReader._cached_reader that also remembers a column the segment lacks.

    Whoosh caches the columns it finds, not the ones it does not: for every field without lengths
    (path, folders, filters) each `doc_field_length` asks the storage again, a `stat`, and a merge
    asks for every field of every document. A segment's files never change once written, so a
    missing column stays missing.
    """
    found = self._readers.get(fieldname, _MISSING)
    if found is not _MISSING:
        return found  # a column reader, or None: the segment has no such column
    reader = self.column_reader(fieldname, column) if self.has_column(fieldname) else None
    self._readers[fieldname] = reader
    return reader


def random_name(size: int = 28) -> str:
    """A name of `size` characters of Whoosh's alphabet, drawn from the OS (never the `random` module).

    Whoosh names segments, sort runs and compound temp files from the global `random`: anything that
    seeds it (Hypothesis, before every example) made new names repeat those on disk, and a commit then
    failed in `create_compound_file` or overwrote a live segment.
    """
    return "".join(secrets.choice(whoosh.util.IDCHARS) for _ in range(size))


def install() -> None:
    """Apply the patches (idempotent): `random_name` in every Whoosh module holding its own, and
    `_cached_reader` on W3PerDocReader."""
    for module in _NAME_HOLDERS:
        module.random_name = random_name  # type: ignore[attr-defined]
    whoosh3.W3PerDocReader._cached_reader = _cached_reader
