"""Top-N collection over numpy arrays: what `collect.collect` finds, without stepping matches in Python.

`collect` steps the matcher tree of a query document by document and asks every match its score:
for a question (its words ORed over several fields) at 10k memories that is ~80 % of a search.
Here the same matcher tree Whoosh builds for each segment is evaluated as a whole, node by node:

- a term's postings (`W3LeafMatcher`) are read block by block into arrays of document numbers and
  weights, and scored with the searcher's BM25F (`scoring._Scorer`: same idf, average length, B
  and K1) over the field lengths Whoosh scores with, in the same operations in the same order as
  `whoosh.scoring.bm25`, so every score is the same float;
- the inner nodes combine their children exactly as their `score()` does: a union adds the two
  sides' scores where both match (`a + b`, in that order), an intersection adds them, a require
  keeps its scored side, a boost multiplies, a deletion filter drops documents. The tree has the
  shape Whoosh gives it in that segment, so the sums are the same floats too;
- any other matcher (phrases, one-posting terms kept inline, prefix expansions) is stepped as
  `collect` would, and its matches join the arrays.

So the scores, the hits, their order and the total are those of `collect` (tested against it), and
only the few documents that can reach the page are ranked in Python: those whose tier count and
score are at least those of the `limit`-th best, less a margin wider than the rounding to
`collect._DIGITS` decimals can close (rounding is monotonic, and two scores more than 1e-9 apart
never round to the same value).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from whoosh import query as q
from whoosh.codec.whoosh3 import W3LeafMatcher
from whoosh.matching import FilterMatcher, IntersectionMatcher, RequireMatcher, UnionMatcher, WrappingMatcher
from whoosh.matching.mcore import NullMatcherClass
from whoosh.util.numeric import byte_to_length

from kbserver.index import private
from kbserver.index.collect import _DIGITS
from kbserver.index.scoring import LiveStats, _Scorer

__all__ = ["collect_arrays", "doc_ids"]

Ids = npt.NDArray[np.int64]
Scores = npt.NDArray[np.float64]
Weights = npt.NDArray[np.float32]

_EMPTY_IDS: Ids = np.zeros(0, dtype=np.int64)
_EMPTY_SCORES: Scores = np.zeros(0, dtype=np.float64)
_LENGTHS: Scores = np.array([byte_to_length(b) for b in range(256)], dtype=np.float64)
# Wider than the 1e-9 step of rounding to _DIGITS decimals (see the module docstring).
_MARGIN = 2.0 * 10.0**-_DIGITS


_SIZE = ("", "postings")  # memo key: the number of postings the memo holds
_POSTINGS_PER_DOC = 16  # postings kept in a searcher's memo: at most this many per document


class _Leaf:
    """One segment's searcher, with what is derived from its files (field lengths, postings, the key
    column) kept in the searcher's memo for the next searches (scoring.LiveStats.memo)."""

    def __init__(self, searcher: Any, memo: dict[Any, Any], budget: int) -> None:
        self.reader = searcher.reader()
        self._memo = memo
        self._budget = budget
        self._sid = self.reader.segment().segment_id()

    def lengths(self, field: str) -> Scores | None:
        """The length of `field` Whoosh scores each document with (None: no length column, 1)."""
        key = (self._sid, "lengths", field)
        if key not in self._memo:
            column = private.length_column(self.reader, field)
            if column is None:
                self._memo[key] = None
            else:
                raw = private.column_bytes(column)  # one byte per document
                self._memo[key] = _LENGTHS[np.frombuffer(raw, dtype=np.uint8)]
        value: Scores | None = self._memo[key]
        return value

    def column(self, name: str) -> Any:
        """The reader of column `name` (opening one reads all its offsets: ~2 ms at 10k documents)."""
        key = (self._sid, "column", name)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self.reader.column_reader(name)
        return found

    def members(self, ids: Any) -> Ids:
        """A set of document numbers (a deletion filter's) as a sorted array, once per searcher."""
        key = (self._sid, "set", id(ids))
        found = self._memo.get(key)
        if found is None or found[0] is not ids:
            found = self._memo[key] = (ids, np.array(sorted(ids), dtype=np.int64))
        array: Ids = found[1]
        return array

    def postings(self, field: str, text: bytes) -> _Postings:
        """Every posting of a term in this segment, deleted documents included."""
        key = (self._sid, "postings", field, text)
        found = self._memo.get(key)
        if found is None:
            found = _read_postings(private.raw_matcher(self.reader, field, text))
            held = self._memo.get(_SIZE)
            if held is None:
                held = sum(len(v[0]) for k, v in self._memo.items() if k[1] == "postings")
            if held + len(found[0]) > self._budget:  # a bound on memory, not a cache policy
                for k in [k for k in self._memo if k[1] == "postings"]:
                    del self._memo[k]
                held = 0
            self._memo[key] = found
            self._memo[_SIZE] = held + len(found[0])
        return found


