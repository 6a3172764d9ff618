"""Searching one open Whoosh searcher: ranked pages of hits, listings, and a question's coverage.

SearchIndex (engine.py) holds the searcher and its lock; what it asks of it is here, as functions of
the searcher alone, so ranking can be read and tested apart from opening and writing the index.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from whoosh import query as q

from kbserver.index.arrays import collect_arrays, doc_ids
from kbserver.index.collect import collect
from kbserver.index.document import valid_utf8
from kbserver.index.query import ParsedQuery, parse_query, question_words, word_query
from kbserver.index.schema import DIRS, FIELDS, FILTER_PREFIX, META_PATH, PATH
from kbserver.index.snippet import Snippet, make_snippet

__all__ = ["Hide", "Hit", "SearchResult", "constraint", "coverage", "hidden", "search"]

_FILTER_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")

Hide = tuple[str, str, Collection[str]]
"""(folder, filter key, values): the files under folder whose filter field key is one of values."""


@dataclass(frozen=True)
class Hit:
    """One matching file."""

    path: str
    score: float
    snippet: str  # plain-text excerpt around the matches; the start of the body when nothing to highlight
    fields: dict[str, str]  # front-matter fields: title, tags (joined by ", "), category and other scalars
    coverage: float | None = None  # with search(coverage=True): the share of the question's words held
    highlights: tuple[tuple[int, int], ...] = ()  # [start, end) of the matched words in `snippet`


@dataclass(frozen=True)
class SearchResult:
    """A page of hits, the number of all matches and the version the index covered."""

    hits: list[Hit]
    total: int
    version: str | None


def _has(reader: Any) -> Callable[[str, str], bool]:
    """Whether the index holds a term, each asked once (a question asks for its words ~3 times)."""
    known: dict[tuple[str, str], bool] = {}

    def has(field: str, text: str) -> bool:
        found = known.get((field, text))
        if found is None:
            found = known[(field, text)] = (field, text) in reader
        return found

    return has


def _shares(
    searcher: Any, words: tuple[str, ...], docnums: list[int], has: Callable[[str, str], bool]
) -> dict[int, float]:
    """For each document of `docnums`, the idf-weighted share of `words` it holds (see `coverage`)."""
    if not docnums or not words:
        return dict.fromkeys(docnums, 0.0)
    live = searcher.doc_count()
    asked = np.array(docnums, dtype=np.int64)
    held = np.zeros(len(asked), dtype=np.float64)
    weight = 0.0
    for word in words:
        found = doc_ids(searcher, word_query(word, has))
        idf = math.log(1.0 + (live - len(found) + 0.5) / (len(found) + 0.5))
        weight += idf
        held += np.where(np.isin(asked, found), idf, 0.0)  # + 0.0 where not held: the same sums
    return dict(zip(docnums, (held / weight).tolist(), strict=True))


def hidden(hide: Hide | None) -> Any | None:
    """The files `search`'s `hide` names, as one query (None: nothing to hide)."""
    if hide is None:
        return None
    folder, key, values = hide
    terms = [q.Term(FILTER_PREFIX + key, valid_utf8(v)) for v in sorted(values) if v]
    if not terms or _FILTER_KEY.match(key) is None:
        return None
    return q.And([q.Term(DIRS, valid_utf8(folder)), q.Or(terms)])


def constraint(prefix: str | None, filters: Mapping[str, str] | None) -> tuple[Any | None, bool]:
    """The prefix and filters as one query (None: no constraint); False if nothing can match."""
    parts: list[Any] = []
    if prefix:
        prefix = valid_utf8(prefix)
        if "\x00" in prefix:
            return None, False
        # A folder prefix is a single term of DIRS; any other prefix expands over matching paths.
        parts.append(q.Term(DIRS, prefix) if prefix.endswith("/") else q.Prefix(PATH, prefix))
    for key, value in (filters or {}).items():
        if _FILTER_KEY.match(key) is None or not value:
            return None, False
        parts.append(q.Term(FILTER_PREFIX + key, valid_utf8(value)))
    if not parts:
        return None, True
    return (parts[0] if len(parts) == 1 else q.And(parts)), True


