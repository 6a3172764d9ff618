"""Pure rules of the `semantic` tool set: argument checks, ranking, reinforcement and reminders.

No I/O. Ranking is `0.6·similarity + 0.3·importance + 0.1·recency` (CONTRACT §5): similarity in
[0, 1], the importance as reinforced by use, and a recency that halves every RECENCY_HALF_LIFE_DAYS
since the memory was last retrieved (or created), computed when the query runs. Reminders are an
RFC 3339 `remind_at` and an optional RFC 5545 RRULE evaluated with python-dateutil. `remind_at` may
carry an RFC 9557 time zone (`2026-03-02T09:00:00+01:00[Europe/Paris]`): the rule then repeats at
the same wall-clock time in that zone across daylight-saving changes; with an offset alone, at the
same offset.

The work per reminder is bounded: `remind_at` lies in REMIND_AT_YEARS, a rule without COUNT is
evaluated from the start of its period that holds `now` (never stepped from a remind_at years
back), a COUNT rule holds at most MAX_COUNT occurrences within COUNT_WITHIN of remind_at, and the
next occurrence is remembered until it passes (a process-wide cache, the one state kept here).
"""

from __future__ import annotations

import datetime
import math
import re
import threading
import zoneinfo
from collections import OrderedDict

from dateutil.rrule import rrule, rrulestr

from kbserver.core.errors import InvalidRequest
from kbserver.dialects.memory_records import MEMORY_TYPES, Memory, parse_time
from kbserver.dialects.typed_records import terms

__all__ = [
    "COUNT_WITHIN",
    "FREQUENCIES",
    "MAX_COUNT",
    "MIN_SIMILARITY",
    "RECENCY_HALF_LIFE_DAYS",
    "REINFORCE_KEEP",
    "RELATED_SIMILARITY",
    "REMIND_AT_YEARS",
    "SUPERSEDE_SIMILARITY",
    "WEIGHTS",
    "anchored",
    "check_content",
    "check_importance",
    "check_memory_type",
    "check_recurrence",
    "check_user_id",
    "coverage",
    "next_due",
    "parse_remind_at",
    "recency",
    "score",
]

SUPERSEDE_SIMILARITY = 0.9
"""A new memory at least this similar to a live one (same user_id, memory_type) supersedes it."""
MIN_SIMILARITY = 0.2
"""A search returns only memories at least this similar to the query, so that an important but
unrelated memory does not fill the result (e5 cosines of unrelated texts are near 0)."""
RELATED_SIMILARITY = 0.35
"""recall_related: a memory this similar to the best hit is related to it, whatever the query says
(e5 cosines of two stored texts: ~0.1-0.3 unrelated, ~0.35-0.6 about the same thing, >0.9 the same)."""
REINFORCE_KEEP = 0.95
"""Each retrieval moves the effective importance s toward 1 as `0.95·s + 0.05`."""
RECENCY_HALF_LIFE_DAYS = 7.0
WEIGHTS = (0.6, 0.3, 0.1)  # similarity, importance, recency
FREQUENCIES = ("DAILY", "WEEKLY", "MONTHLY", "YEARLY")
"""RRULE frequencies accepted: finer ones (HOURLY, MINUTELY, SECONDLY) are not reminders, and a rule
that never matches would make dateutil count every second until the year 9999."""
_FIRST_WITHIN = datetime.timedelta(days=5 * 366)
REMIND_AT_YEARS = (1900, 2199)
"""The years a remind_at may fall in (a birthday's first year fits; the year 1 or 9999 does not)."""
MAX_COUNT = 1000
"""The most occurrences a COUNT rule may have."""
COUNT_WITHIN = datetime.timedelta(days=10 * 366)
"""A COUNT rule's occurrences all fall this soon after remind_at (a longer one uses UNTIL): a COUNT
rule counts from remind_at, so it is stepped from there, and this bounds that."""
_WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_USER_ID = re.compile(r"^[^\x00-\x1f\x7f]{1,128}$")
_ZONE_SUFFIX = re.compile(r"\[(?P<critical>!?)(?P<zone>[^\[\]=]{1,64})\]\Z")  # RFC 9557, a zone only