class _Postings(NamedTuple):
    ids: Ids  # document numbers
    weights: Weights  # as W3LeafMatcher.weight() gives them (32-bit floats)
    maxids: Ids  # per block: its last document number
    starts: Ids  # per block: the index of its first posting


def _read_postings(m: Any) -> _Postings:
    """The postings of an unstepped term matcher, decoded as W3LeafMatcher's _read_ids and
    _read_weights do (a term of one posting is kept inline: a ListMatcher, stepped)."""
    if type(m) is not W3LeafMatcher or private.byte_ids(m):
        stepped: list[int] = []
        stepped_weights: list[float] = []
        while m.is_active():
            stepped.append(m.id())
            stepped_weights.append(m.weight())
            m.next()
        one = np.array(stepped, dtype=np.int64)
        weighed = np.array(stepped_weights, dtype=np.float32)
        return _Postings(one, weighed, one[-1:], np.zeros(min(1, len(one)), dtype=np.int64))
    deltas: list[Any] = []
    starts: list[int] = []
    maxids: list[int] = []
    weights: list[Weights] = []
    count = 0
    while m.is_active():
        raw, w = private.block_ids_and_weights(m)
        starts.append(count)
        deltas.append(raw)
        count += len(raw)
        maxids.append(private.block_max_id(m))
        if w is None:
            weights.append(np.ones(len(raw), dtype=np.float32))
        elif isinstance(w, float):  # one weight for the whole block
            weights.append(np.full(len(raw), w, dtype=np.float32))
        else:
            weights.append(np.asarray(w, dtype=np.float32))  # an array("f"): 32-bit floats
        private.next_block(m)
    if not deltas:
        return _Postings(_EMPTY_IDS, np.zeros(0, dtype=np.float32), _EMPTY_IDS, _EMPTY_IDS)
    d = np.concatenate([np.asarray(x, dtype=np.int64) for x in deltas])
    first = np.array(starts, dtype=np.int64)
    last = np.array(maxids, dtype=np.int64)
    if len(starts) > 1:  # each block's first id is absolute: make it a delta from the previous block's last
        d[first[1:]] -= last[:-1]
    return _Postings(np.cumsum(d), np.concatenate(weights), last, first)


def _step(m: Any, scores: bool) -> tuple[Ids, Scores | None]:
    """The remaining matches of any matcher, stepped (what `collect` does for the whole tree)."""
    ids: list[int] = []
    found: list[float] = []
    while m.is_active():
        ids.append(m.id())
        if scores:
            found.append(float(m.score()))
        m.next()
    return np.array(ids, dtype=np.int64), (np.array(found, dtype=np.float64) if scores else None)


def _postings(m: Any, leaf: _Leaf, scores: bool) -> tuple[Ids, Scores | None]:
    """A term's remaining postings (from where `m` is), scored like `_Scorer.score` (bm25 per posting)."""
    scorer = m.scorer
    if private.byte_ids(m) or (scores and type(scorer) is not _Scorer):
        return _step(m, scores)
    field, text = private.leaf_term(m)
    every, tf, maxids, starts = leaf.postings(field, text)
    # Where `m` is, from its block's last id (unique per block) without decoding the block.
    start = int(starts[int(np.searchsorted(maxids, private.block_max_id(m)))]) + private.leaf_position(m)
    ids = every[start:]
    if not scores:
        return ids, None
    lengths = leaf.lengths(field)
    fl = np.ones(len(ids), dtype=np.float64) if lengths is None else lengths[ids]
    weight = tf[start:].astype(np.float64)
    idf, avgfl, b, k1 = scorer.idf, scorer.avgfl, scorer.B, scorer.K1
    # whoosh.scoring.bm25 operation for operation, so each score is the same float:
    # idf * ((tf * (K1 + 1)) / (tf + K1 * ((1 - B) + B * fl / avgfl)))
    values: Scores = idf * ((weight * (k1 + 1)) / (weight + k1 * ((1 - b) + b * fl / avgfl)))
    return ids, values


