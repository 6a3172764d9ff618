"""The writer of a rebuild: one Whoosh segment from many documents, with the costs of a bulk build cut.

It writes the postings and files Whoosh's own SegmentWriter writes (the rebuild tests compare
searches of both); only how they are computed changes (below).
"""

from __future__ import annotations

import struct
import zlib
from array import array
from collections.abc import Callable, Iterator
from pickle import dumps
from typing import Any

from whoosh.codec.whoosh3 import WHOOSH3_HEADER_MAGIC
from whoosh.system import pack_int, pack_long, pack_ushort
from whoosh.util.numeric import length_to_byte

from kbserver.index import private
from kbserver.index.codec import CODEC

__all__ = ["BulkWriter", "MergeStopped", "MergeWriter"]

# How often a merge asks whether to stop: every this many terms, blocks of postings or documents
# (a few milliseconds of work on the mix; the question itself is one call).
_LOOK_EVERY = 256

# - the postings are kept per term as they come (documents arrive in number order, so each term's list
#   is already sorted); Whoosh's pool estimates the size of every posting, sorts all of them, and past
#   128 MB pickles them to runs on disk and merges those back;
# - they are written term by term, a block at a time (private.add_block_postings), with each field's
#   lengths read once: Whoosh's add_postings reads the field length of every posting's document back
#   from the new segment and adds the postings one call each.

_SHARED_VALUE = 16  # encoded values up to this size are shared (one object per distinct value)
_Posting = tuple[str, bytes, int, float, bytes | None]


class _TermPool:
    """The writer's posting pool, in memory: per (field, term bytes), a flat list of docnum, weight,
    encoded value for each document holding it, in document order (documents arrive in order)."""

    def __init__(self) -> None:
        self.terms: dict[tuple[str, bytes], list[Any]] = {}

    def add(self, item: _Posting) -> None:  # what SegmentWriter's other methods would call
        fieldname, btext, docnum, weight, vbytes = item
        flat = self.terms.get((fieldname, btext))
        if flat is None:
            self.terms[(fieldname, btext)] = [docnum, weight, vbytes]
        else:
            flat += (docnum, weight, vbytes)

    def cleanup(self) -> None:
        self.terms.clear()


class MergeStopped(Exception):
    """A merge gave up because it was asked to stop (`MergeWriter.stop`); `abandon` cleans it up."""


class BulkWriter(private.SegmentWriterBase):
    """A SegmentWriter for a new, empty index (no deletions, no merges), as `ix.writer()` gives."""

    stop: Callable[[], bool] | None = None  # asked between terms while flushing (MergeWriter)

    def __init__(self, ix: Any, timeout: float = 0.0) -> None:
        super().__init__(ix, codec=CODEC, timeout=timeout)
        private.replace_pool(self, _TermPool())
        self.shared_weights: dict[float, float] = {}
        self.shared_values: dict[bytes, bytes] = {}

    def add_document(self, **fields: Any) -> None:
        """SegmentWriter.add_document for fields without spelling or vectors (kbserver's schema),
        the postings added to the pool's lists without a tuple and a method call each."""
        self.check_state()
        perdocwriter = self.perdocwriter
        schema = self.schema
        docnum = self.docnum
        terms = self.pool.terms
        weights, values = self.shared_weights, self.shared_values
        docboost = self.doc_boost(fields)
        fieldnames = sorted(name for name in fields if not name.startswith("_"))
        self.check_fields(schema, fieldnames)
        perdocwriter.start_doc(docnum)
        try:
            for fieldname in fieldnames:
                value = fields.get(fieldname)
                if value is None:
                    continue
                field = schema[fieldname]
                if field.vector or field.separate_spelling():
                    raise ValueError(f"BulkWriter cannot index field {fieldname!r} (vectors, spelling)")
                length = 0
                if field.indexed:
                    fieldboost = self.field_boost(fields, fieldname, docboost)
                    scorable = field.scorable
                    for btext, freq, weight, vbytes in field.index(value):
                        if scorable:
                            length += freq
                        # One object per distinct weight and short value: ~10M postings at 100k
                        # notes, most of them a frequency of 1 at one of a few thousand positions.
                        weight = weights.setdefault(weight * fieldboost, weight * fieldboost)
                        if len(vbytes) <= _SHARED_VALUE:
                            vbytes = values.setdefault(vbytes, vbytes)
                        flat = terms.get((fieldname, btext))
                        if flat is None:
                            terms[(fieldname, btext)] = [docnum, weight, vbytes]
                        else:
                            flat += (docnum, weight, vbytes)
                stored = fields.get(f"_stored_{fieldname}", value)
                perdocwriter.add_field(fieldname, field, stored if field.stored else None, length)
                column = field.column_type
                if column and stored is not None:
                    perdocwriter.add_column_value(fieldname, column, field.to_column_value(stored))
        except Exception:
            perdocwriter.cancel_doc()
            raise
        perdocwriter.finish_doc()
        self.mark_added()
        self.docnum += 1

    def flush_segment(self) -> None:
        """SegmentWriter._flush_segment, the postings written term by term, a block at a time, with
        each field's lengths read once (FieldWriter.add_postings reads one per posting)."""
        self.perdocwriter.close()
        reader = self.per_document_reader() if self.codec.length_stats else None
        try:
            self._write_terms(reader)
        finally:
            if reader is not None:
                reader.close()

    def _write_terms(self, reader: Any) -> None:
        writer = self.fieldwriter
        private.wrap_written_files(writer, _Counted)
        terms = self.pool.terms
        current = None
        lengths: list[int] = []
        one_block: _OneBlockTerms | None = None
        stop = self.stop
        for done, key in enumerate(sorted(terms), 1):
            if stop is not None and not done % _LOOK_EVERY and stop():
                raise MergeStopped
            fieldname, btext = key
            if fieldname != current:
                if current is not None:
                    writer.finish_field()
                writer.start_field(fieldname, self.schema[fieldname])
                current = fieldname
                lengths = self._lengths(reader, fieldname)
                one_block = _OneBlockTerms(writer)
            flat = terms.pop(key)
            assert one_block is not None
            if not one_block.write(btext, flat, lengths):
                writer.start_term(btext)
                private.add_block_postings(private.postings_writer(writer), flat, lengths)
                writer.finish_term()
        if current is not None:
            writer.finish_field()
        writer.close()

    def _lengths(self, reader: Any, fieldname: str) -> list[int]:
        if reader is None:
            return [0] * self.docnum
        read = reader.doc_field_length
        return [read(n, fieldname, 0) for n in range(self.docnum)]


