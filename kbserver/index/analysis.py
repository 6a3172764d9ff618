"""Text analysis: core.words' pieces (words, CJK bigrams) lowercased, without stop words, Porter-stemmed."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Set
from typing import Any

from whoosh.analysis import (
    LowercaseFilter,
    StemFilter,
    StopFilter,
    Token,
    Tokenizer,
)
from whoosh.lang.porter2 import stem

from kbserver.core.words import CJK, is_cjk, pieces

__all__ = [
    "CHARS_ANALYZER",
    "SPLIT_ANALYZER",
    "SPLIT_SEP",
    "TEXT_ANALYZER",
    "char_terms",
    "index_terms",
    "is_cjk",
    "term_spans",
    "terms",
]

_MAX_WORD = 64  # longer "words" are base64, hashes or URLs squashed together: noise in the lexicon
SPLIT_SEP = "\x1f"  # joins the exact values of a multi-valued filter field


class _Tokenizer(Tokenizer):  # type: ignore[misc]
    """Words and CJK bigrams (or, with `unigrams`, single CJK characters) with true positions."""

    def __init__(self, unigrams: bool = False) -> None:
        self.unigrams = unigrams

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Tokenizer) and other.unigrams == self.unigrams

    def __hash__(self) -> int:
        return hash((type(self), self.unigrams))

    def __call__(
        self,
        value: str,
        positions: bool = False,
        chars: bool = False,
        keeporiginal: bool = False,
        removestops: bool = True,
        start_pos: int = 0,
        start_char: int = 0,
        tokenize: bool = True,
        mode: str = "",
        **kwargs: Any,
    ) -> Iterator[Any]:
        token = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        found = pieces(value, unigrams=self.unigrams) if tokenize else iter([(value, 0, len(value))])
        for pos, (text, start, end) in enumerate(found, start_pos):
            token.text = text
            token.boost = 1.0
            token.stopped = False
            if keeporiginal:
                token.original = text
            if positions:
                token.pos = pos
            if chars:
                token.startchar, token.endchar = start_char + start, start_char + end
            yield token


class _SplitTokenizer(Tokenizer):  # type: ignore[misc]
    """Exact values joined by SPLIT_SEP, one term each: folders of a path, values of a filter field."""

    def __call__(
        self,
        value: str,
        positions: bool = False,
        chars: bool = False,
        keeporiginal: bool = False,
        removestops: bool = True,
        start_pos: int = 0,
        start_char: int = 0,
        tokenize: bool = True,
        mode: str = "",
        **kwargs: Any,
    ) -> Iterator[Any]:
        token = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        offset = 0
        for pos, text in enumerate(value.split(SPLIT_SEP) if tokenize else [value], start_pos):
            if text:
                token.text = text
                token.boost = 1.0
                token.stopped = False
                if keeporiginal:
                    token.original = text
                if positions:
                    token.pos = pos
                if chars:
                    token.startchar, token.endchar = start_char + offset, start_char + offset + len(text)
                yield token
            offset += len(text) + 1


# whoosh's default Porter stemmer leaves "running" as "runn"; its Snowball English (porter2) gives "run".
# minsize=1 keeps single letters, digits and isolated CJK characters ("C", "3", "我");
# the stop filter renumbers positions, so phrases across removed stop words still match.
TEXT_ANALYZER: Any = (
    _Tokenizer() | LowercaseFilter() | StopFilter(minsize=1, maxsize=_MAX_WORD) | StemFilter(stemfn=stem)
)
CHARS_ANALYZER: Any = _Tokenizer(unigrams=True)
SPLIT_ANALYZER: Any = _SplitTokenizer()


def terms(text: str) -> list[str]:
    """The indexed terms of `text`, in order (what TEXT_ANALYZER yields)."""
    return [t.text for t in TEXT_ANALYZER(text)]


# -- the indexing fast path ---------------------------------------------------------------------------
# Indexing a document through the analyzer above runs four generators and a Token object per word
# (~45% of a rebuild's time). These functions give the same terms and positions from one regex pass,
# a dict of stems and list operations; kbserver.index.schema's fields index with them, and the
# tests check them against the analyzers on every kind of text.

_PIECES = re.compile(rf"([{CJK}]+)|([^\W_{CJK}]+)")
_ASCII_WORDS = re.compile(r"[^\W_]+", re.ASCII)
_STOPS: frozenset[str] = TEXT_ANALYZER.items[2].stops
_STEMS: dict[str, str] = {}
_MAX_STEMS = 200_000  # a long-running process indexes many words; keep the cache bounded


def _nfkc(text: str) -> str:
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def _stem(word: str) -> str:
    stemmed = _STEMS.get(word)
    if stemmed is None:
        if len(_STEMS) >= _MAX_STEMS:
            _STEMS.clear()
        stemmed = _STEMS[word] = stem(word)
    return stemmed


def index_terms(value: str) -> tuple[int, list[str]]:
    """(position of the first term, the terms in order) of `value` as TEXT_ANALYZER indexes it:
    the terms are numbered from that position on, without gaps (the stop filter renumbers)."""
    stops, stems = _STOPS, _STEMS
    if value.isascii():  # no CJK, no normalization: lowercase once, cut once
        words = _ASCII_WORDS.findall(value.lower())
        first = next((i for i, w in enumerate(words) if w not in stops and len(w) <= _MAX_WORD), 0)
        return first, [stems.get(w) or _stem(w) for w in words if w not in stops and len(w) <= _MAX_WORD]
    first = -1
    pos = 0
    out: list[str] = []
    append = out.append
    for cjk, word in _PIECES.findall(value):
        if word:
            texts = [(word if word.isascii() else _nfkc(word)).lower()]
        elif len(cjk) == 1:
            texts = [_nfkc(cjk).lower()]
        else:
            texts = [_nfkc(cjk[i : i + 2]).lower() for i in range(len(cjk) - 1)]
        for text in texts:
            if text and len(text) <= _MAX_WORD and text not in stops:
                if first < 0:
                    first = pos
                append(stems.get(text) or _stem(text))
            pos += 1
    return max(first, 0), out


def term_spans(value: str, wanted: Set[str]) -> list[tuple[int, int]]:
    """The [start, end) offsets in `value`, in order, of each piece whose term (as TEXT_ANALYZER makes
    it) is in `wanted`: what `TEXT_ANALYZER(value, chars=True)` gives, from the same regex pass as
    index_terms (snippets mark a search's words with it)."""
    stops = _STOPS
    found: dict[str, bool] = {}  # text -> its term is wanted
    out: list[tuple[int, int]] = []
    if value.isascii():  # lowercasing keeps every offset
        for m in _ASCII_WORDS.finditer(value.lower()):
            word = m.group()
            hit = found.get(word)
            if hit is None:
                hit = found[word] = word not in stops and len(word) <= _MAX_WORD and _stem(word) in wanted
            if hit:
                out.append(m.span())
        return out
    for m in _PIECES.finditer(value):
        cjk, word = m.groups()
        start = m.start()
        if word:
            texts = [((word if word.isascii() else _nfkc(word)).lower(), start, m.end())]
        elif len(cjk) == 1:
            texts = [(_nfkc(cjk).lower(), start, start + 1)]
        else:
            texts = [(_nfkc(cjk[i : i + 2]).lower(), start + i, start + i + 2) for i in range(len(cjk) - 1)]
        for text, begin, end in texts:
            hit = found.get(text)
            if hit is None:
                hit = found[text] = (
                    bool(text) and len(text) <= _MAX_WORD and text not in stops and _stem(text) in wanted
                )
            if hit:
                out.append((begin, end))
    return out


def char_terms(value: str) -> list[str]:
    """The terms of `value` as CHARS_ANALYZER indexes them: its single CJK characters (NFKC)."""
    return [_nfkc(ch) for cjk, _ in _PIECES.findall(value) if cjk for ch in cjk]
