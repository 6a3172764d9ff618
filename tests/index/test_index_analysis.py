"""The analyzer: English folding, stop words and stems; CJK bigrams with true positions."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kbserver.index.analysis import CHARS_ANALYZER, TEXT_ANALYZER, is_cjk, term_spans, terms

_WORDS = (
    "the a of and running runs ran runner agent memory Git commit C 3 x42 QS-231 naïve café Straße ﬁne Ⅻ "
    "snake_case \uff26\uff35\uff2c\uff2c 咖啡 美式 我 团队约定 テスト ー 한국어 \U00020000 İ ǅ ㍿ ｶ … 0"
)
_PIECES = [*_WORDS.split(), " ", "\n", "_", "-", "'", "word" * 17]
_SAMPLE = Path(__file__).parents[2] / "sample_kb"


def _analyzer_spans(text: str, wanted: set[str]) -> list[tuple[int, int]]:
    return [(t.startchar, t.endchar) for t in TEXT_ANALYZER(text, chars=True) if t.text in wanted]


def test_english_is_folded_stemmed_and_stops_removed() -> None:
    assert terms("The Running dogs RAN; preferred Preferences") == ["run", "dog", "ran", "prefer", "prefer"]


def test_single_letters_and_digits_are_kept() -> None:
    assert terms("C 3 x") == ["c", "3", "x"]


def test_chinese_runs_become_overlapping_bigrams_with_consecutive_positions() -> None:
    tokens = [
        (t.text, t.pos, t.startchar, t.endchar)
        for t in TEXT_ANALYZER("美式咖啡 Git", positions=True, chars=True)
    ]
    assert tokens == [("美式", 0, 0, 2), ("式咖", 1, 1, 3), ("咖啡", 2, 2, 4), ("git", 3, 5, 8)]


def test_isolated_cjk_character_is_one_token() -> None:
    assert terms("我 like 茶") == ["我", "like", "茶"]


def test_japanese_and_korean_are_bigrammed() -> None:
    assert terms("コーヒー") == ["コー", "ーヒ", "ヒー"]
    assert terms("커피를") == ["커피", "피를"]
    assert is_cjk("ひ") and is_cjk("カ") and is_cjk("한") and is_cjk("漢") and not is_cjk("a")


def test_full_width_and_half_width_forms_are_normalised() -> None:
    assert terms("\uff21\uff22\uff23 \uff76\uff80") == ["abc", "カタ"]  # full-width ABC, half-width katakana


def test_underscores_and_punctuation_split_words() -> None:
    assert terms("notes/coffee-prefs.md agent_id") == ["note", "coffe", "pref", "md", "agent", "id"]


def test_chars_analyzer_yields_only_cjk_characters() -> None:
    assert [t.text for t in CHARS_ANALYZER("咖啡 and 茶")] == ["咖", "啡", "茶"]


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join), st.integers(0, 3))
def test_term_spans_are_the_analyzers_offsets_of_the_wanted_terms(text: str, keep: int) -> None:
    found = terms(text)
    wanted = {*found[::keep], "word" * 17} if keep else {"run", "咖啡", "ｶ", "the"}
    assert term_spans(text, wanted) == _analyzer_spans(text, wanted)


def test_term_spans_on_the_sample_kb() -> None:
    checked = 0
    for path in sorted(_SAMPLE.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        found = terms(text)
        for wanted in (set(found), set(found[::3]), set()):
            spans = term_spans(text, wanted)
            assert spans == _analyzer_spans(text, wanted), path
            checked += len(spans)
    assert checked > 1000
