"""Text analysis: core.words' pieces (words, CJK bigrams) lowercased, without stop words, Porter-stemmed."""

from __future__ import annotations

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

from kbserver.core.words import is_cjk, pieces

__all__ = [
    "CHARS_ANALYZER",
    "SPLIT_ANALYZER",
    "SPLIT_SEP",
    "TEXT_ANALYZER",
    "is_cjk",
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