class MergeWriter(BulkWriter):
    """The writer of a merge (`commit(mergetype=...)` with no documents of its own): the merged
    segments' postings read a block at a time and written as a rebuild writes them.

    Whoosh's add_reader looks each term up in the terms file's hash, builds a filtered matcher for
    it and yields its postings one tuple at a time into the sorting pool; on Chinese text, where
    most terms are a bigram in one or two notes, that per-term and per-posting work was about half
    of a merge. Here each segment's terms file is read front to back (private.term_blocks),
    postings of deleted documents are dropped through the docnum map Whoosh's add_reader makes,
    and the new numbers keep each term's list in order (segments are added one after another).

    `stop()`, if given, is asked every few hundred documents, blocks or terms until the postings
    are written; once it says True the commit raises MergeStopped, and `abandon` cancels the writer
    and removes what it wrote (the table of contents was never touched): new commits then need not
    wait for a merge of the whole tail (issue 37)."""

    def __init__(self, ix: Any, timeout: float = 0.0, stop: Callable[[], bool] | None = None) -> None:
        super().__init__(ix, timeout=timeout)
        self.stop = stop
        for name, field in self.schema.items():
            if field.vector or field.separate_spelling():
                self.cancel()
                raise ValueError(f"MergeWriter cannot merge field {name!r} (vectors, spelling)")

    def abandon(self) -> None:
        """Cancel this writer (its lock released) and delete the files of its unfinished segment."""
        self.cancel()
        storage = self.storage
        for name in self.newsegment.list_files(storage):
            storage.delete_file(name)

    def write_per_doc(self, fieldnames: Any, reader: Any) -> Any:
        """SegmentWriter.write_per_doc (what add_reader calls first, per segment), asking `stop`
        before it and as it goes."""
        if self.stop is None:
            return super().write_per_doc(fieldnames, reader)
        if self.stop():
            raise MergeStopped
        return super().write_per_doc(fieldnames, _Stopping(reader, self.stop))

    def add_postings_to_pool(self, reader: Any, startdoc: int, docmap: dict[int, int] | None) -> None:
        """SegmentWriter.add_postings_to_pool (what add_reader calls), a block at a time."""
        terms = self.pool.terms
        key: tuple[str, bytes] | None = None
        flat: list[Any] = []
        stop = self.stop
        for done, (field, text, ids, weights, values) in enumerate(private.term_blocks(reader), 1):
            if stop is not None and not done % _LOOK_EVERY and stop():
                raise MergeStopped
            if (field, text) != key:
                if key is not None and not flat:
                    del terms[key]  # every posting was of a deleted document
                key = (field, text)
                flat = terms.setdefault(key, [])
            if docmap is None:
                for docnum, weight, value in zip(ids, weights, values, strict=True):
                    flat += (startdoc + docnum, weight, value)
            else:
                for docnum, weight, value in zip(ids, weights, values, strict=True):
                    new = docmap.get(docnum)
                    if new is not None:
                        flat += (new, weight, value)
        if key is not None and not flat:
            del terms[key]