def check_content(value: object) -> str:
    text = value.strip() if isinstance(value, str) else ""
    if not text:
        raise InvalidRequest("content must not be empty")
    return text


def check_memory_type(value: object) -> str:
    if value not in MEMORY_TYPES:
        raise InvalidRequest(f"memory_type must be one of {', '.join(MEMORY_TYPES)}", memory_type=value)
    return str(value)


def check_user_id(value: object) -> str:
    text = value.strip() if isinstance(value, str) else ""
    if not _USER_ID.match(text):
        raise InvalidRequest("user_id must be 1 to 128 characters without control characters", user_id=value)
    return text


def check_importance(value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0.0 <= value <= 1.0
    ):
        raise InvalidRequest("importance must be a number from 0 to 1", importance=value)
    return float(value)


def parse_remind_at(value: str) -> datetime.datetime:
    """The instant of an RFC 3339 time, in the time zone of an RFC 9557 suffix if it has one (then a
    rule repeats at that zone's wall-clock time). A critical suffix (`[!Europe/Paris]`) must agree
    with the offset. Raises InvalidRequest."""
    suffix = _ZONE_SUFFIX.search(value)
    if suffix is None:
        return _bounded(parse_time(value, "remind_at"), value)
    instant = _bounded(parse_time(value[: suffix.start()], "remind_at"), value)
    name = suffix["zone"]
    try:
        zone = zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidRequest(
            f"remind_at: unknown time zone [{name}] (an IANA name such as Europe/Paris)", remind_at=value
        ) from None
    local = instant.astimezone(zone)
    if suffix["critical"] and local.utcoffset() != instant.utcoffset():
        raise InvalidRequest(
            f"remind_at: the offset does not agree with the time zone {name}", remind_at=value
        )
    return local


def _bounded(when: datetime.datetime, value: str) -> datetime.datetime:
    first, last = REMIND_AT_YEARS
    if not first <= when.astimezone(datetime.UTC).year <= last:
        raise InvalidRequest(
            f"remind_at must fall in the years {first} to {last}",
            remind_at=value,
            min_year=first,
            max_year=last,
        )
    return when


def _rule(recurrence: str, start: datetime.datetime) -> rrule:
    try:
        parsed = rrulestr(recurrence, dtstart=start)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidRequest(
            f"recurrence must be an RFC 5545 RRULE such as FREQ=WEEKLY;BYDAY=MO ({exc})",
            recurrence=recurrence,
        ) from None
    if not isinstance(parsed, rrule):
        raise InvalidRequest("recurrence must be one RRULE (no RDATE or EXDATE)", recurrence=recurrence)
    return parsed


def _parts(rule: str) -> dict[str, str]:
    return dict(p.split("=", 1) for p in rule.upper().split(";") if "=" in p)