def _walk(m: Any, leaf: _Leaf, scores: bool) -> tuple[Ids, Scores | None]:
    """The remaining matches of matcher `m` (sorted document numbers of its segment) and their scores,
    each the float `m.score()` would give on that document."""
    kind = type(m)
    if kind is NullMatcherClass or not m.is_active():
        return _EMPTY_IDS, (_EMPTY_SCORES if scores else None)
    if kind is W3LeafMatcher:
        return _postings(m, leaf, scores)
    if kind is WrappingMatcher or kind is FilterMatcher:
        ids, values = _walk(m.child, leaf, scores)
        if kind is FilterMatcher:
            members, exclude = private.filter_set(m)
            keep = np.isin(ids, leaf.members(members), assume_unique=True, invert=exclude)
            ids = ids[keep]
            values = values[keep] if values is not None else None
        if values is not None and m.boost != 1.0:
            values = values * m.boost
        return ids, values
    if kind is UnionMatcher:
        ia, sa = _walk(m.a, leaf, scores)
        ib, sb = _walk(m.b, leaf, scores)
        if not len(ib):
            return ia, sa
        if not len(ia):
            return ib, sb
        ids = np.union1d(ia, ib)
        if sa is None or sb is None:
            return ids, None
        values = np.zeros(len(ids), dtype=np.float64)
        values[np.searchsorted(ids, ia)] = sa
        values[np.searchsorted(ids, ib)] += sb  # a + b where both match, as UnionMatcher.score adds them
        return ids, values
    if kind is IntersectionMatcher or kind is RequireMatcher:
        ia, sa = _walk(m.a, leaf, scores)
        ib, sb = _walk(m.b, leaf, scores and kind is IntersectionMatcher)
        ids, at_a, at_b = np.intersect1d(ia, ib, assume_unique=True, return_indices=True)
        if sa is None:
            return ids, None
        if kind is RequireMatcher:
            return ids, sa[at_a]
        assert sb is not None
        return ids, sa[at_a] + sb[at_b]
    return _step(m, scores)


def _live(leaf: _Leaf, ids: Ids) -> Ids:
    reader = leaf.reader
    if not reader.has_deletions():
        return ids
    return ids[np.isin(ids, leaf.members(reader.deleted_docs_set), assume_unique=True, invert=True)]


def _query_ids(query: Any, sub: Any, leaf: _Leaf, context: Any) -> Ids:
    """The live documents of one segment matching `query`: terms from their postings, and/or/require
    as set operations; any other query through its Whoosh matcher (as `docs_for_query` finds them)."""
    kind = type(query)
    if kind is q.Term:
        field = query.fieldname
        schema = leaf.reader.schema
        if field not in schema:
            return _EMPTY_IDS
        try:
            text = schema[field].to_bytes(query.text)
        except ValueError:
            return _EMPTY_IDS
        if (field, text) not in leaf.reader:
            return _EMPTY_IDS
        return _live(leaf, leaf.postings(field, text).ids)
    if private.is_null_query(query):
        return _EMPTY_IDS
    if kind in (q.Or, q.DefaultOr) and not query.minmatch and query.subqueries:
        parts = [_query_ids(sub_query, sub, leaf, context) for sub_query in query.subqueries]
        return functools.reduce(np.union1d, parts)
    if kind in (q.And, q.Require) and (kind is q.Require or query.subqueries):
        parts = [_query_ids(sub_query, sub, leaf, context) for sub_query in query.children()]
        return functools.reduce(lambda a, b: np.intersect1d(a, b, assume_unique=True), parts)
    return _walk(query.matcher(sub, context), leaf, False)[0]


def _memo(searcher: Any) -> dict[Any, Any]:
    stats = getattr(searcher.weighting, "stats", None)
    return stats.memo if isinstance(stats, LiveStats) else {}


