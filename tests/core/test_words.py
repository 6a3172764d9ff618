"""One tokenizer: the dialects' terms are the search index's tokens (supplementary CJK, radicals, ...)."""

from __future__ import annotations

import pytest

from kbserver.core.words import fold, pieces, words
from kbserver.dialects.typed_records import query_words, score, terms
from kbserver.index.analysis import CHARS_ANALYZER, TEXT_ANALYZER

# Supplementary-plane Han (extension B), a CJK radical beside its ideograph, Kangxi radicals,
# compatibility ideographs (BMP and the supplement), full-width Latin, half-width kana, Hangul.
TRICKY = [
    "𠮷野家 ⺠民",
    "\U00020bb7\U00020bb8 \U0002a6d6",  # extension B pair, one extension C character alone
    "\u2f08\u2f1f 人口",  # Kangxi radicals ⼈⼟ (NFKC: 人土)
    "\uf900\uf901 \U0002f800",  # compatibility ideographs 豈更 and 丽 from the supplement
    "\uff21\uff22\uff23 \uff76\uff80\uff72",  # full-width ABC, half-width カタイ
    "커피를 마셔요 コーヒー 咖啡",
    "Straße ﬁle naïve café",
]


def _index_tokens(text: str) -> list[str]:
    """The index's tokens before stop words and stems: its tokenizer, lowercased."""
    tokenizer = TEXT_ANALYZER.items[0]
    return [t.text.lower() for t in tokenizer(text)]


@pytest.mark.parametrize("text", TRICKY)
def test_dialect_terms_are_the_index_tokens(text: str) -> None:
    assert terms(text) == list(dict.fromkeys(_index_tokens(text)))
    assert words(text) == _index_tokens(text)


def test_the_reported_pair_tokenizes_alike() -> None:
    assert terms("𠮷野家 ⺠民") == ["𠮷野", "野家", "⺠民"]
    assert _index_tokens("𠮷野家 ⺠民") == ["𠮷野", "野家", "⺠民"]


def test_compatibility_forms_fold_to_the_unified_ideograph() -> None:
    assert terms("\u2f08\u2f1f") == ["人土"]
    assert terms("\uf900") == ["\u8c48"]
    assert terms("\U0002f800") == ["\u4e3d"]
    assert [t.text for t in CHARS_ANALYZER("\U0002f800\u2f08")] == ["\u4e3d", "人"]


def test_offsets_point_into_the_original_text() -> None:
    text = "\uff21\uff22 𠮷野家"
    for piece, start, end in pieces(text):
        assert fold(text[start:end]) == piece.lower()


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ("𠮷野家", "昨天在𠮷野家吃了牛丼"),
        ("\uff21\uff22\uff23", "the abc project"),  # full-width query, ASCII text
        ("abc", "the \uff21\uff22\uff23 project"),  # and the other way
        ("\uf900", "\u8c48"),  # a compatibility ideograph finds the unified one
        ("\u2f08", "人"),  # a Kangxi radical finds the ideograph
    ],
)
def test_dialect_matching_finds_every_form(query: str, text: str) -> None:
    assert score(query_words(query), text) > 0


def test_different_words_still_do_not_match() -> None:
    assert score(query_words("𠮷野家"), "松屋") == 0
    assert score(query_words("tea"), "the team") == 0
