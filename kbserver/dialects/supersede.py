"""When a new `semantic` memory supersedes a live one: nearly the same (the contract's 0.9), or an update.

The contract's rule, a similarity of at least SUPERSEDE_SIMILARITY (0.9), catches a fact stated
again in other words. It misses the commonest update: "The user prefers tea" followed by "The user
now prefers coffee" scores 0.65-0.73 with the centred e5 embeddings (the same slot, another value:
as far apart as two related facts), and no threshold separates it from "The user likes green tea"
(0.79, a second fact, not a correction). What tells them apart is that the new memory says it is
an update and names the same subject. So a memory also supersedes when all of these hold:

- it carries an update marker: `now`, `no longer`, `anymore`, `instead`, `nowadays`, `these
  days`, `from now on`, `currently`, `changed to`, or 现在, 如今, 不再, 改为, 改成, 已经改;
- its similarity to the old one is at least UPDATE_SIMILARITY (0.45, "about the same thing"), when
  the similarity is the embeddings' cosine (word overlap cannot tell a topic; without embeddings
  only the 0.9 rule applies);
- the two share their slot: of the words left after common words and the markers (CJK as single
  characters), the shared ones are at least half of each side's, and each side has at most three
  the other lacks (a value changed, not a new sentence).
"""

from __future__ import annotations

import re

from kbserver.dialects.semantic_rules import SUPERSEDE_SIMILARITY
from kbserver.dialects.typed_records import query_words

__all__ = ["UPDATE_MARKERS", "UPDATE_SIMILARITY", "is_update", "supersedes"]

UPDATE_SIMILARITY = 0.45
UPDATE_MARKERS = (
    "now",
    "no longer",
    "anymore",
    "any more",
    "instead",
    "nowadays",
    "these days",
    "from now on",
    "currently",
    "changed to",
    "现在",
    "如今",
    "不再",
    "改为",
    "改成",
    "已经改",
)
_LATIN_MARKERS = re.compile(
    r"\b(?:" + "|".join(re.escape(m) for m in UPDATE_MARKERS if m.isascii()) + r")\b", re.IGNORECASE
)
_CJK_MARKERS = tuple(m for m in UPDATE_MARKERS if not m.isascii())
_MARKER_WORDS = frozenset(w for m in UPDATE_MARKERS if m.isascii() for w in m.split())
_MARKER_CHARS = frozenset("".join(_CJK_MARKERS))
_MAX_CHANGED = 3


def _marked(text: str) -> bool:
    return _LATIN_MARKERS.search(text) is not None or any(m in text for m in _CJK_MARKERS)


def _slot(text: str) -> set[str]:
    """The words that name what a memory is about and says: common words and markers left out,
    CJK as single characters (its bigrams would differ around every changed character)."""
    out: set[str] = set()
    for word in query_words(text):
        if word.isascii():
            if word not in _MARKER_WORDS:
                out.add(word)
        else:
            out.update(c for c in word if c not in _MARKER_CHARS)
    return out


def is_update(new: str, old: str) -> bool:
    """True when `new` says it updates `old` (a marker) and states the same slot (shared words)."""
    if not _marked(new):
        return False
    a, b = _slot(new), _slot(old)
    shared = a & b
    return (
        bool(shared)
        and 2 * len(shared) >= len(a)
        and 2 * len(shared) >= len(b)
        and len(a - b) <= _MAX_CHANGED
        and len(b - a) <= _MAX_CHANGED
    )


def supersedes(new: str, old: str, similarity: float, *, by_meaning: bool) -> bool:
    """Whether a store of `new` supersedes the live memory `old` (same agent, user_id and type) whose
    similarity to it is `similarity` (`by_meaning`: the embeddings' cosine, else word overlap)."""
    if similarity >= SUPERSEDE_SIMILARITY:
        return True
    return by_meaning and similarity >= UPDATE_SIMILARITY and is_update(new, old)
