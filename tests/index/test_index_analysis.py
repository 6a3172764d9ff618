"""The analyzer: English folding, stop words and stems; CJK bigrams with true positions."""

from __future__ import annotations

from kbserver.index.analysis import CHARS_ANALYZER, TEXT_ANALYZER, is_cjk, terms


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
