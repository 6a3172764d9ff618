"""The writer of a rebuild: one Whoosh segment from many documents, with the costs of a bulk build cut.

It writes the postings and files Whoosh's own SegmentWriter writes (the rebuild tests compare
searches of both); only how they are computed changes (below).
"""

from __future__ import annotations

from typing import Any

from kbserver.index import private
from kbserver.index.codec import CODEC

__all__ = ["BulkWriter", "MergeWriter"]

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


class BulkWriter(private.SegmentWriterBase):
    """A SegmentWriter for a new, empty index (no deletions, no merges), as `ix.writer()` gives."""

    def __init__(self, ix: Any, timeout: float = 0.0) -> None:
        super().__init__(ix, codec=CODEC, timeout=timeout)
        whooshs: Any = self.pool
        whooshs.cleanup()
        self.pool: Any = _TermPool()
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
        writer = self.fieldwriter
        terms = self.pool.terms
        current = None
        lengths: list[int] = []
        for key in sorted(terms):
            fieldname, btext = key
            if fieldname != current:
                if current is not None:
                    writer.finish_field()
                writer.start_field(fieldname, self.schema[fieldname])
                current = fieldname
                lengths = self._lengths(reader, fieldname)
            writer.start_term(btext)
            private.add_block_postings(private.postings_writer(writer), terms.pop(key), lengths)
            writer.finish_term()
        if current is not None:
            writer.finish_field()
        writer.close()
        if reader is not None:
            reader.close()

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
    and the new numbers keep each term's list in order (segments are added one after another)."""

    def __init__(self, ix: Any, timeout: float = 0.0) -> None:
        super().__init__(ix, timeout=timeout)
        for name, field in self.schema.items():
            if field.vector or field.separate_spelling():
                self.cancel()
                raise ValueError(f"MergeWriter cannot merge field {name!r} (vectors, spelling)")

    def add_postings_to_pool(self, reader: Any, startdoc: int, docmap: dict[int, int] | None) -> None:
        """SegmentWriter.add_postings_to_pool (what add_reader calls), a block at a time."""
        terms = self.pool.terms
        key: tuple[str, bytes] | None = None
        flat: list[Any] = []
        for field, text, ids, weights, values in private.term_blocks(reader):
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
