"""kbserver.index.codec: rare terms' posting blocks are stored plain, common terms' compressed, and
the index reads back the same through Whoosh's own W3 reader and through SearchIndex."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from whoosh import index as whoosh_index
from whoosh.codec.whoosh3 import W3Codec, W3LeafMatcher

from kbserver.index import SearchIndex, private
from kbserver.index.codec import CODEC, COMPRESS_FROM
from kbserver.index.schema import make_schema

COMMON = 3 * COMPRESS_FROM  # notes holding "kiwi": a block long enough to compress


def _note(i: int) -> str:
    rare = "".join(chr(0x7000 + 3 * i + k) for k in range(3))  # two bigrams this note alone has
    return f"kiwi note {i} {rare}。\n"


@pytest.fixture
def ix(tmp_path: Path) -> Iterator[Any]:
    index = whoosh_index.create_in(str(tmp_path), make_schema())
    with index.writer(codec=CODEC) as w:
        for i in range(COMMON):
            w.add_document(path=f"n{i}.md", body=_note(i))
    yield index
    index.close()


def _matcher(index: Any, text: str) -> Any:
    ((leaf, _),) = index.reader().leaf_readers()  # one segment
    return private.raw_matcher(leaf, "body", text.encode())


def test_a_rare_terms_block_is_plain_and_a_common_ones_compressed(ix: Any) -> None:
    rare = _matcher(ix, chr(0x7000) + chr(0x7001))
    common = _matcher(ix, "kiwi")
    assert type(rare) is W3LeafMatcher and type(common) is W3LeafMatcher
    assert rare._compression == 0
    assert common._compression > 0
    assert list(rare.all_ids()) == [0]
    assert list(common.all_ids()) == list(range(COMMON))


def test_segments_name_the_stock_codec(ix: Any) -> None:
    (segment,) = private.read_toc(ix).segments
    assert type(segment.codec()) is W3Codec


def test_search_finds_rare_and_common_terms_after_updates_and_merges(tmp_path: Path) -> None:
    index = SearchIndex(tmp_path / "ix")
    try:
        index.rebuild("v0", [(f"a/n{i}.md", _note(i)) for i in range(COMMON)])
        for v in range(1, 4):  # new segments, then one merge of them
            index.update(f"v{v}", {f"b/n{v}.md": _note(100 + v)}, [])
        assert index.merge()
        rare = "".join(chr(0x7000 + 3 * 102 + k) for k in range(3))
        assert [h.path for h in index.search(rare).hits] == ["b/n2.md"]
        found = index.search("kiwi", limit=100)
        assert found.total == COMMON + 3
    finally:
        index.close()
