"""Words: the one tokenizer of every text surface (the index, the dialects) and the words a query may drop.

`pieces` cuts text into words and CJK bigrams with their offsets; the search index (kbserver.index)
lowercases, stems and indexes them, and the dialects' `terms` (kbserver.dialects) compare them as
they are, so a word one surface finds the other finds too. Search stems QUESTION_WORDS and drops
them from a query unless nothing else is left; the typed tool set's `query_index` and `recall_raw`
do the same with the words as they are.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

__all__ = [
    "CJK",
    "CJK_FUNCTION_CHARS",
    "COMMON_WORDS",
    "QUESTION_WORDS",
    "fold",
    "is_cjk",
    "pieces",
    "words",
]

# Han (with extensions and compatibility forms), kana and Hangul: scripts written without spaces
# between words, so a run of them is cut into overlapping bigrams (what Lucene's CJKAnalyzer does).
CJK = (
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
    "\U00020000-\U0003134f"  # CJK extensions B to G (and the compatibility supplement)
)
_TOKEN_RE = re.compile(rf"(?P<cjk>[{CJK}]+)|[^\W_{CJK}]+")
_CJK_RE = re.compile(rf"[{CJK}]")


def is_cjk(text: str) -> bool:
    """True when `text` starts with a CJK character."""
    return _CJK_RE.match(text) is not None


def _norm(text: str) -> str:
    # NFKC folds full-width Latin, half-width kana, Kangxi radicals and compatibility ideographs;
    # done per piece so the offsets stay those of the original text.
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def pieces(value: str, *, unigrams: bool = False) -> Iterator[tuple[str, int, int]]:
    """(text, start, end) of each word (NFKC, case kept) and each CJK bigram of `value`, in order: a
    CJK run of one character is that character. `unigrams` yields only the single CJK characters."""
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


def words(text: str) -> list[str]:
    """The lowercased pieces of `text`, in order (what the index stems and stores, before stemming)."""
    return [piece.lower() for piece, _, _ in pieces(text)]


def fold(text: str) -> str:
    """`text` as `words` sees its characters (NFKC, lowercased): for matching words inside it."""
    return unicodedata.normalize("NFKC", text).lower()


# Words of questions that carry no topic ("what", "did", "my", 什么, the "s" of "Alice's").
QUESTION_WORDS: frozenset[str] = frozenset(
    """
what which who whom whose where when why how whats wheres whos hows
do does did doing done was were been being has had having am
i me my mine myself he him his she her hers they them their theirs our ours its
there here about any some all would should could might must shall so than then too very just
also ever please tell know remember recall anything something thing things
什么 怎么 怎样 为什 哪里 哪儿 哪个 哪些 谁 吗 呢 吧 啊 么 的 了 是 我 你 他 她 它
s t d m ll re ve
""".split()
)

# English words too common to say anything (the list Whoosh's index leaves out of every file).
COMMON_WORDS: frozenset[str] = frozenset(
    """
a an and are as at be by can for from have if in is it may not of on or tbd that the this to us
we when will with yet you your
""".split()
)

# Chinese function characters: a question's bigram holding one ("么车" of "什么车") keeps only its
# other character, so the topic word next to a question word is not lost.
CJK_FUNCTION_CHARS: frozenset[str] = frozenset("的了吗呢吧啊么什哪谁怎是我你您")
