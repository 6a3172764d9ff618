"""Snippets: the best window of a body with matched terms wrapped in ** (Markdown bold)."""

from __future__ import annotations

import re
from collections.abc import Set

from kbserver.index.analysis import TEXT_ANALYZER, is_cjk

__all__ = ["make_snippet"]

_WIDTH = 200  # characters of body shown
_LEAD = 40  # context kept before the first match in the window
_SCAN = 50_000  # characters of a long body searched for matches (analysis is ~1 µs a character)
_SPACE = re.compile(r"\s+")


def _spans(body: str, terms: Set[str]) -> list[tuple[int, int]]:
    spans = [(t.startchar, t.endchar) for t in TEXT_ANALYZER(body, chars=True) if t.text in terms]
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


def _clip(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def make_snippet(body: str, terms: Set[str]) -> str:
    """About 200 characters of `body` around the most matches, or the start of it when nothing matches."""
    spans = _spans(body[:_SCAN], terms) if terms else []
    if not spans:
        head = _clip(body[: _WIDTH + 1])
        return head if len(head) <= _WIDTH else head[:_WIDTH].rstrip() + "…"
    start, end = _window(body, spans)
    parts: list[str] = ["…" if start else ""]
    cursor = start
    for span_start, span_end in spans:
        if span_end <= start or span_start >= end:
            continue
        span_start, span_end = max(span_start, cursor), max(span_end, cursor)
        parts.append(body[cursor:span_start])
        parts.append(f"**{body[span_start:span_end]}**")
        cursor = span_end
    end = max(end, cursor)
    parts.append(body[cursor:end])
    parts.append("…" if end < len(body) else "")
    return _clip("".join(parts))
