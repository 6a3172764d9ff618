"""Text analysis: English words (folded, stop words, Porter stems) plus CJK runs as overlapping bigrams."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import Any

from whoosh.analysis import (
    LowercaseFilter,
    StemFilter,
    StopFilter,
    Token,
    Tokenizer,
)
from whoosh.lang.porter2 import stem

__all__ = [
    "CHARS_ANALYZER",
    "SPLIT_ANALYZER",
    "SPLIT_SEP",
    "TEXT_ANALYZER",
    "is_cjk",
    "terms",
]

# Han (with extensions and compatibility forms), kana and Hangul: scripts written without spaces
# between words, so a run of them is indexed as overlapping bigrams (what Lucene's CJKAnalyzer does).
_CJK = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u2e80-\u2fdf"  # CJK and Kangxi radicals
    "\u3005-\u3007"  # ideographic iteration mark, closing mark, number zero
    "\u3041-\u309f"  # Hiragana
    "\u30a1-\u30fa\u30fc-\u30ff"  # Katakana (with ー, without the ・ separator)
    "\u3131-\u318f"  # Hangul compatibility Jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua960-\ua97f"  # Hangul Jamo extended A
    "\uac00-\ud7ff"  # Hangul syllables, Jamo extended B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uffdc"  # halfwidth Katakana and Hangul
    "\U00020000-\U0003134f"  # CJK extensions B to G
)
_TOKEN_RE = re.compile(rf"(?P<cjk>[{_CJK}]+)|[^\W_{_CJK}]+")
_CJK_RE = re.compile(rf"[{_CJK}]")
_MAX_WORD = 64  # longer "words" are base64, hashes or URLs squashed together: noise in the lexicon
SPLIT_SEP = "\x1f"  # joins the exact values of a multi-valued filter field


def is_cjk(text: str) -> bool:
    """True when `text` starts with a CJK character."""
    return _CJK_RE.match(text) is not None


def _norm(text: str) -> str:
    # NFKC folds full-width Latin and half-width kana; done per token so character offsets stay true.
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def _pieces(value: str, *, unigrams: bool) -> Iterator[tuple[str, int, int]]:
    """(text, start, end) of each raw token; `unigrams` yields only the single CJK characters."""
    for m in _TOKEN_RE.finditer(value):
        start = m.start()
        run = m.group()
        if m.group("cjk") is None:
            if not unigrams:
                yield _norm(run), start, m.end()
        elif unigrams or len(run) == 1:
            for i, ch in enumerate(run):
                yield _norm(ch), start + i, start + i + 1
        else:
            for i in range(len(run) - 1):
                yield _norm(run[i : i + 2]), start + i, start + i + 2


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
        pieces = _pieces(value, unigrams=self.unigrams) if tokenize else iter([(value, 0, len(value))])
        for pos, (text, start, end) in enumerate(pieces, start_pos):
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
