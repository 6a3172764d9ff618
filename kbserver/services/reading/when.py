"""The time a search text speaks of: "yesterday", "last Saturday", "in May", "on 5 January 2024".

`window(text, now)` resolves the first such phrase against `now` (the time the question is asked:
a search's `endTime`, else the newest memory's time) into a span of days `[start, end)`, or None
when the text names no time. Past phrases only ("on Friday" is the last Friday up to today): a
memory is searched for what was said. Plain English patterns, no parser library; a phrase this
does not know leaves the search as it was.
"""

from __future__ import annotations

import datetime
import re

__all__ = ["window"]

_MONTHS = {
    name: n
    for n, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s+(\d{4}))?"
_WEEKDAY = "(" + "|".join(_DAYS) + ")"
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("day month", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}{_YEAR}\b", re.I)),
    ("month day", re.compile(rf"\b{_MONTH}\s+{_DAY}\b{_YEAR}", re.I)),
    ("iso", re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")),
    ("yesterday", re.compile(r"\b(yesterday|last night)\b", re.I)),
    ("today", re.compile(r"\b(today|tonight|this morning|this afternoon|this evening)\b", re.I)),
    ("ago", re.compile(r"\b(\d+|a|one|two|three|a few)\s+(day|week|month)s?\s+ago\b", re.I)),
    ("last week", re.compile(r"\b(last|this|past)\s+(week|weekend|month)\b", re.I)),
    ("weekday", re.compile(rf"\b(?:last|on|this|past)\s+{_WEEKDAY}\b", re.I)),
    ("in month", re.compile(rf"\b(?:in|during|last)\s+{_MONTH}\b{_YEAR}", re.I)),
]
_BOUND = re.compile(r"\b(before|after|since|until|till|by)\s+(the\s+)?$", re.I)  # a bound, not a time
_COUNTS = {"a": 1, "one": 1, "two": 2, "three": 3, "a few": 3}

Span = tuple[datetime.datetime, datetime.datetime]


def _day(when: datetime.datetime) -> datetime.datetime:
    return when.replace(hour=0, minute=0, second=0, microsecond=0)


def _date(now: datetime.datetime, year: str | None, month: int, day: int) -> Span | None:
    """That day of `year`, else of the latest year that puts it on or before `now`."""
    try:
        start = now.replace(year=int(year) if year else now.year, month=month, day=day)
        if not year and _day(start) > now:
            start = start.replace(year=now.year - 1)
    except ValueError:
        return None  # 31 February
    start = _day(start)
    return start, start + datetime.timedelta(days=1)


def _month(now: datetime.datetime, year: str | None, month: int) -> Span:
    y = int(year) if year else (now.year if month <= now.month else now.year - 1)
    start = _day(now.replace(year=y, month=month, day=1))
    after = start.replace(year=y + 1, month=1) if month == 12 else start.replace(month=month + 1)
    return start, after


def _resolve(kind: str, m: re.Match[str], now: datetime.datetime) -> Span | None:
    today = _day(now)
    one = datetime.timedelta(days=1)
    if kind == "day month":
        return _date(now, m.group(3), _MONTHS[m.group(2).lower()], int(m.group(1)))
    if kind == "month day":
        return _date(now, m.group(3), _MONTHS[m.group(1).lower()], int(m.group(2)))
    if kind == "iso":
        return _date(now, m.group(1), int(m.group(2)), int(m.group(3)))
    if kind == "yesterday":
        return today - one, today
    if kind == "today":
        return today, today + one
    if kind == "ago":
        count = int(m.group(1)) if m.group(1).isdigit() else _COUNTS[m.group(1).lower()]
        days = {"day": 1, "week": 7, "month": 30}[m.group(2).lower()] * count
        centre = today - datetime.timedelta(days=days)
        slack = datetime.timedelta(days=max(1, days // 7))  # "three weeks ago" is not to the day
        return centre - slack, centre + slack + one
    if kind == "last week":
        which, unit = m.group(1).lower(), m.group(2).lower()
        if unit == "month":
            first = today.replace(day=1)
            return (first, today + one) if which == "this" else ((first - one).replace(day=1), first)
        monday = today - datetime.timedelta(days=today.weekday())
        if unit == "weekend":
            saturday = monday + datetime.timedelta(days=5)
            saturday = saturday if which == "this" and saturday <= today else saturday - 7 * one
            return saturday, saturday + 2 * one
        return (monday, today + one) if which == "this" else (monday - 7 * one, monday)
    if kind == "weekday":
        back = (today.weekday() - _DAYS.index(m.group(1).lower())) % 7
        if back == 0 and m.group(0).lower().startswith("last"):
            back = 7
        start = today - datetime.timedelta(days=back)
        return start, start + one
    if kind == "in month":
        return _month(now, m.group(2), _MONTHS[m.group(1).lower()])
    return None


def window(text: str, now: datetime.datetime) -> Span | None:
    """The span of days the first time phrase of `text` names, resolved against `now` (whose time
    zone the span takes), or None. The earliest phrase in the text wins; a date beats a weekday."""
    found: list[tuple[int, int, str, re.Match[str]]] = []
    for rank, (kind, pattern) in enumerate(_PATTERNS):
        m = pattern.search(text)
        if m is not None:
            found.append((m.start(), rank, kind, m))
    for _, _, kind, m in sorted(found, key=lambda f: (f[0], f[1])):
        if _BOUND.search(text[: m.start()]):
            continue  # "before 5 January": the question is about what came before, not that day
        span = _resolve(kind, m, now)
        if span is not None:
            return span
    return None
