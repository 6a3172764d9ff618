"""Top-N collection that steps every match: none of Whoosh's quality-skipping collector paths.

Whoosh's `Searcher.search` collects with `TopCollector`, which skips posting blocks by quality
(`skip_to_quality`) and swaps matchers for cheaper ones once the top N fills (`replace(minscore)`).
In whoosh-reloaded 2.7.5 both are traps:

- `RequireMatcher.skip_to_quality` (a query restricted by a prefix or filter) moves its scored side
  and then calls `IntersectionMatcher._find_next`, which asserts the two sides are on different
  documents; when the skip lands on a document of the restriction it raises
  `AssertionError: assert a_id != b_id` (`matching/binary.py`). Every multi-word question under a
  prefix hit it, and so did `q=hello&prefix=notes&limit=1&offset=1`.
- With `usequality=False`, `replace(minscore)` still drops sub-matchers that cannot reach the
  current minimum score, so the collector's count undercounts; an exact count needs another pass.

Stepping the matcher document by document with `next()` (always safe: it is what every other
matcher path relies on) gives the exact top N and the exact number of matches in one pass.

Searches rank with `arrays.collect_arrays`, which evaluates the same matcher trees over numpy
arrays and returns exactly what this returns; this stays the reference (`SearchIndex.search(...,
stepping=True)`, tests/property/test_collect_arrays.py, `python -m bench.search_engine --collector`).
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from heapq import heappush, heapreplace
from typing import Any

__all__ = ["collect"]

# Scores are rounded to this many decimals before ranking. Whoosh sums a document's per-field,
# per-term scores in a tree shaped by which terms the document's segment holds, so the same
# document can score a last bit apart in two segment layouts; rounded, equal scores stay equal
# (and tie by path), unless the two sums straddle a rounding boundary (odds about 1e-7 a hit).
_DIGITS = 9


class _Reversed:
    """A string that orders backwards, so the min-heap's worst kept hit has the greatest key."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __lt__(self, other: _Reversed) -> bool:
        return self.value > other.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reversed) and self.value == other.value

    __hash__ = None  # type: ignore[assignment]


def collect(
    searcher: Any,
    query: Any,
    limit: int,
    tiers: Sequence[Set[int]] = (),
    exclude: Set[int] = frozenset(),
    key: str = "path",
) -> tuple[list[tuple[float, int]], int]:
    """The best `limit` (score, docnum) pairs and the number of all matches of `query` not in `exclude`.

    A document in more of the `tiers` (sets of document numbers) ranks above one in fewer, then
    by BM25F score (rounded, see _DIGITS; its statistics count live documents only, scoring.py),
    then by the smaller value of its `key` column (a unique, sortable field), so the order is the
    same whatever segments the index is split into: pages asked for one by one never overlap,
    even when a merge renumbers the documents between two of them. The score returned is the
    number of tiers plus the BM25F score squashed into [0, 1), so it orders hits exactly as they
    are ranked.
    """
    context = searcher.context(needs_current=True)
    heap: list[tuple[int, float, _Reversed, int]] = []  # (tiers, score, key, docnum): [0] is the worst
    total = 0
    for sub, offset in searcher.leaf_searchers():
        matcher = query.matcher(sub, context)
        keys = sub.reader().column_reader(key)
        while matcher.is_active():
            docnum = offset + matcher.id()
            if docnum in exclude:
                matcher.next()
                continue
            item = (
                sum(docnum in tier for tier in tiers),
                round(float(matcher.score()), _DIGITS),
                _Reversed(keys[matcher.id()]),
                docnum,
            )
            total += 1
            if len(heap) < limit:
                heappush(heap, item)
            elif heap and item > heap[0]:
                heapreplace(heap, item)
            matcher.next()
    heap.sort(reverse=True)
    return [
        (level + max(score, 0.0) / (1.0 + max(score, 0.0)), docnum) for level, score, _, docnum in heap
    ], total
