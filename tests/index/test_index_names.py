"""Whoosh's segment and temp-file names never repeat when something reseeds the global `random`.

Whoosh draws those names from the global `random`; Hypothesis reseeds it for every example, so
before `kbserver.index.private.install` the second update after a reseed picked the first one's segment id
and failed in `create_compound_file` (or overwrote a live segment).
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import whoosh.codec.base
import whoosh.filedb.compound
import whoosh.filedb.filestore
import whoosh.multiproc
import whoosh.util
import whoosh.writing
from hypothesis import given, settings
from hypothesis import strategies as st

from kbserver.index import SearchIndex
from kbserver.index.private import random_name


def _segment_ids(ix: SearchIndex) -> list[str]:
    with ix._read_lock:
        return [leaf.segment().segment_id() for leaf, _ in ix._searcher().reader().leaf_readers()]


def test_every_whoosh_module_uses_our_names() -> None:
    for module in (
        whoosh.util,
        whoosh.codec.base,
        whoosh.filedb.compound,
        whoosh.filedb.filestore,
        whoosh.multiproc,
        whoosh.writing,
    ):
        assert module.random_name is random_name, module.__name__
    random.seed(7)
    first = [random_name(16) for _ in range(3)]
    random.seed(7)
    again = [random_name(16) for _ in range(3)]
    assert len(set(first + again)) == 6
    assert all(len(n) == 16 and set(n) <= set(whoosh.util.IDCHARS) for n in first)


def test_updates_after_reseeding_random_keep_every_segment(tmp_path: Path) -> None:
    with SearchIndex(tmp_path / "ix") as ix:
        for i in range(6):
            random.seed(0)  # what Hypothesis does before every example
            ix.update(f"v{i}", {f"n{i}.md": f"word{i} common"}, [])
        ids = _segment_ids(ix)
        assert len(ids) == len(set(ids)) >= 6
        assert sorted(h.path for h in ix.search("common", limit=20).hits) == [f"n{i}.md" for i in range(6)]
        random.seed(0)
        assert ix.merge()
        assert ix.indexed_version() == "v5"
    with SearchIndex(tmp_path / "ix") as again:
        assert again.search("common", limit=20).total == 6
        assert [h.path for h in again.search("word3").hits] == ["n3.md"]


def test_one_index_across_hypothesis_examples() -> None:
    with tempfile.TemporaryDirectory() as tmp, SearchIndex(Path(tmp) / "ix") as ix:
        written: list[str] = []

        @settings(max_examples=8, database=None, deadline=None)
        @given(st.integers(min_value=0, max_value=10**6))
        def update(n: int) -> None:
            path = f"n{len(written)}.md"
            ix.update(f"v{len(written)}", {path: f"common w{n}"}, [])
            written.append(path)

        update()
        assert len(written) >= 2
        assert sorted(h.path for h in ix.search("common", limit=50).hits) == sorted(written)
        ids = _segment_ids(ix)
        assert len(ids) == len(set(ids))
