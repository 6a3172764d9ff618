"""kbserver.index.merging through SearchIndex.merge: a merge amid writes leaves the tail under the
new segments, the full merge after it leaves at most two, and every search finds the same files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbserver.index import SearchIndex, private
from kbserver.index.merging import MAX_SEGMENTS


def _segments(ix: SearchIndex) -> list[Any]:
    return list(private.read_toc(ix._write_index()).segments)


def test_a_small_merge_keeps_the_tail_and_a_full_one_follows(tmp_path: Path) -> None:
    ix = SearchIndex(tmp_path / "ix")
    try:
        ix.rebuild("v0", [(f"big/n{i}.md", f"walrus {i}") for i in range(40)])
        for i in range(12):  # a tail: 12 one-file segments, merged into one
            ix.update(f"t{i}", {f"tail/n{i}.md": f"walrus tail {i}"}, [])
        assert ix.merge(small=True)
        tail = {s.segment_id() for s in _segments(ix)}
        for i in range(5):  # five more, smaller than the tail together
            ix.update(f"u{i}", {f"new/n{i}.md": f"walrus new {i}"}, [])
        assert ix.merge(small=True)
        after = _segments(ix)
        assert tail <= {s.segment_id() for s in after}  # the big segment and the tail not rewritten
        assert len(after) == 3
        assert ix.merge(small=True) is False  # nothing new since
        assert ix.search("walrus", limit=100).total == 57
        assert ix.merge() is True  # a full merge is still due, with no update since
        assert len(_segments(ix)) <= 2
        assert ix.merge() is False
        result = ix.search("walrus", limit=100)
        assert result.total == 57 and result.version == "u4"
    finally:
        ix.close()


def test_a_small_merge_leaves_at_most_max_segments(tmp_path: Path) -> None:
    ix = SearchIndex(tmp_path / "ix")
    try:
        ix.rebuild("v0", [(f"big/n{i}.md", f"walrus {i}") for i in range(200)])
        size = 1
        for round_ in range(MAX_SEGMENTS + 2):  # growing updates: each merges with no other
            ix.update(f"v{round_}", {f"r{round_}/n{k}.md": f"walrus {k}" for k in range(size)}, [])
            size *= 2
        ix.merge(small=True)
        assert len(_segments(ix)) <= MAX_SEGMENTS
        assert ix.search("walrus", limit=1).total == 200 + 2 ** (MAX_SEGMENTS + 2) - 1
    finally:
        ix.close()
