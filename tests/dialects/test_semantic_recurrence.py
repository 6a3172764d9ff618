"""Reminder rules are bounded: remind_at's years, COUNT, and the work per next occurrence."""

from __future__ import annotations

import datetime
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbserver.core.errors import InvalidRequest
from kbserver.dialects.memory_records import Memory
from kbserver.dialects.semantic_rules import (
    MAX_COUNT,
    anchored,
    check_recurrence,
    next_due,
    parse_remind_at,
)

UTC = datetime.UTC
NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
_PERIODS = {"ydayset", "mdayset", "wdayset", "ddayset"}  # dateutil builds one per period it steps


@contextmanager
def periods_stepped() -> Iterator[list[int]]:
    """Count the periods dateutil steps through (one *dayset call each) while the block runs."""
    count = [0]

    def profile(frame: FrameType, event: str, _arg: Any) -> Callable[..., Any] | None:
        if event == "call" and frame.f_code.co_name in _PERIODS:
            count[0] += 1
        return None

    sys.setprofile(profile)
    try:
        yield count
    finally:
        sys.setprofile(None)


def _memory(remind_at: str, recurrence: str | None) -> Memory:
    return Memory(
        id="0123456789abcdef",
        content="Water the plants",
        createdAt="2026-11-01T00:00:00Z",
        updatedAt="2026-11-01T00:00:00Z",
        memory_type="task",
        user_id="default",
        importance=0.5,
        remind_at=remind_at,
        recurrence=recurrence,
    )


def test_remind_at_outside_its_years_is_refused_naming_the_bound() -> None:
    for bad in (
        "0001-01-01T09:00:00Z",
        "1899-12-31T23:59:59Z",
        "2200-01-01T00:00:00Z",
        "9999-12-31T09:00:00Z",
    ):
        with pytest.raises(InvalidRequest) as refused:
            parse_remind_at(bad)
        assert "1900 to 2199" in refused.value.message and refused.value.details["min_year"] == 1900
    with pytest.raises(InvalidRequest):
        check_recurrence("FREQ=DAILY", "0001-01-01T09:00:00Z")
    assert parse_remind_at("1900-01-01T00:00:00Z").year == 1900  # a birthday's first year fits


def test_count_is_bounded_and_a_count_rule_ends_within_ten_years() -> None:
    assert check_recurrence(f"FREQ=DAILY;COUNT={MAX_COUNT}", "2026-01-01T09:00:00Z").endswith("1000")
    for bad in (f"FREQ=DAILY;COUNT={MAX_COUNT + 1}", "FREQ=DAILY;COUNT=0", "FREQ=MONTHLY;COUNT=999"):
        with pytest.raises(InvalidRequest) as refused:
            check_recurrence(bad, "2026-01-01T09:00:00Z")
        assert "COUNT" in refused.value.message
    assert check_recurrence("FREQ=YEARLY;UNTIL=21000101T000000Z", "2026-01-01T09:00:00Z")  # UNTIL: no bound


def test_a_reminder_from_long_ago_steps_through_a_few_periods_only() -> None:
    """Before, a daily rule from 1990 stepped through its ~13,500 days on every call (from the year 1,
    ~740,000, 3.7 s of CPU per memory, per list_due_memories and per session start)."""
    old = _memory("1990-01-01T09:00:00Z", "FREQ=DAILY")
    with periods_stepped() as count:
        due = next_due(old, NOW)
    assert due == datetime.datetime(2026, 12, 2, 9, tzinfo=UTC)
    assert count[0] <= 5
    sparse = _memory("1992-02-29T09:00:00Z", "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29")
    with periods_stepped() as count:
        assert next_due(sparse, NOW) == datetime.datetime(2028, 2, 29, 9, tzinfo=UTC)
    assert count[0] <= 366 * 2  # from the start of today's period to the next 29 February
    with periods_stepped() as count:
        again = [next_due(sparse, NOW + datetime.timedelta(days=d)) for d in range(30)]
    assert set(again) == {datetime.datetime(2028, 2, 29, 9, tzinfo=UTC)} and count[0] == 0  # remembered


