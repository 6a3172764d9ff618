"""BM25F over the live documents only, so a score depends on the indexed files, not on segments.

Whoosh counts deleted documents in its statistics until a merge drops them, so a merge changed
every score and pages asked for around it could share a hit or skip one (details below).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from math import log
from typing import Any

from whoosh import scoring
from whoosh.util.numeric import byte_to_length

from kbserver.index import private

__all__ = ["LiveBM25F", "LiveStats"]

# Whoosh's BM25F takes its collection statistics from the segments as written: `doc_count_all()`, a
# term's `doc_frequency` and a field's total length all count deleted documents (every replaced file
# leaves its old copy behind) until a merge drops them; and a merge re-sums field lengths from the
# one-byte length kept per document (`length_to_byte`, exact only for short fields) where the writer
# summed exact lengths.
#
# Here the statistics are those of the live documents, each field length being the per-document value
# Whoosh stores and scores with: the number of live documents, a term's number of live documents, a
# field's summed length over the live documents. They are functions of the indexed documents alone:
# the same files score the same whatever the segments, their deletions or the history (an updated
# index scores exactly as a rebuild of its files).
#
# Cost: a segment's summed field lengths are read once from its length column; what its deleted
# documents take away (their lengths, their postings of each term asked for) is remembered per
# segment and extended only by deletions seen since, since Whoosh only ever adds deletions to a
# segment. A term's deleted postings are counted block by block (ids only; blocks holding no deleted
# document are not decoded).

_MAX_TERMS = 100_000  # per segment: remembered terms are dropped past this (a bound, not a cache policy)


class _Segment:
    """What is known of one segment: its summed field lengths and what its deletions take away."""

    def __init__(self) -> None:
        self.deleted: list[int] = []  # deleted document numbers in the order learned, each block sorted
        self.known: set[int] = set()
        self.lengths: dict[str, int] = {}  # field -> summed stored length of all its documents
        self.deleted_lengths: dict[str, tuple[int, int]] = {}  # field -> (deletions counted, their length)
        self.deleted_postings: dict[tuple[str, bytes], tuple[int, int]] = {}  # term -> (counted, postings)

    def learn(self, leaf: Any) -> None:
        if not leaf.has_deletions():
            return
        deleted = leaf.deleted_docs_set
        if len(deleted) != len(self.known):
            new = sorted(deleted - self.known)
            self.deleted.extend(new)
            self.known.update(new)

    def field_length(self, leaf: Any, field: str) -> int:
        total = self.lengths.get(field)
        if total is None:
            column = private.length_column(leaf, field)
            if column is None:
                total = 0
            else:
                raw = private.column_bytes(column)  # one byte per document
                total = sum(byte_to_length(b) * n for b, n in Counter(raw).items())
            self.lengths[field] = total
        counted, removed = self.deleted_lengths.get(field, (0, 0))
        if counted < len(self.deleted):
            column = private.length_column(leaf, field)
            if column is not None:
                removed += sum(byte_to_length(column[d]) for d in self.deleted[counted:])
            self.deleted_lengths[field] = counted, removed = len(self.deleted), removed
        return total - removed

    def doc_frequency(self, leaf: Any, field: str, text: bytes) -> int:
        df = int(leaf.doc_frequency(field, text))  # counts deleted documents
        if df == 0 or not self.deleted:
            return df
        key = (field, text)
        counted, removed = self.deleted_postings.get(key, (0, 0))
        if counted < len(self.deleted):
            removed += _postings_among(leaf, field, text, sorted(self.deleted[counted:]))
            if len(self.deleted_postings) >= _MAX_TERMS:
                self.deleted_postings.clear()
                counted, removed = 0, _postings_among(leaf, field, text, sorted(self.deleted))
            self.deleted_postings[key] = (len(self.deleted), removed)
        return df - removed


def _postings_among(leaf: Any, field: str, text: bytes, docs: list[int]) -> int:
    """How many of the sorted document numbers `docs` hold the term, deleted or not."""
    matcher = private.raw_matcher(leaf, field, text)  # no deletion filter
    wanted = set(docs)
    count, i = 0, 0
    while matcher.is_active() and i < len(docs):
        top = matcher.block_max_id()
        j = bisect_right(docs, top, i)
        if j > i:  # some of docs[i:j] may be in this block: decode its ids (not weights or positions)
            count += len(wanted.intersection(private.block_ids(matcher)))
            i = j
        private.next_block(matcher)
    return count


class LiveStats:
    """Collection statistics over the live documents of one reader (a commit of the index)."""

    def __init__(self, reader: Any, previous: LiveStats | None = None) -> None:
        old = previous._segments if previous is not None else {}
        self._leaves: list[tuple[Any, _Segment]] = []
        self._segments: dict[str, _Segment] = {}
        for leaf, _ in reader.leaf_readers():
            sid = leaf.segment().segment_id()
            seg = old.get(sid) or _Segment()
            seg.learn(leaf)
            self._segments[sid] = seg
            self._leaves.append((leaf, seg))
        self.doc_count = max(1, int(reader.doc_count()))
        self._df: dict[tuple[str, bytes], int] = {}
        self._fl: dict[str, float] = {}
        # What index/arrays.py derives from segments, keyed by (segment id, kind, ...): a segment's
        # files never change, so entries of segments still there carry over ("set": of this reader).
        self.memo: dict[Any, Any] = (
            {k: v for k, v in previous.memo.items() if k[0] in self._segments and k[1] != "set"}
            if previous is not None
            else {}
        )

    def doc_frequency(self, field: str, text: bytes) -> int:
        key = (field, text)
        df = self._df.get(key)
        if df is None:
            df = self._df[key] = sum(seg.doc_frequency(leaf, field, text) for leaf, seg in self._leaves)
        return df

    def avg_field_length(self, field: str) -> float:
        avg = self._fl.get(field)
        if avg is None:
            total = sum(seg.field_length(leaf, field) for leaf, seg in self._leaves)
            avg = self._fl[field] = total / self.doc_count
        return avg


class LiveBM25F(scoring.BM25F):  # type: ignore[misc]
    """Whoosh's BM25F (same B, K1 and formula) with `LiveStats` for idf and average lengths."""

    def __init__(self, stats: LiveStats) -> None:
        super().__init__()
        self.stats = stats

    def scorer(self, searcher: Any, fieldname: str, text: Any, qf: int = 1) -> Any:
        if not searcher.schema[fieldname].scorable:
            return scoring.WeightScorer.for_(searcher, fieldname, text)
        return _Scorer(searcher, fieldname, text, self.B, self.K1, self.stats)


class _Scorer(private.LengthScorer):
    def __init__(
        self, searcher: Any, fieldname: str, text: Any, b: float, k1: float, stats: LiveStats
    ) -> None:
        df = stats.doc_frequency(fieldname, searcher.schema[fieldname].to_bytes(text))
        self.idf = log(stats.doc_count / (df + 1)) + 1  # Whoosh's idf, over live documents
        self.avgfl = stats.avg_field_length(fieldname) or 1
        self.B = b
        self.K1 = k1
        self.setup(searcher, fieldname, text)

    def score_of(self, weight: float, length: float) -> float:
        return float(scoring.bm25(self.idf, weight, length, self.avgfl, self.B, self.K1))