def _first(parsed: rrule, start: datetime.datetime, interval: int) -> datetime.datetime | None:
    """The rule's first occurrence within five years of `start`, or None.

    dateutil tests UNTIL and COUNT only on dates that match the rule, so a rule that never matches
    (the 30th of February) runs on to the year 9999: seconds for a daily rule. The same question is
    asked of the rule moved by whole 400-year cycles (the Gregorian calendar, weekdays included,
    repeats exactly every 400 years; 400·INTERVAL keeps the interval's phase too) close to the year
    9999, so that even a never-matching rule stops within one cycle.
    """
    cycle = 400 * interval
    shift = cycle * max(0, (datetime.MAXYEAR - 5 - start.year) // cycle)
    until = parsed._until  # dateutil exposes no public getter
    try:
        moved_until = None if until is None else until.replace(year=until.year + shift)
    except ValueError:  # past the year 9999: the rule ends after the window anyway
        moved_until = None
    moved_start = start.replace(year=start.year + shift)
    probe = parsed.replace(dtstart=moved_start, until=moved_until)
    first = next(iter(probe), None)
    if not isinstance(first, datetime.datetime) or first > moved_start + _FIRST_WITHIN:
        return None
    return first.replace(year=first.year - shift)


def check_recurrence(value: object, remind_at: str | None) -> str:
    """The RRULE (without an `RRULE:` prefix), when it is one rule of a reminder's frequency whose first
    occurrence comes within five years of `remind_at`. Raises InvalidRequest."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest("recurrence must be an RRULE such as FREQ=WEEKLY;BYDAY=MO", recurrence=value)
    if remind_at is None:
        raise InvalidRequest(
            "recurrence needs remind_at: the first occurrence, from which the rule repeats",
            recurrence=value,
        )
    rule = value.strip()
    rule = rule[len("RRULE:") :] if rule.upper().startswith("RRULE:") else rule
    if "\n" in rule or "\r" in rule or ":" in rule:
        raise InvalidRequest(
            "recurrence must be one RRULE line (DTSTART is remind_at; no RDATE or EXDATE)", recurrence=value
        )
    parts = _parts(rule)
    if parts.get("FREQ") not in FREQUENCIES:
        raise InvalidRequest(f"recurrence: FREQ must be one of {', '.join(FREQUENCIES)}", recurrence=value)
    if len([s for s in parts.get("BYSECOND", "").split(",") if s.strip()]) > 1:
        # Refused before the rule is parsed: 40 rules of every second of the day made each
        # list_due_memories step through 86,400 occurrences a rule (6-10 s).
        raise InvalidRequest(
            "recurrence: a reminder repeats at most once a minute; BYSECOND may name one second",
            recurrence=value,
        )
    interval = parts.get("INTERVAL", "1")
    if not interval.isdigit() or not 1 <= int(interval) <= 1000:
        raise InvalidRequest("recurrence: INTERVAL must be a whole number from 1 to 1000", recurrence=value)
    count = parts.get("COUNT")
    if count is not None and (not count.isdigit() or not 1 <= int(count) <= MAX_COUNT):
        raise InvalidRequest(
            f"recurrence: COUNT must be a whole number from 1 to {MAX_COUNT} (or use UNTIL)",
            recurrence=value,
            max_count=MAX_COUNT,
        )
    start = parse_remind_at(remind_at)
    parsed = _rule(rule, start)
    if _first(parsed, start, int(interval)) is None:
        raise InvalidRequest("recurrence never occurs in the five years after remind_at", recurrence=value)
    if count is not None:
        # Stepped from remind_at to its COUNT-th match, or to its first match past the bound: the
        # calendar repeats and the rule matched within five years (above), so that comes soon.
        within = start + COUNT_WITHIN
        for when in parsed:
            if when > within:
                raise InvalidRequest(
                    "recurrence: a COUNT rule must end within ten years of remind_at (use UNTIL for "
                    "a longer one)",
                    recurrence=value,
                )
    return rule


def anchored(recurrence: str, start: datetime.datetime, now: datetime.datetime) -> rrule:
    """The rule of `recurrence` from `start`, as it runs from the start of its period that holds
    `now`: the same occurrences from there on, without stepping through the periods before.

    What dateutil takes from DTSTART is written into the rule first (the time of day; the weekday
    of a WEEKLY rule, the day of a MONTHLY one, the day and month of a YEARLY one, when the rule
    names none), then DTSTART moves to the first instant of the latest period at or before `now`
    that is a whole number of INTERVALs after `start`'s. A COUNT rule counts from `start`: it is
    returned as it is (COUNT_WITHIN bounds its steps).
    """
    parts = _parts(recurrence)
    parsed = _rule(recurrence, start)
    if "COUNT" in parts or now <= start:
        return parsed
    extra = {"BYHOUR": start.hour, "BYMINUTE": start.minute, "BYSECOND": start.second}
    freq = parts["FREQ"]
    if not {"BYWEEKNO", "BYYEARDAY", "BYMONTHDAY", "BYDAY", "BYEASTER"} & parts.keys():
        if freq == "YEARLY":
            extra["BYMONTH"] = start.month
            extra["BYMONTHDAY"] = start.day
        elif freq == "MONTHLY":
            extra["BYMONTHDAY"] = start.day
        elif freq == "WEEKLY":
            extra["BYDAY"] = start.weekday()
    filled = ";".join(
        [recurrence]
        + [f"{k}={_WEEKDAYS[v] if k == 'BYDAY' else v}" for k, v in extra.items() if k not in parts]
    )
    interval = int(parts.get("INTERVAL", "1"))
    here = now.astimezone(start.tzinfo)
    day = start.date()
    if freq == "YEARLY":
        years = (here.year - start.year) // interval * interval
        first = datetime.date(start.year + years, 1, 1)
    elif freq == "MONTHLY":
        months = ((here.year - start.year) * 12 + here.month - start.month) // interval * interval
        index = start.year * 12 + start.month - 1 + months
        first = datetime.date(index // 12, index % 12 + 1, 1)
    elif freq == "WEEKLY":
        wkst = _WEEKDAYS.index(parts.get("WKST", "MO"))
        week = day - datetime.timedelta(days=(day.weekday() - wkst) % 7)
        weeks = (here.date() - week).days // 7 // interval * interval
        first = week + datetime.timedelta(weeks=weeks)
    else:  # DAILY
        first = day + datetime.timedelta(days=(here.date() - day).days // interval * interval)
    moved = datetime.datetime.combine(first, datetime.time(), tzinfo=start.tzinfo)
    if moved <= start:
        return parsed
    return _rule(filled, moved)


_next: OrderedDict[tuple[str, str], tuple[datetime.datetime, datetime.datetime | None]] = OrderedDict()
_next_lock = threading.Lock()
_NEXT_SIZE = 16384


def _next_occurrence(remind_at: str, recurrence: str, now: datetime.datetime) -> datetime.datetime | None:
    """The first occurrence at or after `now`, remembered with the instant it was asked for: until
    `now` passes it, no occurrence lies between (a later `now` gets the same answer unstepped)."""
    key = (remind_at, recurrence)
    with _next_lock:
        kept = _next.get(key)
        if kept is not None:
            _next.move_to_end(key)
    if kept is not None:
        asked, found = kept
        if asked <= now and (found is None or now <= found):
            return found
    check_recurrence(recurrence, remind_at)  # a file edited by hand is checked too
    start = parse_remind_at(remind_at)
    after = anchored(recurrence, start, now).after(now, inc=True)
    found = after if isinstance(after, datetime.datetime) else None
    with _next_lock:
        _next[key] = (now, found)
        _next.move_to_end(key)
        while len(_next) > _NEXT_SIZE:
            _next.popitem(last=False)
    return found


def next_due(memory: Memory, now: datetime.datetime) -> datetime.datetime | None:
    """When the memory is due: its remind_at (also when past: still due), or for a recurring one its
    next occurrence at or after `now` (None once the rule has ended)."""
    if memory.remind_at is None:
        return None
    try:
        if memory.recurrence is None:
            return parse_remind_at(memory.remind_at)
        return _next_occurrence(memory.remind_at, memory.recurrence, now)
    except InvalidRequest:
        return None  # not a reminder any more


def recency(last: datetime.datetime, now: datetime.datetime) -> float:
    """1 just after the last retrieval (or creation), halving every RECENCY_HALF_LIFE_DAYS."""
    days = max(0.0, (now - last).total_seconds() / 86400.0)
    return float(0.5 ** (days / RECENCY_HALF_LIFE_DAYS))


def score(similarity: float, importance: float, recent: float) -> float:
    a, b, c = WEIGHTS
    return a * max(0.0, min(1.0, similarity)) + b * importance + c * recent


def coverage(query: str, content: str) -> float:
    """The share of the query's words (CJK as bigrams) that the content holds: the similarity used
    when there are no embeddings (a deployment with the embedder `none`, or one not embedded yet)."""
    wanted = set(terms(query))
    if not wanted:
        return 0.0
    return len(wanted & set(terms(content))) / len(wanted)
