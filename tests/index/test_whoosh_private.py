"""kbserver.index.private against the installed Whoosh: each private accessor agrees with the public API."""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from whoosh import index as whoosh_index
from whoosh import query as q
from whoosh.codec.whoosh3 import W3LeafMatcher
from whoosh.matching import FilterMatcher
from whoosh.util.numeric import byte_to_length

from kbserver.index import private
from kbserver.index.schema import make_schema

DOCS = 700  # enough postings of "kiwi" for several blocks
DELETED = {3, 150, 299, 600}


@pytest.fixture
def ix(tmp_path: Path) -> Iterator[Any]:
    index = whoosh_index.create_in(str(tmp_path), make_schema())
    with index.writer() as w:
        for i in range(DOCS):
            body = "kiwi " * (1 + i % 4) + f"word{i % 7} " * (i % 3)
            w.add_document(path=f"n{i}.md", body=body)
    yield index
    index.close()


def _delete(index: Any, docs: set[int]) -> None:
    with index.writer() as w:
        for d in docs:
            w.delete_document(d)


def _leaf(reader: Any) -> Any:
    leaves = [r for r, _ in reader.leaf_readers()]
    assert len(leaves) == 1
    return leaves[0]


def test_the_installed_whoosh_is_the_tested_and_pinned_one() -> None:
    assert importlib.metadata.version("whoosh-reloaded") == private.TESTED
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    pins = re.findall(r'"whoosh-reloaded([^"]*)"', pyproject)
    assert pins == [f"=={private.TESTED}"], pins


def test_raw_blocks_decode_to_the_public_postings_deleted_included(ix: Any) -> None:
    _delete(ix, DELETED)
    with ix.reader() as reader:
        leaf = _leaf(reader)
        stepped = private.raw_matcher(leaf, "body", b"kiwi")
        public_ids, public_weights = [], []
        while stepped.is_active():
            public_ids.append(stepped.id())
            public_weights.append(stepped.weight())
            stepped.next()
        assert public_ids == list(range(DOCS))  # no deletion filter: the deleted are there
        m = private.raw_matcher(leaf, "body", b"kiwi")
        assert type(m) is W3LeafMatcher and not private.byte_ids(m)
        assert private.leaf_term(m) == ("body", b"kiwi")
        ids: list[int] = []
        weights: list[float] = []
        blocks = 0
        while m.is_active():
            assert private.leaf_position(m) == 0
            raw, w = private.block_ids_and_weights(m)
            block = list(private.block_ids(m))
            decoded = [raw[0]]  # each block's first id is absolute, then deltas
            for delta in raw[1:]:
                decoded.append(decoded[-1] + delta)
            assert decoded == block
            assert private.block_max_id(m) == block[-1] == m.block_max_id()
            weights.extend(
                [1.0] * len(block) if w is None else [w] * len(block) if isinstance(w, float) else w
            )
            ids.extend(block)
            blocks += 1
            private.next_block(m)
        assert blocks > 1
        assert ids == public_ids and weights == pytest.approx(public_weights)


def test_leaf_position_follows_next(ix: Any) -> None:
    with ix.reader() as reader:
        m = private.raw_matcher(_leaf(reader), "body", b"kiwi")
        assert private.leaf_position(m) == 0
        m.next()
        m.next()
        assert private.leaf_position(m) == 2 and m.id() == 2


def test_length_column_bytes_are_the_public_field_lengths(ix: Any) -> None:
    with ix.reader() as reader:
        leaf = _leaf(reader)
        column = private.length_column(leaf, "body")
        assert column is not None
        raw = private.column_bytes(column)
        assert len(raw) == leaf.doc_count_all() == DOCS
        assert [byte_to_length(b) for b in raw] == [leaf.doc_field_length(d, "body") for d in range(DOCS)]
        assert private.length_column(leaf, "nosuchfield") is None


def test_filter_set_and_null_query() -> None:
    matcher = FilterMatcher(q.NullQuery.matcher(None), frozenset({1, 2}), exclude=True)
    assert private.filter_set(matcher) == (frozenset({1, 2}), True)
    assert private.filter_set(FilterMatcher(q.NullQuery.matcher(None), {7}))[1] is False
    assert private.is_null_query(q.NullQuery) and private.is_null_query(q.Or([]).normalize())
    assert not private.is_null_query(q.Term("body", "kiwi"))


def test_toc_and_rebind_see_the_newer_deletions(ix: Any) -> None:
    old = ix.reader()
    try:
        _delete(ix, DELETED)
        toc = private.read_toc(ix)
        assert toc.generation == ix.latest_generation()
        fresh = ix.reader()
        try:
            assert [s.segment_id() for s in toc.segments] == [
                r.segment().segment_id() for r, _ in fresh.leaf_readers()
            ]
            segment = toc.segments[0]
            view = private.rebind(_leaf(old), segment, toc.generation)
            assert set(view.deleted_docs_set) == set(_leaf(fresh).deleted_docs_set) == DELETED
            assert view.generation() == toc.generation and view.doc_count() == DOCS - len(DELETED)
            assert not _leaf(old).has_deletions()  # the old reader is left as it was
        finally:
            fresh.close()
    finally:
        old.close()