def _list(searcher: Any, within: Any | None, limit: int, offset: int, version: str | None) -> SearchResult:
    # The meta document has no prefix or filter terms, but Every() would match it.
    listing = within if within is not None else q.AndNot(q.Every(), q.Term(PATH, META_PATH))
    results = searcher.search(listing, limit=max(1, offset + limit), sortedby=PATH)
    hits = [
        Hit(
            path=hit[PATH],
            score=0.0,
            snippet=make_snippet(hit.get("body", ""), frozenset()).text,
            fields=dict(hit.get(FIELDS) or {}),
        )
        for hit in results[offset : offset + limit]
    ]
    return SearchResult(hits, len(results), version)


def _stepping(
    searcher: Any, full: Any, limit: int, parsed: ParsedQuery, exclude: Any | None
) -> tuple[list[tuple[float, int, str]], int]:
    tiers: list[frozenset[int]] = []
    for tier in parsed.tiers:  # each tier lies within the one before: stop at the first empty one
        docs = frozenset(searcher.docs_for_query(tier))
        if not docs:
            break
        tiers.append(docs)
    excluded = frozenset(searcher.docs_for_query(exclude)) if exclude is not None else frozenset()
    ranked, total = collect(searcher, full, limit, tiers, excluded, key=PATH)
    return [(score, d, searcher.stored_fields(d)[PATH]) for score, d in ranked], total


def search(
    searcher: Any,
    version: str | None,
    query: str,
    *,
    limit: int,
    offset: int,
    within: Any | None,
    hide: Any | None,
    snippets: bool,
    coverage: bool,
    stepping: bool,
) -> SearchResult:
    """SearchIndex.search over `searcher`, with the prefix and filters as the query `within`
    (`constraint`) and the hidden files as the query `hide` (`hidden`)."""
    if not query.strip():
        if hide is not None:
            listed = within if within is not None else q.AndNot(q.Every(), q.Term(PATH, META_PATH))
            within = q.AndNot(listed, hide)
        return _list(searcher, within, limit, offset, version)
    has = _has(searcher.reader())
    parsed = parse_query(query, has)
    if parsed.match is None:
        return SearchResult([], 0, version)
    exclude = parsed.exclude
    if hide is not None:
        exclude = hide if exclude is None else q.Or([exclude, hide])
    # Our own collectors: Whoosh's skips by quality and breaks under the restriction (collect.py).
    if stepping:
        full = parsed.match if within is None else q.Require(parsed.match, within)
        ranked, total = _stepping(searcher, full, offset + limit, parsed, exclude)
    else:
        ranked, total = collect_arrays(
            searcher, parsed.match, offset + limit, parsed.tiers, exclude, PATH, within
        )
    page = ranked[offset : offset + limit]
    shares = _shares(searcher, parsed.words, [d for _, d, _ in page], has) if coverage else {}
    hits = []
    for score, docnum, path in page:
        if snippets:
            stored = searcher.stored_fields(docnum)
            snippet = make_snippet(stored.get("body", ""), parsed.highlight)
            fields = dict(stored.get(FIELDS) or {})
        else:
            snippet, fields = Snippet("", ()), {}
        share = shares.get(docnum) if coverage else None
        hits.append(Hit(path, score, snippet.text, fields, share, snippet.highlights))
    return SearchResult(hits, total, version)


def coverage(searcher: Any, query: str, paths: Collection[str]) -> dict[str, float]:
    """SearchIndex.coverage over `searcher`: for each indexed file of `paths`, the idf-weighted
    share of `query`'s words it holds."""
    numbers: dict[int, str] = {}
    for path in paths:
        number = searcher.document_number(**{PATH: path})
        if number is not None:
            numbers[number] = path
    shares = _shares(searcher, question_words(query), list(numbers), _has(searcher.reader()))
    return {path: shares[number] for number, path in numbers.items()}
