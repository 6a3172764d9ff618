"""Property: no query text, prefix or filter makes search raise, and totals match the hits."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbserver.index import SearchIndex

_WORDS = st.sampled_from(
    ['"', "(", ")", "*", "-", "AND", "OR", "NOT", ":", "path:", "coffee", "咖啡", "咖", "\\", " "]
)
_SURROGATES = st.text(
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, categories=["Cs"]), max_size=3
)
_QUERIES = st.one_of(
    _SURROGATES,
    st.tuples(st.text(max_size=10), _SURROGATES).map("".join),
    st.text(max_size=60),
    st.lists(_WORDS, max_size=8).map("".join),
    st.lists(_WORDS).map(" ".join),
)


@pytest.fixture(scope="module")
def ix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchIndex]:
    index = SearchIndex(Path(tmp_path_factory.mktemp("fuzz")) / "ix")
    index.update(
        "v1",
        {
            "a.md": '---\ntitle: Coffee\ntags: [x]\n---\ncoffee 咖啡 (parens) "quotes" AND OR NOT path: *',
            "b/c.md": "用户喜欢喝美式咖啡 tea",
            "d.md": "plain words only",
        },
        [],
    )
    yield index
    index.close()


@settings(max_examples=300, deadline=None)
@given(query=_QUERIES, limit=st.integers(-1, 5), offset=st.integers(-1, 5))
def test_any_query_text_never_raises(ix: SearchIndex, query: str, limit: int, offset: int) -> None:
    result = ix.search(query, limit=limit, offset=offset)
    assert 0 <= len(result.hits) <= max(limit, 0)
    assert result.total >= len(result.hits)
    assert result.version == "v1"


@settings(max_examples=100, deadline=None)
@given(
    query=_QUERIES,
    prefix=st.one_of(st.none(), st.text(max_size=8), _SURROGATES),
    key=st.text(max_size=8),
    value=st.text(max_size=8),
)
def test_any_prefix_and_filter_never_raise(
    ix: SearchIndex, query: str, prefix: str | None, key: str, value: str
) -> None:
    ix.search(query, prefix=prefix, filters={key: value})
