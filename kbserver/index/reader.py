"""Searchers that reopen only changed segments (Whoosh's own `Searcher.refresh()` is wrong)."""

from __future__ import annotations

from typing import Any

from whoosh.reading import MultiReader, SegmentReader
from whoosh.searching import Searcher

from kbserver.index import private
from kbserver.index.scoring import LiveBM25F, LiveStats

__all__ = ["open_searcher", "refresh_searcher"]

# whoosh-reloaded 2.7.5 `refresh()` reuses a segment's reader by segment id alone, so documents
# deleted from an old segment since stay visible (a replaced file shows twice) and segments merged
# away are read again. Opening everything afresh is correct but slow with many documents.
# Here an unchanged segment's reader is reused as is, and a segment that only gained deletions gets
# a shallow copy of its reader pointing at the new deletion set, so its files are not reopened.


def _searcher(ix: Any, reader: Any, previous: LiveStats | None = None) -> Any:
    # Scores from live documents only: a merge between two pages must not reorder them (scoring.py).
    return Searcher(reader, weighting=LiveBM25F(LiveStats(reader, previous)), fromindex=ix)


def open_searcher(ix: Any) -> Any:
    """A searcher over the latest commit of `ix`, opened from scratch."""
    return _searcher(ix, ix.reader())


def refresh_searcher(ix: Any, old: Any) -> Any:
    """A searcher over the latest commit of `ix` sharing `old`'s open segments; `old` is unusable after.

    Segments that are gone are closed. Call it only when no other thread is using `old`.
    """
    if old.up_to_date():
        return old
    toc = private.read_toc(ix)
    previous = {r.segment().segment_id(): r for r, _ in old.reader().leaf_readers()}
    readers = []
    for segment in toc.segments:
        prior = previous.pop(segment.segment_id(), None)
        if prior is None:
            readers.append(SegmentReader(ix.storage, toc.schema, segment, generation=toc.generation))
        else:
            readers.append(private.rebind(prior, segment, toc.generation))
    for gone in previous.values():
        gone.close()
    reader = readers[0] if len(readers) == 1 else MultiReader(readers, generation=toc.generation)
    return _searcher(ix, reader, old.weighting.stats)
