"""User query text to Whoosh queries: words ORed and ranked, "quoted phrases" required, -exclusion.

What a person types into a search box is usually a question. Its words are ORed and ranked by
BM25F; files holding every word rank above partial matches, and files holding the words as one
phrase rank above those. Question words that carry no topic ("what", "did", "my", 什么) are
dropped, unless nothing else is left. A "quoted phrase" must occur; -word or NOT word excludes;
OR and AND are accepted and change nothing. Any text is accepted: what the parser cannot read
(unbalanced quotes, operator characters) is searched as the plain words in it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from whoosh import query as q

from kbserver.core.words import CJK_FUNCTION_CHARS, QUESTION_WORDS
from kbserver.index.analysis import TEXT_ANALYZER, is_cjk
from kbserver.index.schema import CHARS, SEARCH_FIELDS

__all__ = [
    "CJK_FUNCTION_CHARS",
    "QUERY_STOP_WORDS",
    "ParsedQuery",
    "parse_query",
    "question_words",
    "word_query",
]

# A quoted phrase (an unclosed quote runs to the end), or a run of anything but space and quotes.
_CHUNK = re.compile(r'(?P<neg>-?)"(?P<phrase>[^"]*)(?:"|\Z)|(?P<word>[^\s"]+)')
_MAX_TOKENS = 64  # a pasted paragraph is still one cheap query

# Question words are still indexed (the index drops only Whoosh's short list), so a query made only
# of them, like "The Who", still finds files.
QUERY_STOP_WORDS: frozenset[str] = frozenset(t.text for word in QUESTION_WORDS for t in TEXT_ANALYZER(word))


@dataclass(frozen=True)
class _Clause:
    tokens: tuple[str, ...]
    quoted: bool
    negated: bool


@dataclass(frozen=True)
class ParsedQuery:
    """What to run: `match` selects and scores the hits but `exclude`; `tiers` rank some higher."""

    match: Any | None  # None: the text has nothing searchable (only stop words or punctuation)
    exclude: Any | None  # files matching it are left out
    tiers: tuple[Any, ...]  # boolean queries, each matching a subset of the one before: more ranks higher
    highlight: frozenset[str]  # index terms to mark in snippets
    words: tuple[str, ...] = ()  # the terms the question is ranked by (question_words)


HasTerm = Callable[[str, str], bool]


def _everywhere(field: str, text: str) -> bool:
    return True


def _term(token: str, has: HasTerm) -> Any:
    if len(token) == 1 and is_cjk(token):
        # One CJK character: bigrams cannot find it, the unigram field can (see the analyzer notes).
        return q.Term(CHARS, token) if has(CHARS, token) else q.NullQuery
    return _fields([q.Term(f, token, boost=b) for f, b in SEARCH_FIELDS.items() if has(f, token)])


def _fields(queries: list[Any]) -> Any:
    """One term or phrase over every searchable field.

    DefaultOr, not Or: for small segments Or picks a matcher that fills and clears a 2,048-slot
    array in Python per field group, which made queries over many small segments several times
    slower for the same hits and scores (docs/performance.md, "Index: numbers behind the code").
    """
    if not queries:
        return q.NullQuery
    return queries[0] if len(queries) == 1 else q.DefaultOr(queries)


def _phrase(tokens: tuple[str, ...], has: HasTerm) -> Any:
    if len(tokens) == 1:
        return _term(tokens[0], has)
    words = list(tokens)
    fields = [(f, b) for f, b in SEARCH_FIELDS.items() if all(has(f, t) for t in words)]
    return _fields([q.Phrase(f, words, boost=b) for f, b in fields])


def _any(queries: list[Any]) -> Any:
    return queries[0] if len(queries) == 1 else q.Or(queries)


def _clauses(text: str) -> list[_Clause]:
    clauses: list[_Clause] = []
    budget = _MAX_TOKENS
    negate_next = False
    for m in _CHUNK.finditer(text):
        word, quoted = m.group("word"), m.group("phrase") is not None
        negated = bool(m.group("neg"))
        if word is not None:
            if word in ("AND", "OR", "NOT"):
                negate_next = negate_next or word == "NOT"
                continue
            if len(word) > 1 and word[0] in "-+":
                negated, word = word[0] == "-", word[1:]
        tokens = tuple(t.text for t in TEXT_ANALYZER(word if word is not None else m.group("phrase")))
        tokens = tokens[:budget]
        negated, negate_next = negated or negate_next, False  # NOT applies to the next chunk only
        if not tokens:
            continue
        budget -= len(tokens)
        clauses.append(_Clause(tokens, quoted, negated))
        if budget <= 0:
            break
    return clauses


def _question_token(token: str) -> list[str]:
    if token in QUERY_STOP_WORDS:
        return []
    if len(token) == 2 and is_cjk(token) and not CJK_FUNCTION_CHARS.isdisjoint(token):
        return [ch for ch in token if ch not in CJK_FUNCTION_CHARS]
    return [token]


def _query_words(clauses: list[_Clause]) -> tuple[str, ...]:
    """The distinct unquoted positive tokens in order, question words dropped unless that leaves none."""
    words = [t for c in clauses if not c.negated and not c.quoted for t in c.tokens]
    kept = [k for t in words for k in _question_token(t)] or words
    return tuple(dict.fromkeys(kept))


def question_words(text: str) -> tuple[str, ...]:
    """The index terms a question is ranked by: its unquoted, not excluded words, analysed as the
    index analyses text, question words dropped unless nothing else is left."""
    return _query_words(_clauses(text))


def word_query(token: str, has: HasTerm = _everywhere) -> Any:
    """The query that finds one index term in any searchable field."""
    return _term(token, has)


def parse_query(text: str, has: HasTerm = _everywhere) -> ParsedQuery:
    """Turn what a user typed into queries over the searchable fields; any text is accepted.

    `has(field, term)` says whether the index holds a term; terms it lacks are left out of the
    queries (a question's words over five fields is a tree of dozens of matchers, most of them empty).
    """
    clauses = _clauses(text)
    phrases = list(dict.fromkeys(c.tokens for c in clauses if c.quoted and not c.negated))
    words = _query_words(clauses)
    if not words and not phrases:
        # Only exclusions (or nothing searchable): there is no ranking to do, so nothing matches.
        return ParsedQuery(match=None, exclude=None, tiers=(), highlight=frozenset(), words=words)
    required = [_phrase(p, has) for p in phrases]
    if not words:
        match = required[0] if len(required) == 1 else q.And(required)
    else:
        match = _any([_term(t, has) for t in words] + required)
        if required:
            match = q.Require(match, required[0] if len(required) == 1 else q.And(required))
    # Exclusions are a set of documents the collector skips, not q.AndNot: AndNotMatcher checks only
    # for equal ids when it starts, so a first match after the first excluded document slips through.
    negative = [_phrase(c.tokens, has) for c in clauses if c.negated]
    exclude = _any(negative) if negative else None
    tiers: list[Any] = []
    if len(words) > 1:
        tiers.append(q.And([_term(t, has) for t in words]))  # every word somewhere in the file
        tiers.append(_phrase(words, has))  # the words in the order asked, side by side
    highlight = frozenset(words) | frozenset(t for p in phrases for t in p)
    return ParsedQuery(match=match, exclude=exclude, tiers=tuple(tiers), highlight=highlight, words=words)