_RULES = st.sampled_from(
    [
        "FREQ=DAILY",
        "FREQ=DAILY;INTERVAL=3",
        "FREQ=DAILY;BYDAY=MO,FR",
        "FREQ=DAILY;INTERVAL=10;BYMONTH=3,9",
        "FREQ=WEEKLY",
        "FREQ=WEEKLY;INTERVAL=2",
        "FREQ=WEEKLY;INTERVAL=3;BYDAY=TU,SU;WKST=SU",
        "FREQ=WEEKLY;BYDAY=MO,WE,FR;BYSETPOS=-1",
        "FREQ=MONTHLY",
        "FREQ=MONTHLY;INTERVAL=5",
        "FREQ=MONTHLY;BYMONTHDAY=-1",
        "FREQ=MONTHLY;BYDAY=FR;BYSETPOS=-1",
        "FREQ=MONTHLY;INTERVAL=2;BYDAY=1MO,3MO;BYHOUR=8,17",
        "FREQ=YEARLY",
        "FREQ=YEARLY;INTERVAL=4",
        "FREQ=YEARLY;BYMONTH=2",
        "FREQ=YEARLY;BYWEEKNO=20;BYDAY=TH",
        "FREQ=YEARLY;BYYEARDAY=100,-1",
        "FREQ=DAILY;UNTIL=20300101T000000Z",
    ]
)
_STARTS = st.datetimes(
    min_value=datetime.datetime(1995, 1, 1), max_value=datetime.datetime(2026, 12, 31)
).map(lambda d: d.replace(microsecond=0))
_ZONES = st.sampled_from(["Z", "+05:30", "-08:00", "+01:00[Europe/Paris]"])


@settings(max_examples=150, deadline=None)
@given(rule=_RULES, start=_STARTS, zone=_ZONES, ahead=st.integers(min_value=0, max_value=12 * 366 * 24))
def test_the_anchored_rule_has_the_same_next_occurrence_as_the_whole_rule(
    rule: str, start: datetime.datetime, zone: str, ahead: int
) -> None:
    """Moving DTSTART forward keeps every later occurrence: checked against dateutil from the start."""
    offset = "+00:00" if zone == "Z" else zone.split("[")[0]
    remind_at = start.isoformat() + ("Z" if zone == "Z" else zone)
    if "UNTIL" in rule and start.year >= 2030:
        return
    first = parse_remind_at(remind_at)
    now = (first + datetime.timedelta(hours=ahead)).astimezone(UTC)
    try:
        check_recurrence(rule, remind_at)
    except InvalidRequest:
        return  # a rule that never occurs near its start (the checks refuse it at store time)
    from dateutil.rrule import rrulestr

    whole = rrulestr(rule, dtstart=first).after(now, inc=True)
    assert anchored(rule, first, now).after(now, inc=True) == whole, (rule, remind_at, offset, now)


@contextmanager
def occurrences_made() -> Iterator[list[int]]:
    """Count the candidate occurrences dateutil makes (one datetime.combine each) while the block runs."""
    count = [0]

    def profile(frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "c_call" and getattr(arg, "__name__", "") == "combine":
            count[0] += 1
        return None

    sys.setprofile(profile)
    try:
        yield count
    finally:
        sys.setprofile(None)


EVERY = ",".join(str(n) for n in range(24)), ",".join(str(n) for n in range(60))
EVERY_SECOND = f"FREQ=DAILY;BYHOUR={EVERY[0]};BYMINUTE={EVERY[1]};BYSECOND={EVERY[1]}"
EVERY_MINUTE = f"FREQ=DAILY;BYHOUR={EVERY[0]};BYMINUTE={EVERY[1]}"


def test_a_rule_finer_than_a_minute_is_refused_before_any_occurrence_is_made() -> None:
    """40 rules of every second made each list_due_memories step through 86,400 occurrences a rule
    (6-10 s) and a session start 9-11 s; such a rule is refused, and one written by hand is no reminder."""
    with occurrences_made() as count:
        with pytest.raises(InvalidRequest) as refused:
            check_recurrence(EVERY_SECOND, "2026-11-30T00:00:00Z")
        assert "once a minute" in refused.value.message
        hand_written = [
            _memory(f"2026-11-{d:02d}T00:00:00Z", f"RRULE:{EVERY_SECOND}") for d in range(1, 29)
        ] + [_memory("2026-11-30T00:00:00Z", "FREQ=WEEKLY;BYSECOND=0,30")] * 12
        assert [next_due(m, NOW) for m in hand_written] == [None] * 40
    assert count[0] == 0
    assert check_recurrence("FREQ=DAILY;BYSECOND=30", "2026-11-30T00:00:00Z")  # one second: fine


def test_forty_rules_of_every_minute_make_at_most_a_day_of_occurrences_each() -> None:
    rules = [_memory(f"2026-11-{d:02d}T00:00:00Z", EVERY_MINUTE) for d in range(1, 29)]
    rules += [_memory(f"2026-10-{d:02d}T00:00:00Z", EVERY_MINUTE) for d in range(1, 13)]
    with occurrences_made() as count:
        due = [next_due(m, NOW + datetime.timedelta(seconds=17)) for m in rules]
    assert set(due) == {datetime.datetime(2026, 12, 1, 12, 1, tzinfo=UTC)}
    assert count[0] <= 40 * (24 * 60 + 60)  # from the day's start to now, plus the five-year check