def _matches(searcher: Any, query: Any, within: Any | None) -> list[tuple[int, Ids, Scores]]:
    """Per segment: its index, the global numbers of the documents matching `query` (and `within`,
    which does not score: `Require(query, within)`), their scores."""
    context = searcher.context(needs_current=True)
    memo = _memo(searcher)
    budget = _POSTINGS_PER_DOC * max(1, searcher.doc_count_all())
    found = []
    for i, (sub, offset) in enumerate(searcher.leaf_searchers()):
        leaf = _Leaf(sub, memo, budget)
        if within is not None:
            allowed = _query_ids(within, sub, leaf, context)
            if not len(allowed):
                continue
        ids, values = _walk(query.matcher(sub, context), leaf, True)
        assert values is not None
        if within is not None and len(ids):
            keep = np.isin(ids, allowed, assume_unique=True)
            ids, values = ids[keep], values[keep]
        if len(ids):
            found.append((i, ids + offset, values))
    return found


def doc_ids(searcher: Any, query: Any) -> Ids:
    """The sorted numbers of the live documents matching `query` (`docs_for_query`, as an array)."""
    context = searcher.context(needs_current=True)
    memo = _memo(searcher)
    budget = _POSTINGS_PER_DOC * max(1, searcher.doc_count_all())
    parts = [
        _query_ids(query, sub, _Leaf(sub, memo, budget), context) + offset
        for sub, offset in searcher.leaf_searchers()
    ]
    return np.concatenate(parts) if parts else _EMPTY_IDS


def collect_arrays(
    searcher: Any,
    query: Any,
    limit: int,
    tiers: Sequence[Any] = (),
    exclude: Any | None = None,
    key: str = "path",
    within: Any | None = None,
) -> tuple[list[tuple[float, int, Any]], int]:
    """What `collect.collect(searcher, Require(query, within) or query, limit, tier sets, excluded
    set, key)` returns, with `tiers` and `exclude` given as queries (their document sets are found
    here, as arrays), and each hit's `key` value after its document number.

    Each tier lies within the one before (query.py): the first empty one ends them.
    """
    found = _matches(searcher, query, within)
    if not found:
        return [], 0
    segment = np.concatenate([np.full(len(ids), i, dtype=np.int64) for i, ids, _ in found])
    ids = np.concatenate([ids for _, ids, _ in found])
    values = np.concatenate([v for _, _, v in found])
    if exclude is not None:
        keep = ~np.isin(ids, doc_ids(searcher, exclude), assume_unique=True)
        ids, values, segment = ids[keep], values[keep], segment[keep]
    total = len(ids)
    if limit <= 0 or total == 0:
        return [], total
    level = np.zeros(total, dtype=np.int64)
    for tier in tiers:
        members = doc_ids(searcher, tier)
        if not len(members):
            break
        level += np.isin(ids, members, assume_unique=True)
    if total > limit:
        # The limit-th best (level, score): the lowest level reached, and the score needed there.
        above = 0
        for lowest in range(int(level.max()), -1, -1):
            at = values[level == lowest]
            if above + len(at) >= limit:
                break
            above += len(at)
        need = limit - above
        kth = float(np.partition(at, len(at) - need)[len(at) - need])
        near = (level > lowest) | ((level == lowest) & (values >= kth - _MARGIN - abs(kth) * 1e-12))
        (chosen,) = np.nonzero(near)
    else:
        chosen = np.arange(total)
    leaves = searcher.leaf_searchers()
    memo = _memo(searcher)
    columns: dict[int, Any] = {}
    items = []
    for j in chosen.tolist():
        seg = int(segment[j])
        column = columns.get(seg)
        if column is None:
            column = columns[seg] = _Leaf(leaves[seg][0], memo, 0).column(key)
        docnum = int(ids[j])
        items.append(
            (-int(level[j]), -round(float(values[j]), _DIGITS), column[docnum - leaves[seg][1]], docnum)
        )
    # collect's order: more tiers, then the higher rounded score, then the smaller key (unique).
    items.sort()
    return [
        (-lvl + max(-neg, 0.0) / (1.0 + max(-neg, 0.0)), docnum, value)
        for lvl, neg, value, docnum in items[:limit]
    ], total
