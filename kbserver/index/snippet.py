"""Snippets: the best window of a body as plain text, with the [start, end) offsets of the matched terms."""

from __future__ import annotations

import re
from collections.abc import Set
from typing import NamedTuple

from kbserver.index.analysis import is_cjk, term_spans

__all__ = ["Snippet", "make_snippet"]

_WIDTH = 200  # characters of body shown
_LEAD = 40  # context kept before the first match in the window
_SCAN = 50_000  # characters of a long body searched for matches (analysis is ~0.2-0.3 µs a character)
_SPACE = re.compile(r"\s+")


class Snippet(NamedTuple):
    """Plain text (runs of white space made one space) and where the matched terms are in it."""

    text: str
    highlights: tuple[tuple[int, int], ...]


def _spans(body: str, terms: Set[str]) -> list[tuple[int, int]]:
    spans = term_spans(body, terms)
    for ch in (t for t in terms if len(t) == 1 and is_cjk(t)):
        spans.extend((m.start(), m.end()) for m in re.finditer(re.escape(ch), body))
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        # CJK bigrams overlap (美式, 式咖, 咖啡): one bold run, not three.
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _window(body: str, spans: list[tuple[int, int]]) -> tuple[int, int]:
    # The window starting at the span with the most spans within _WIDTH characters after it.
    best, best_count, j = 0, 0, 0
    for i, (start, _) in enumerate(spans):
        j = max(j, i)
        while j < len(spans) and spans[j][1] <= start + _WIDTH:
            j += 1
        if j - i > best_count:
            best, best_count = i, j - i
    start = max(0, spans[best][0] - _LEAD)
    if start:
        space = body.find(" ", start, spans[best][0])
        start = space + 1 if space >= 0 else start
    return start, min(len(body), start + _WIDTH)


def _join(parts: list[tuple[str, bool]]) -> Snippet:
    """The parts (text, matched) as one plain text with each run of white space made one space and
    none at either end, and the offsets of the matched parts in it (touching ones merged)."""
    out: list[str] = []
    size = 0
    space = False  # white space seen since the last piece written
    marks: list[tuple[int, int]] = []
    for text, matched in parts:
        for i, piece in enumerate(_SPACE.split(text)):
            space = space or i > 0
            if not piece:
                continue
            if space and size:
                out.append(" ")
                size += 1
            space = False
            if matched and marks and marks[-1][1] == size:
                marks[-1] = (marks[-1][0], size + len(piece))
            elif matched:
                marks.append((size, size + len(piece)))
            out.append(piece)
            size += len(piece)
    return Snippet("".join(out), tuple(marks))


def make_snippet(body: str, terms: Set[str]) -> Snippet:
    """About 200 characters of `body` around the most matches, or the start of it when nothing matches."""
    spans = _spans(body[:_SCAN], terms) if terms else []
    if not spans:
        head = _SPACE.sub(" ", body[: _WIDTH + 1]).strip()
        return Snippet(head if len(head) <= _WIDTH else head[:_WIDTH].rstrip() + "…", ())
    start, end = _window(body, spans)
    parts: list[tuple[str, bool]] = [("…" if start else "", False)]
    cursor = start
    for span_start, span_end in spans:
        if span_end <= start or span_start >= end:
            continue
        span_start, span_end = max(span_start, cursor), max(span_end, cursor)
        parts.append((body[cursor:span_start], False))
        parts.append((body[span_start:span_end], True))
        cursor = span_end
    end = max(end, cursor)
    parts.append((body[cursor:end], False))
    parts.append(("…" if end < len(body) else "", False))
    return _join(parts)
