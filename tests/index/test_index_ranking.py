"""Ranking of natural-language questions: words ORed, every-word and phrase matches first."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kbserver.index import SearchIndex

DOCS = {
    "a/coffee-only.md": "coffee coffee coffee. Coffee again, coffee always, coffee.",
    "a/both.md": "In the afternoon there was a long meeting, and later some coffee was served to everyone.",
    "b/phrase.md": "She takes black coffee.",
    "b/apart.md": "The coffee was cold and the sky was black.",
    "b/run.md": "He runs along the river every Sunday.",
    "c/band.md": "The Who played in London.",
    "zh/咖啡.md": "用户喜欢喝美式咖啡，不加糖。",
    "zh/茶.md": "用户喜欢喝绿茶。",
    "zh/会议.md": "每周一上午开会，讨论上周的进度。",
}


@pytest.fixture(scope="module")
def ix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchIndex]:
    index = SearchIndex(tmp_path_factory.mktemp("rank") / "ix")
    index.update("v1", DOCS, [])
    yield index
    index.close()


def paths(ix: SearchIndex, query: str, **kw: object) -> list[str]:
    result = ix.search(query, limit=50, **kw)  # type: ignore[arg-type]
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True)
    assert result.total == len(result.hits)
    return [h.path for h in result.hits]


def test_every_word_ranks_above_a_stronger_partial_match(ix: SearchIndex) -> None:
    found = paths(ix, "coffee afternoon")
    assert found[0] == "a/both.md"
    assert "a/coffee-only.md" in found


def test_the_phrase_ranks_above_the_words_apart(ix: SearchIndex) -> None:
    found = paths(ix, "black coffee")
    assert found[:2] == ["b/phrase.md", "b/apart.md"]


def test_question_words_are_dropped(ix: SearchIndex) -> None:
    assert paths(ix, "What did they do in the afternoon?") == ["a/both.md"]
    assert paths(ix, "How often does he run?") == ["b/run.md"]  # stemmed: runs ~ run


def test_a_query_of_question_words_only_keeps_them(ix: SearchIndex) -> None:
    assert paths(ix, "The Who") == ["c/band.md"]


def test_chinese_question(ix: SearchIndex) -> None:
    assert paths(ix, "用户喜欢喝什么咖啡？")[0] == "zh/咖啡.md"
    assert paths(ix, "我们什么时候开会？")[0] == "zh/会议.md"


def test_quoted_phrase_is_required_and_the_rest_ranks(ix: SearchIndex) -> None:
    assert paths(ix, '"black coffee" sky') == ["b/phrase.md"]
    assert paths(ix, 'sky "coffee black') == []  # an unclosed quote runs to the end


def test_question_under_a_prefix_with_pages(ix: SearchIndex) -> None:
    whole = paths(ix, "Who drinks coffee, black or with sugar?")
    under = [p for p in whole if p.startswith("b/")]
    pages = [
        ix.search("Who drinks coffee, black or with sugar?", prefix="b/", limit=1, offset=i) for i in range(3)
    ]
    assert [h.path for page in pages for h in page.hits] == under
    assert all(page.total == len(under) for page in pages)


def test_pages_of_equal_scores_stay_disjoint_when_a_merge_renumbers_documents(tmp_path: Path) -> None:
    """Equal scores rank by path, not by document number: a merge between two page requests
    (the follower merges when commits pause) must not move a hit from one page to the next.
    Before the fix, ties ranked by document number and a merge reordered them."""
    index = SearchIndex(tmp_path / "ix")
    try:
        names = [f"n{i:02d}.md" for i in range(12)]
        # written in an order unlike the paths', over several segments, one file replaced
        for version, batch in enumerate((names[8:], names[:4], names[4:8]), start=1):
            index.update(f"v{version}", {p: "the same tea note\n" for p in reversed(batch)}, [])
        index.update("v4", {names[9]: "the same tea note\n"}, [])
        seen = []
        for page in range(len(names)):
            if page == len(names) // 2:
                assert index.merge()  # the documents are renumbered here
            result = index.search("tea", limit=1, offset=page)
            assert result.total == len(names)
            seen.extend(hit.path for hit in result.hits)
        assert seen == sorted(names)  # every file once, in path order
    finally:
        index.close()
