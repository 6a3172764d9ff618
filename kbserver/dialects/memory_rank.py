"""memory_search's hybrid mode: the words it reads, and a second look at the top of its ranking.

Hybrid mode reads the question's words without the search box's operators (`plain`): an agent's
question or a pasted message quotes to cite ("this 'custom solution' you gave me"), and a "quoted
phrase" the search box requires left out the memories that hold those words apart. Keyword mode keeps
the operators.

`refine` re-scores the first `DEPTH` places of the fused ranking, for what a fusion of two scores
cannot weigh; both parts are off (weight 0), measured but not kept (docs/performance.md), and the
bench (`python -m bench.recall_public --modes "hybrid;hybrid@names=0.15"`) turns them on:

- names: the capitalised words of the question inside a sentence ("Paola", "NaijaCoin") lift a
  memory by `NAME_BOOST` times the share of them it holds; a name that more than `NAME_SHARE` of
  the top places hold (a chat's speaker, on every line of theirs) does not count. It lifted an
  English note holding "Japan" over the Chinese answer of a cross-language question.
- time: a question that names a time ("yesterday", "last Saturday", "on 5 January 2024";
  kbserver.services.reading.when), resolved against the search's `endTime` or else the newest
  memory's time, lifts the memories written in that span by `TIME_BOOST`.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence

from kbserver.dialects.memory_records import Memory, parse_time
from kbserver.services.reading.hybrid import Ranked
from kbserver.services.reading.when import window

__all__ = ["DEPTH", "names", "plain", "refine"]

DEPTH = 30
NAME_BOOST = 0.0
NAME_SHARE = 0.5  # a name held by more than this share of the top places does not count
TIME_BOOST = 0.0
PLAIN_WORDS = True  # hybrid reads the question's words without the search box's operators

_WORD = re.compile("[^\\W\\d_][\\w'\u2019-]*")
_NOT_NAMES = frozenset(
    "i i'm i've i'd i'll ok okay monday tuesday wednesday thursday friday saturday sunday january february "
    "march april may june july august september october november december".split()
)


def names(text: str) -> list[str]:
    """The capitalised words of `text` inside a sentence (after a word or a comma, not after a stop, a
    quote or a bullet), lowercased and without a possessive 's, once each."""
    found: dict[str, None] = {}
    for m in _WORD.finditer(text):
        word, before = m.group(0), text[: m.start()].rstrip()[-1:]
        if word[0].isupper() and len(word) > 1 and (before.isalnum() or before == ","):
            word = re.sub("['\u2019]s?$", "", word.lower())
            if word not in _NOT_NAMES:
                found[word] = None
    return list(found)


_OPERATOR = re.compile(r'"|(?<!\S)[-+](?=\w)')


def plain(search: str) -> str:
    """`search` with the search box's operators taken out ("quoted phrase" required, -word left out):
    a hybrid search reads a question or a message, whose quotes cite rather than require."""
    return _OPERATOR.sub(" ", search) if PLAIN_WORDS else search


def _newest(memories: Mapping[str, Memory]) -> datetime.datetime | None:
    newest = max((m.createdAt for m in memories.values()), default=None)
    return parse_time(newest, "createdAt") if newest else None


def refine(
    search: str,
    ranked: Sequence[Ranked],
    memories: Mapping[str, Memory],
    end: datetime.datetime | None,
) -> list[Ranked]:
    """`ranked` with its first DEPTH places re-scored and re-sorted (the rest stay below them);
    `end` is the search's endTime."""
    top = list(ranked[:DEPTH])
    if not top or not (TIME_BOOST or NAME_BOOST):
        return list(ranked)
    scores = {r.key: r.score for r in top}
    if TIME_BOOST:
        now = end or _newest(memories)
        span = window(search, now) if now is not None else None
        if span is not None:
            for key in scores:
                if span[0] <= parse_time(memories[key].createdAt, "createdAt") < span[1]:
                    scores[key] = min(1.0, scores[key] + TIME_BOOST)
    wanted = names(search) if NAME_BOOST else []
    if wanted:
        holds = {
            n: {k for k in scores if re.search(rf"\b{re.escape(n)}\b", memories[k].content.lower())}
            for n in wanted
        }
        # A name most of the top places hold (a speaker's, on every line of theirs) tells them apart little.
        telling = [n for n in wanted if len(holds[n]) <= NAME_SHARE * len(scores)]
        for key in scores:
            lift = NAME_BOOST * sum(key in holds[n] for n in telling) / len(wanted)
            scores[key] = min(1.0, scores[key] + lift)  # a hybrid score stays in [0, 1]
    place = {r.key: i for i, r in enumerate(top)}
    again = sorted(scores.items(), key=lambda kv: (-kv[1], place[kv[0]]))
    return [Ranked(k, s) for k, s in again] + list(ranked[DEPTH:])