class _Stopping:
    """A segment reader whose `iter_docs` asks `stop` every few hundred documents."""

    def __init__(self, reader: Any, stop: Callable[[], bool]) -> None:
        self._reader = reader
        self._stop = stop

    def iter_docs(self) -> Iterator[Any]:
        for done, item in enumerate(self._reader.iter_docs(), 1):
            if not done % _LOOK_EVERY and self._stop():
                raise MergeStopped
            yield item

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


_TERM_INFO = struct.Struct("!BfIBBfII")  # W3TermInfo's fixed part: flags, weight, df, lengths, ids


class _OneBlockTerms:
    """Writes a term whose postings fit in one block in a few calls, byte for byte as Whoosh's
    start_term, add_posting and finish_term would: a rebuild's, a merge's and an update's segments
    are mostly such terms (a CJK bigram in one or two notes), and Whoosh spent ~30 calls a term
    on its block statistics, term info object and hash table entry (tests/index/test_index_bulk_terms.py
    compares the files). `write` says False for any other term; the caller writes it Whoosh's way."""

    def __init__(self, fieldwriter: Any) -> None:
        self.postfile, self.terms, fieldid, fmt, limits = private.term_files(fieldwriter)
        self.prefix = pack_ushort(fieldid)
        self.limit, inline, self.level, self.plain_under, byteids = limits
        self.fewest = 10**9 if byteids else max(1, inline)  # fewer than `inline`: Whoosh inlines them
        self.fixed = fmt.fixed_value_size()

    def write(self, btext: bytes, flat: list[Any], lengths: list[int]) -> bool:
        count = len(flat) // 3
        if count < self.fewest or count > self.limit:
            return False
        ids, weights = flat[0::3], flat[1::3]
        top = max(weights)
        maxweight = top if top > 0 else 0
        held = [n for n in (lengths[d] for d in ids) if n]
        low, high = (min(held), max(held)) if held else (None, 0)
        stored = array("f", weights)
        first = stored[0]
        mini_weights = (
            None
            if all(w == 1.0 for w in stored)
            else first
            if all(w == first for w in stored)
            else tuple(stored)
        )
        values = [v for v in flat[2::3] if v]
        fixed = self.fixed
        mini_values = (
            tuple(values) if fixed is None or fixed < 0 else None if fixed == 0 else b"".join(values)
        )
        deltas, base = [], 0
        for d in ids:
            deltas.append(d - base)
            base = d
        data = dumps((tuple(deltas), mini_weights, mini_values), 2)
        level = self.level if count >= self.plain_under else 0
        if level:
            data = zlib.compress(data, level)
        info = dumps((count, ids[-1], maxweight, level, length_to_byte(low), length_to_byte(high)), 2)
        block = WHOOSH3_HEADER_MAGIC + pack_int(-(len(info) + len(data))) + info + data
        start = self.postfile.tell()
        self.postfile.write(block)
        term_info = _TERM_INFO.pack(
            False,
            sum(stored),
            count,
            0 if low is None else length_to_byte(low),
            length_to_byte(high),
            maxweight,
            ids[0],
            ids[-1],
        )
        self.terms.add(self.prefix + btext, term_info + pack_long(start) + pack_int(len(block)))
        return True


class _Counted:
    """A file being written whose position is counted in Python: a buffered file's tell() asks the
    OS every time (an lseek), and Whoosh asks for it three times a term (the postings' start, the
    terms table's row and its index): ~15% of a merge's CPU here. Anything else goes to the file."""

    def __init__(self, file: Any) -> None:
        self._file = file
        self._pos = int(file.tell())

    def write(self, data: Any) -> int:
        written = int(self._file.write(data))
        self._pos += written
        return written

    def tell(self) -> int:
        return self._pos

    def seek(self, *args: Any) -> int:
        self._file.seek(*args)
        self._pos = int(self._file.tell())
        return self._pos

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)
