"""The pure rules of the `semantic` set: argument checks, ranking with decay at query time, reminders."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbserver.core.errors import InvalidRequest
from kbserver.dialects.memory_records import Memory, parse_memory, render_memory
from kbserver.dialects.semantic_rules import (
    RECENCY_HALF_LIFE_DAYS,
    check_importance,
    check_memory_type,
    check_recurrence,
    check_user_id,
    coverage,
    next_due,
    parse_remind_at,
    recency,
    score,
)

UTC = datetime.UTC
NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _memory(remind_at: str | None, recurrence: str | None = None) -> Memory:
    return Memory(
        id="0123456789abcdef",
        content="Call the dentist",
        createdAt="2026-11-01T00:00:00Z",
        updatedAt="2026-11-01T00:00:00Z",
        memory_type="task",
        user_id="默认",
        importance=0.5,
        remind_at=remind_at,
        recurrence=recurrence,
    )


def test_score_is_the_contracts_weighting_and_recency_decays_at_query_time() -> None:
    assert score(1.0, 1.0, 1.0) == pytest.approx(1.0)
    assert score(0.5, 0.5, 1.0) == pytest.approx(0.6 * 0.5 + 0.3 * 0.5 + 0.1)
    assert score(-0.3, 0.0, 0.0) == 0.0 and score(1.7, 0.0, 0.0) == pytest.approx(0.6)  # clipped
    assert recency(NOW, NOW) == 1.0 and recency(NOW + datetime.timedelta(days=1), NOW) == 1.0
    week = NOW - datetime.timedelta(days=RECENCY_HALF_LIFE_DAYS)
    assert recency(week, NOW) == pytest.approx(0.5)
    assert recency(NOW - datetime.timedelta(days=70), NOW) < 0.001
    # the same memory, retrieved at the same time, ranks lower the later the query runs
    later = [score(0.5, 0.5, recency(NOW, NOW + datetime.timedelta(days=d))) for d in (0, 1, 10, 100)]
    assert later == sorted(later, reverse=True) and len(set(later)) == 4


def test_argument_checks() -> None:
    assert [check_memory_type(t) for t in ("fact", "preference", "task", "reflection")]
    assert check_importance(0) == 0.0 and check_importance(1) == 1.0 and check_importance(0.25) == 0.25
    assert check_user_id("  alice  ") == "alice" and check_user_id("用户甲") == "用户甲"
    for bad_type in ("Fact", "event", "", None, 3):
        with pytest.raises(InvalidRequest):
            check_memory_type(bad_type)
    for bad_importance in (-0.01, 1.01, float("nan"), float("inf"), True, "0.5", None):
        with pytest.raises(InvalidRequest):
            check_importance(bad_importance)
    for bad_user in ("", "   ", "a\nb", "x" * 129, None, 7):
        with pytest.raises(InvalidRequest):
            check_user_id(bad_user)


def test_recurrence_rules_are_checked_also_when_they_never_occur() -> None:
    start = "2026-12-01T09:00:00+01:00"
    assert check_recurrence("FREQ=WEEKLY;BYDAY=MO", start) == "FREQ=WEEKLY;BYDAY=MO"
    assert check_recurrence("RRULE:FREQ=MONTHLY;BYDAY=FR;BYSETPOS=-1", start).startswith("FREQ=MONTHLY")
    assert check_recurrence("FREQ=DAILY;COUNT=3", start) == "FREQ=DAILY;COUNT=3"
    for bad in (
        "FREQ=HOURLY",  # not a reminder's frequency
        "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30",
        "hello",
        "FREQ=WEEKLY;BYDAY=XX",
        "FREQ=DAILY\nRRULE:FREQ=WEEKLY",
        "EXDATE:20261202T090000Z",
        "FREQ=DAILY;INTERVAL=0",
        "FREQ=DAILY;UNTIL=20270101",  # UNTIL must be UTC with an offset-aware remind_at
        "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30",  # never occurs: dateutil alone would count to 9999
        "FREQ=DAILY;INTERVAL=30;BYMONTH=2;BYMONTHDAY=30;COUNT=2",
        "FREQ=YEARLY;INTERVAL=4;BYMONTH=2;BYMONTHDAY=29",  # 2026, 2030, ... are never leap years
        "FREQ=MONTHLY;BYDAY=FR;BYSETPOS=9",
        "",
    ):
        with pytest.raises(InvalidRequest):
            check_recurrence(bad, start)
    with pytest.raises(InvalidRequest):
        check_recurrence("FREQ=DAILY", None)  # a recurrence repeats from remind_at


def test_next_due_of_one_off_and_recurring_reminders() -> None:
    assert next_due(_memory(None), NOW) is None
    past = _memory("2026-11-30T08:00:00Z")
    assert next_due(past, NOW) == datetime.datetime(2026, 11, 30, 8, tzinfo=UTC)  # still due: overdue
    weekly = _memory("2026-11-02T09:00:00+01:00", "FREQ=WEEKLY;BYDAY=MO")  # Mondays 09:00 +01:00
    due = next_due(weekly, NOW)
    assert due is not None and due.astimezone(UTC) == datetime.datetime(2026, 12, 7, 8, tzinfo=UTC)
    ended = _memory("2026-11-02T09:00:00Z", "FREQ=DAILY;COUNT=2")
    assert next_due(ended, NOW) is None
    by_hand = _memory("2026-11-02T09:00:00Z", "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30")  # edited in a file
    assert next_due(by_hand, NOW) is None
    assert next_due(_memory("not a time"), NOW) is None


def test_a_time_zone_keeps_the_wall_clock_time_across_daylight_saving() -> None:
    """Europe/Paris leaves +01:00 for +02:00 on 29 March 2026: a daily 09:00 reminder with the zone
    stays at 09:00 local (07:00 UTC), one with an offset alone stays at 08:00 UTC."""
    after = datetime.datetime(2026, 3, 30, 0, 0, tzinfo=UTC)
    zoned = next_due(_memory("2026-03-27T09:00:00+01:00[Europe/Paris]", "FREQ=DAILY"), after)
    assert zoned is not None and zoned.astimezone(UTC) == datetime.datetime(2026, 3, 30, 7, tzinfo=UTC)
    fixed = next_due(_memory("2026-03-27T09:00:00+01:00", "FREQ=DAILY"), after)
    assert fixed is not None and fixed.astimezone(UTC) == datetime.datetime(2026, 3, 30, 8, tzinfo=UTC)
    once = next_due(_memory("2026-03-27T09:00:00+01:00[Europe/Paris]"), after)
    assert once is not None and once.astimezone(UTC) == datetime.datetime(2026, 3, 27, 8, tzinfo=UTC)
    assert parse_remind_at("2026-07-01T09:00:00+02:00[!Europe/Paris]").utcoffset() == datetime.timedelta(
        hours=2
    )
    for bad in (
        "2026-07-01T09:00:00+01:00[!Europe/Paris]",  # critical, and Paris is at +02:00 in July
        "2026-07-01T09:00:00+01:00[Mars/Olympus]",
        "2026-07-01T09:00:00+01:00[../../etc/passwd]",
        "2026-07-01T09:00:00[Europe/Paris]",  # RFC 9557 still needs the RFC 3339 offset
    ):
        with pytest.raises(InvalidRequest):
            parse_remind_at(bad)
    assert check_recurrence("FREQ=WEEKLY", "2026-03-27T09:00:00+01:00[Europe/Paris]") == "FREQ=WEEKLY"


def test_semantic_fields_round_trip_through_the_file() -> None:
    memory = _memory("2026-12-01T09:00:00+01:00", "FREQ=WEEKLY;BYDAY=MO").model_copy(
        update={"superseded_by": "fedcba9876543210", "agentId": "alice"}
    )
    text = render_memory(memory)
    assert "remind_at: '2026-12-01T09:00:00+01:00'" in text and "user_id: 默认" in text
    assert parse_memory(text) == memory


def test_word_coverage_is_the_fallback_similarity() -> None:
    assert coverage("tea coffee", "The user prefers tea over coffee.") == 1.0
    assert coverage("how does she take her drinks", "The user prefers tea over coffee.") == 0.0
    assert coverage("周会", "每周五下午三点开团队周会。") == 1.0
    assert coverage("", "x") == 0.0


_texts = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40).map(str.strip)


@settings(max_examples=60, deadline=None)
@given(
    content=_texts.filter(bool),
    kind=st.sampled_from(["fact", "preference", "task", "reflection"]),
    user=_texts.filter(bool),
    importance=st.floats(min_value=0, max_value=1),
    remind=st.one_of(st.none(), st.just("2026-12-01T09:00:00+01:00"), st.just("2027-01-31T23:59:00Z")),
)
def test_any_semantic_memory_round_trips_through_its_file(
    content: str, kind: str, user: str, importance: float, remind: str | None
) -> None:
    memory = _memory(remind, "FREQ=MONTHLY;BYMONTHDAY=-1" if remind else None).model_copy(
        update={"content": content, "memory_type": kind, "user_id": user, "importance": importance}
    )
    assert parse_memory(render_memory(memory)) == memory
