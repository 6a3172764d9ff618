"""One regression test per whoosh-reloaded 2.7.5 trap the index layer routes around.

Each test first shows the trap in Whoosh itself on the same data (so a Whoosh release that fixes
it is noticed and the workaround can go), then checks that SearchIndex gives the right answer.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from whoosh import collectors, scoring
from whoosh import query as q
from whoosh.filedb.filestore import FileStorage

from kbserver.index import SearchIndex
from kbserver.index.document import to_document
from kbserver.index.schema import make_schema

_WORDS = ["alpha", "beta", "gamma", "delta", "epsilon"]


def _corpus() -> dict[str, str]:
    rng = random.Random(1)
    docs = {}
    for i in range(300):
        folder = "notes" if i % 2 else "other"
        docs[f"{folder}/n{i}.md"] = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 30)))
    return docs


DOCS = _corpus()


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The same documents in a plain Whoosh index, searched the way Whoosh's docs say."""
    ix = FileStorage(str(tmp_path_factory.mktemp("raw"))).create_index(make_schema())
    writer = ix.writer()
    for path, text in DOCS.items():
        writer.add_document(**to_document(path, text))
    writer.commit()
    with ix.searcher(weighting=scoring.BM25F()) as searcher:
        yield searcher


@pytest.fixture(scope="module")
def ix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchIndex]:
    index = SearchIndex(tmp_path_factory.mktemp("ours") / "ix")
    index.update("v1", DOCS, [])
    yield index
    index.close()


def _matching(words: set[str], prefix: str = "") -> set[str]:
    return {p for p, text in DOCS.items() if p.startswith(prefix) and words & set(text.split())}


def test_require_skip_to_quality_asserts_a_id_ne_b_id(raw: Any, ix: SearchIndex) -> None:
    """RequireMatcher.skip_to_quality -> IntersectionMatcher._find_next: `assert a_id != b_id`."""
    words = q.Or([q.Term("body", "alpha"), q.Term("body", "beta")])
    with pytest.raises(AssertionError):
        raw.search(q.Require(words, q.Term("dirs", "notes/")), limit=1)

    expected = _matching({"alpha", "beta"}, "notes/")
    for prefix in ("notes/", "notes"):
        for limit in (1, 2, 5):
            seen: list[str] = []
            for offset in range(0, len(expected) + limit, limit):
                page = ix.search("alpha OR beta", prefix=prefix, limit=limit, offset=offset)
                assert page.total == len(expected)
                scores = [h.score for h in page.hits]
                assert scores == sorted(scores, reverse=True)
                seen.extend(h.path for h in page.hits)
            assert len(seen) == len(set(seen)) and set(seen) == expected, (prefix, limit)


def test_topcollector_without_quality_undercounts(raw: Any, ix: SearchIndex) -> None:
    """TopCollector(usequality=False) still replace()s matchers by min score and loses matches."""
    words = q.Or([q.Term("body", "alpha"), q.Term("body", "beta")])
    collector = collectors.TopCollector(limit=1, usequality=False)
    raw.search_with_collector(words, collector)
    true_total = len(list(raw.docs_for_query(words)))
    assert collector.count() < true_total

    assert ix.search("alpha OR beta", limit=1).total == len(_matching({"alpha", "beta"})) == true_total


def test_searcher_refresh_shows_a_replaced_document_twice(tmp_path: Path) -> None:
    """Searcher.refresh() reuses a segment's reader by segment id, so its new deletions are unseen."""
    (tmp_path / "raw").mkdir()
    raw = FileStorage(str(tmp_path / "raw")).create_index(make_schema())
    writer = raw.writer()
    writer.add_document(**to_document("a.md", "hello first"))
    writer.commit()
    searcher = raw.searcher(weighting=scoring.BM25F())
    writer = raw.writer()
    writer.update_document(**to_document("a.md", "hello second"))
    writer.commit(merge=False)
    refreshed = searcher.refresh()
    assert [hit["path"] for hit in refreshed.search(q.Term("body", "hello"))] == ["a.md", "a.md"]
    refreshed.close()

    ix = SearchIndex(tmp_path / "ix")
    try:
        ix.update("v1", {"a.md": "hello first"}, [])
        assert [h.path for h in ix.search("hello").hits] == ["a.md"]  # the shared searcher is open
        ix.update("v2", {"a.md": "hello second"}, [])
        result = ix.search("hello")
        assert [h.path for h in result.hits] == ["a.md"] and result.total == 1
        assert "second" in result.hits[0].snippet
    finally:
        ix.close()


def test_andnot_find_first_misses_an_excluded_first_match(tmp_path: Path) -> None:
    """AndNotMatcher._find_first looks for the excluded side only on an equal id, not a lower one."""
    docs = {"a.md": "black cat", "b.md": "birthday black cake", "c.md": "birthday party"}
    (tmp_path / "raw").mkdir()
    raw = FileStorage(str(tmp_path / "raw")).create_index(make_schema())
    writer = raw.writer()
    for path, text in docs.items():
        writer.add_document(**to_document(path, text))
    writer.commit()
    with raw.searcher() as searcher:
        wrong = q.AndNot(q.Term("body", "birthday"), q.Term("body", "black"))
        assert sorted(hit["path"] for hit in searcher.search(wrong)) == ["b.md", "c.md"]  # b.md has black

    ix = SearchIndex(tmp_path / "ix")
    try:
        ix.update("v1", docs, [])
        for query in ("birthday -black", "birthday NOT black"):
            result = ix.search(query)
            assert [h.path for h in result.hits] == ["c.md"] and result.total == 1
    finally:
        ix.close()
