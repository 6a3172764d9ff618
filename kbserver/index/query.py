"""User query text to Whoosh queries: words ANDed, "quoted phrases", -exclusion, OR; never raises."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from whoosh import query as q

from kbserver.index.analysis import TEXT_ANALYZER, is_cjk
from kbserver.index.schema import CHARS, SEARCH_FIELDS

__all__ = ["ParsedQuery", "parse_query"]

# A quoted phrase (an unclosed quote runs to the end), or a run of anything but space and quotes.
_CHUNK = re.compile(r'(?P<neg>-?)"(?P<phrase>[^"]*)(?:"|\Z)|(?P<word>[^\s"]+)')
_MAX_TOKENS = 64  # a pasted paragraph is still one cheap query


@dataclass(frozen=True)
class _Clause:
    tokens: tuple[str, ...]
    quoted: bool
    negated: bool
    or_previous: bool  # joined to the previous clause by OR


@dataclass(frozen=True)
class ParsedQuery:
    """What to run: `strict` first, then `loose` (OR of the words) if strict found nothing."""

    strict: Any | None  # None: the text has nothing searchable (only stop words or punctuation)
    loose: Any | None  # None: there is nothing looser to try
    highlight: frozenset[str]  # index terms to mark in snippets


def _term(token: str) -> Any:
    if len(token) == 1 and is_cjk(token):
        # One CJK character: bigrams cannot find it, the unigram field can (see the analyzer notes).
        return q.Term(CHARS, token)
    return _fields([q.Term(field, token, boost=boost) for field, boost in SEARCH_FIELDS.items()])


def _fields(queries: list[Any]) -> Any:
    """One term or phrase over every searchable field.

    DefaultOr, not Or: for small segments Or picks a matcher that fills and clears a 2,048-slot
    array in Python per field group; after 50 writes (7 segments) that made queries 2-4x slower
    (measured at 10k notes: zebra 4.5 -> 1.9 ms, git 9.5 -> 6.0 ms; same hits and scores).
    """
    return q.DefaultOr(queries)


def _match(clause: _Clause) -> Any:
    if len(clause.tokens) == 1:
        return _term(clause.tokens[0])
    # Several tokens from one chunk (a CJK run, "coffee-prefs", a quoted phrase) must be adjacent.
    words = list(clause.tokens)
    return _fields([q.Phrase(field, words, boost=boost) for field, boost in SEARCH_FIELDS.items()])


def _any(queries: list[Any]) -> Any:
    return queries[0] if len(queries) == 1 else q.Or(queries)


def _clauses(text: str) -> list[_Clause]:
    clauses: list[_Clause] = []
    budget = _MAX_TOKENS
    negate_next = or_next = False
    for m in _CHUNK.finditer(text):
        word, quoted = m.group("word"), m.group("phrase") is not None
        negated = bool(m.group("neg"))
        if word is not None:
            if word in ("AND", "OR", "NOT"):
                or_next = or_next or word == "OR"
                negate_next = negate_next or word == "NOT"
                continue
            if len(word) > 1 and word[0] in "-+":
                negated, word = word[0] == "-", word[1:]
        tokens = tuple(t.text for t in TEXT_ANALYZER(word if word is not None else m.group("phrase")))
        tokens = tokens[:budget]
        if not tokens:
            continue
        budget -= len(tokens)
        clauses.append(_Clause(tokens, quoted, negated or negate_next, or_next and not negated))
        negate_next = or_next = False
        if budget <= 0:
            break
    return clauses


def parse_query(text: str) -> ParsedQuery:
    """Turn what a user typed into queries over the searchable fields; any text is accepted."""
    clauses = _clauses(text)
    positive = [c for c in clauses if not c.negated]
    if not positive:
        # Only exclusions (or nothing searchable): there is no ranking to do, so nothing matches.
        return ParsedQuery(strict=None, loose=None, highlight=frozenset())
    groups: list[list[_Clause]] = []
    for clause in positive:
        if clause.or_previous and groups:
            groups[-1].append(clause)
        else:
            groups.append([clause])
    strict = q.And([_any([_match(c) for c in group]) for group in groups]) if len(groups) > 1 else None
    if strict is None:
        strict = _any([_match(c) for c in groups[0]])

    # The fallback keeps quoted phrases whole but lets every other word match on its own.
    loose_parts: dict[tuple[str, ...], Any] = {}
    for clause in positive:
        if clause.quoted:
            loose_parts.setdefault(clause.tokens, _match(clause))
        else:
            for token in clause.tokens:
                loose_parts.setdefault((token,), _term(token))
    loose = q.Or(list(loose_parts.values())) if len(loose_parts) > 1 else None

    negative = [_match(c) for c in clauses if c.negated]
    if negative:
        strict = q.AndNot(strict, _any(negative))
        loose = q.AndNot(loose, _any(negative)) if loose is not None else None
    highlight = frozenset(t for c in positive for t in c.tokens)
    return ParsedQuery(strict=strict, loose=loose, highlight=highlight)
