"""Search: ranking, stemming, CJK and mixed queries, fields, filters, prefix, pages, snippets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kbserver.index import Hit, SearchIndex

DOCS = {
    "notes/coffee-prefs.md": (
        "---\ntitle: Coffee preferences\ntags: [drinks, morning]\ncategory: prefs\nagent_id: bob\n---\n"
        "用户喜欢喝美式咖啡。The user prefers black coffee in the morning.\n"
    ),
    "notes/tea.md": (
        "---\ntags: drinks\ncategory: prefs\nagent_id: alice\n---\n"
        "Green tea in the afternoon, sometimes coffee.\n"
    ),
    "notes/deep/running.md": "He was running every morning before the meetings.\n",
    "git/commits.md": (
        "---\ncategory: work\nagent_id: bob\n---\n使用中文编写 Git 提交信息。Commit messages in Chinese.\n"
    ),
    "ja/coffee.md": "ユーザーはコーヒーが好きです。\n",
    "ko/coffee.md": "사용자는 커피를 좋아한다.\n",
    "日记/咖啡馆.md": "去了一家新的咖啡馆。\n",
    "letters.md": "我 like 茶 and programming in C.\n",
    "long.md": "filler " * 300 + "the needle is here " + "filler " * 300,
}


@pytest.fixture
def ix(tmp_path: Path) -> Iterator[SearchIndex]:
    index = SearchIndex(tmp_path / "ix")
    index.update("v1", DOCS, [])
    yield index
    index.close()


def paths(ix: SearchIndex, query: str, **kw: object) -> list[str]:
    return [h.path for h in ix.search(query, limit=50, **kw).hits]  # type: ignore[arg-type]


def test_stemming_matches_other_forms(ix: SearchIndex) -> None:
    assert paths(ix, "runs") == ["notes/deep/running.md"]
    assert paths(ix, "preferring") == ["notes/coffee-prefs.md"]


def test_title_match_ranks_above_body_match(ix: SearchIndex) -> None:
    hits = paths(ix, "coffee")
    assert hits[0] == "notes/coffee-prefs.md"
    assert set(hits) >= {"notes/coffee-prefs.md", "notes/tea.md", "ja/coffee.md", "ko/coffee.md"}


def test_words_are_ored_and_files_with_every_word_rank_first(ix: SearchIndex) -> None:
    found = paths(ix, "coffee afternoon")
    assert found[0] == "notes/tea.md"
    assert set(found) == set(paths(ix, "coffee")) | set(paths(ix, "afternoon"))


def test_any_word_matches(ix: SearchIndex) -> None:
    assert set(paths(ix, "afternoon meetings")) == {"notes/tea.md", "notes/deep/running.md"}


def test_explicit_or_and_exclusion(ix: SearchIndex) -> None:
    assert set(paths(ix, "afternoon OR meetings")) == {"notes/tea.md", "notes/deep/running.md"}
    assert "notes/tea.md" not in paths(ix, "coffee -tea")
    assert "notes/tea.md" not in paths(ix, "coffee NOT tea")
    assert paths(ix, "-coffee") == []


def test_quoted_phrase(ix: SearchIndex) -> None:
    assert paths(ix, '"black coffee"') == ["notes/coffee-prefs.md"]
    assert paths(ix, '"coffee black"') == []


def test_chinese_words_are_found_inside_sentences(ix: SearchIndex) -> None:
    assert set(paths(ix, "咖啡")) == {"notes/coffee-prefs.md", "日记/咖啡馆.md"}
    # A CJK run is its bigrams ORed; the file holding the whole run (the phrase) ranks first.
    assert paths(ix, "美式咖啡")[0] == "notes/coffee-prefs.md"
    assert paths(ix, "提交信息") == ["git/commits.md"]
    assert paths(ix, "咖啡馆")[0] == "日记/咖啡馆.md"


def test_chinese_run_is_a_phrase_with_or_fallback(ix: SearchIndex) -> None:
    assert paths(ix, "喝咖") == []  # a bigram that is in no text
    # 喜欢 and 咖啡 are both in the note but not adjacent: the phrase fails, the OR of bigrams finds it.
    assert paths(ix, "喜欢咖啡")[0] == "notes/coffee-prefs.md"
    assert paths(ix, '"喜欢咖啡"') == []  # quoted: the phrase is kept


def test_mixed_chinese_english_queries(ix: SearchIndex) -> None:
    assert paths(ix, "Git 提交信息") == ["git/commits.md"]
    assert paths(ix, "中文 commit") == ["git/commits.md"]
    assert paths(ix, "咖啡 black")[0] == "notes/coffee-prefs.md"


def test_japanese_and_korean(ix: SearchIndex) -> None:
    assert paths(ix, "コーヒー") == ["ja/coffee.md"]
    assert paths(ix, "好き") == ["ja/coffee.md"]
    assert paths(ix, "커피") == ["ko/coffee.md"]
    assert paths(ix, "사용자") == ["ko/coffee.md"]


def test_single_cjk_character(ix: SearchIndex) -> None:
    assert set(paths(ix, "咖")) == {"notes/coffee-prefs.md", "日记/咖啡馆.md"}
    assert set(paths(ix, "啡")) == {"notes/coffee-prefs.md", "日记/咖啡馆.md"}  # last of its run
    assert paths(ix, "茶") == ["letters.md"]
    assert paths(ix, "我") == ["letters.md"]


def test_path_is_searchable(ix: SearchIndex) -> None:
    assert "notes/coffee-prefs.md" in paths(ix, "prefs")
    assert paths(ix, "日记") == ["日记/咖啡馆.md"]


def test_single_letter_words(ix: SearchIndex) -> None:
    assert paths(ix, "C programming") == ["letters.md"]


def test_front_matter_fields_are_returned_and_searchable(ix: SearchIndex) -> None:
    hit = ix.search("美式咖啡").hits[0]
    assert hit.fields == {
        "title": "Coffee preferences",
        "tags": "drinks, morning",
        "category": "prefs",
        "agent_id": "bob",
    }
    assert set(paths(ix, "drinks")) == {"notes/coffee-prefs.md", "notes/tea.md"}
    assert "git/commits.md" in paths(ix, "work")
    assert ix.search("agent_id").total == 0  # field names are not text


def test_filters_are_exact_matches(ix: SearchIndex) -> None:
    assert paths(ix, "coffee", filters={"agent_id": "bob"}) == ["notes/coffee-prefs.md"]
    assert paths(ix, "coffee", filters={"agent_id": "Bob"}) == []
    assert paths(ix, "coffee", filters={"category": "prefs", "tags": "drinks"}) != []
    assert set(paths(ix, "", filters={"tags": "drinks"})) == {"notes/coffee-prefs.md", "notes/tea.md"}
    assert paths(ix, "", filters={"agent_id": "bob"}) == ["git/commits.md", "notes/coffee-prefs.md"]
    assert paths(ix, "", filters={"no such key": "x"}) == []
    assert paths(ix, "", filters={"agent_id": ""}) == []


def test_listing_has_score_zero_and_path_order(ix: SearchIndex) -> None:
    result = ix.search("  ", filters={"category": "prefs"})
    assert [h.path for h in result.hits] == ["notes/coffee-prefs.md", "notes/tea.md"]
    assert {h.score for h in result.hits} == {0.0}
    assert result.hits[1].snippet.startswith("Green tea in the afternoon")
    everything = ix.search("", limit=100)
    assert everything.total == len(DOCS)
    assert [h.path for h in everything.hits] == sorted(DOCS)


def test_prefix_filters_on_path(ix: SearchIndex) -> None:
    assert set(paths(ix, "coffee", prefix="notes/")) == {"notes/coffee-prefs.md", "notes/tea.md"}
    assert set(paths(ix, "", prefix="notes/")) == {
        "notes/coffee-prefs.md",
        "notes/tea.md",
        "notes/deep/running.md",
    }
    assert paths(ix, "", prefix="notes/deep/") == ["notes/deep/running.md"]
    assert paths(ix, "", prefix="notes/co") == ["notes/coffee-prefs.md"]
    assert paths(ix, "coffee", prefix="nowhere/") == []
    assert paths(ix, "", prefix="日记/") == ["日记/咖啡馆.md"]


def test_pagination_and_total(tmp_path: Path) -> None:
    with SearchIndex(tmp_path / "ix") as ix:
        ix.update("v", {f"n{i:02d}.md": "apple " * (i + 1) for i in range(25)}, [])
        first = ix.search("apple", limit=10)
        second = ix.search("apple", limit=10, offset=10)
        last = ix.search("apple", limit=10, offset=20)
        assert (first.total, second.total, last.total) == (25, 25, 25)
        assert (len(first.hits), len(second.hits), len(last.hits)) == (10, 10, 5)
        seen = [h.path for h in first.hits + second.hits + last.hits]
        assert len(set(seen)) == 25
        assert [h.score for h in first.hits] == sorted((h.score for h in first.hits), reverse=True)
        assert ix.search("apple", limit=10, offset=30).hits == []
        assert ix.search("apple", limit=0).total == 25


def _marked(hit: Hit) -> list[str]:
    return [hit.snippet[start:end] for start, end in hit.highlights]


def test_snippet_is_plain_text_with_highlight_offsets(ix: SearchIndex) -> None:
    hit = ix.search("美式咖啡 black").hits[0]
    assert "美式咖啡" in _marked(hit) and "black" in _marked(hit)
    assert "**" not in hit.snippet
    [hit] = ix.search("needle").hits
    assert _marked(hit) == ["needle"]
    assert hit.snippet.startswith("…") and hit.snippet.endswith("…")
    assert len(hit.snippet) < 260
    [hit] = ix.search("runs").hits
    assert "running" in _marked(hit)
    ends = [end for _, end in hit.highlights]
    assert all(0 <= a < b <= len(hit.snippet) for a, b in hit.highlights)
    assert ends == sorted(ends)


def test_bold_text_in_a_file_is_not_a_highlight(tmp_path: Path) -> None:
    ix = SearchIndex(tmp_path / "bold")
    ix.update("v1", {"a.md": "Use **UTC** for   every\n\ntimestamp in logs.\n"}, [])
    [hit] = ix.search("timestamp").hits
    assert hit.snippet == "Use **UTC** for every timestamp in logs."  # the file's own text, spaces made one
    assert _marked(hit) == ["timestamp"]
    ix.close()


def test_snippet_is_body_start_when_match_is_elsewhere(ix: SearchIndex) -> None:
    [hit] = ix.search("prefs", filters={"agent_id": "bob"}).hits  # matches the path only
    assert hit.snippet.startswith("用户喜欢喝美式咖啡")
    assert hit.highlights == ()
    assert "title:" not in hit.snippet  # front matter is not body


def test_version_is_reported(ix: SearchIndex) -> None:
    assert ix.search("coffee").version == "v1"
    assert ix.search("").version == "v1"


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "(",
        ")",
        "*",
        "?",
        "AND",
        "OR",
        "NOT",
        "path:",
        "title:coffee",
        "a AND OR b",
        "-",
        '-"',
        "\x00",
        "™",
    ],
)
def test_weird_queries_do_not_raise(ix: SearchIndex, query: str) -> None:
    ix.search(query)
    ix.search(query, prefix=query, filters={query: query})


def test_total_counts_every_match_beyond_the_page(tmp_path: Path) -> None:
    ix = SearchIndex(tmp_path / "ix")
    try:
        docs = [(f"{'ab'[i % 3 == 0]}/n{i}.md", f"heron sighting {'egret' * (i % 2)}") for i in range(30)]
        ix.rebuild("v1", docs)
        page = ix.search("heron", limit=5)
        assert (page.total, len(page.hits)) == (30, 5)
        assert ix.search("heron", limit=5, offset=25).total == 30
        assert ix.search("heron", limit=1, prefix="b/").total == 10
        assert ix.search("heron", limit=1, prefix="a/").total == 20
        assert ix.search("heron -egret", limit=1).total == 15
    finally:
        ix.close()
