"""Whoosh merge policies of SearchIndex.merge: the tail into one, or only segments of like size.

`merge_tail` folds every segment but a dominant largest one into one: after it an index has at
most two segments, so searches stay fast, but each run rewrites the whole tail. `merge_small`
merges only the smallest segments, as long as the next one is no bigger than those taken
together, keeping at most `MAX_SEGMENTS`: a short pause amid a stream of writes merges the last
few updates' segments without rewriting the tail under them (docs/performance.md, issue 37).
Once commits pause, `merge_tail` runs and leaves at most two again.
"""

from __future__ import annotations

from typing import Any

from whoosh.reading import SegmentReader

__all__ = ["MAX_SEGMENTS", "merge_small", "merge_tail"]

MAX_SEGMENTS = 6  # merge_small leaves at most this many


def _fold(writer: Any, segments: list[Any]) -> None:
    for seg in segments:
        reader = SegmentReader(writer.storage, writer.schema, seg)
        writer.add_reader(reader)
        reader.close()


def merge_tail(writer: Any, segments: list[Any]) -> list[Any]:
    """Fold every segment but a dominant largest one (half the documents or more) into one.

    Whoosh's MERGE_SMALL, run once after many unmerged one-document commits, merged only 4 of 41
    segments; this keeps the big segment (no rewrite of the bulk) and leaves at most two.
    """
    ordered = sorted(segments, key=lambda seg: seg.doc_count_all(), reverse=True)
    total = sum(seg.doc_count_all() for seg in ordered)
    keep = ordered[:1] if ordered and ordered[0].doc_count_all() * 2 >= total else []
    rest = ordered[len(keep) :]
    if len(rest) < 2:
        return segments
    _fold(writer, rest)
    return keep


def merge_small(writer: Any, segments: list[Any]) -> list[Any]:
    """Fold the smallest segments into one while the next is no bigger than them together; then
    more, smallest first, until at most MAX_SEGMENTS are left."""
    ordered = sorted(segments, key=lambda seg: seg.doc_count_all())
    take = total = 0
    for seg in ordered:
        if take >= 2 and seg.doc_count_all() > total:
            break
        take += 1
        total += seg.doc_count_all()
    while len(ordered) - take + 1 > MAX_SEGMENTS and take < len(ordered):
        take += 1
    if take < 2:
        return segments
    _fold(writer, ordered[:take])
    return ordered[take:]
