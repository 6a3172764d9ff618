"""The time a search text names, resolved against the time it is asked (services/reading/when.py)."""

from __future__ import annotations

import datetime

import pytest

from kbserver.services.reading.when import window

UTC = datetime.UTC
NOW = datetime.datetime(2024, 1, 20, 15, 30, tzinfo=UTC)  # a Saturday afternoon


def _days(text: str, now: datetime.datetime = NOW) -> tuple[str, str] | None:
    span = window(text, now)
    return None if span is None else (span[0].date().isoformat(), span[1].date().isoformat())


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("What happened to Elise in the library on 5 January 2024?", ("2024-01-05", "2024-01-06")),
        ("Where is Paola going on the 10th of February 2024?", ("2024-02-10", "2024-02-11")),
        ("How many naps on January 6 2024?", ("2024-01-06", "2024-01-07")),
        ("What happened on the 17th of January, 2024 with a cat?", ("2024-01-17", "2024-01-18")),
        ("the 2023-12-30 dinner", ("2023-12-30", "2023-12-31")),
        ("what did I cook yesterday?", ("2024-01-19", "2024-01-20")),
        ("the movie last night", ("2024-01-19", "2024-01-20")),
        ("the plan for today", ("2024-01-20", "2024-01-21")),
        ("what did we do last Saturday?", ("2024-01-13", "2024-01-14")),  # today is a Saturday
        ("what did I buy on Friday?", ("2024-01-19", "2024-01-20")),
        ("what did I read on Saturday?", ("2024-01-20", "2024-01-21")),
        ("the trip last week", ("2024-01-08", "2024-01-15")),
        ("what did I say this week?", ("2024-01-15", "2024-01-21")),
        ("the bill last month", ("2023-12-01", "2024-01-01")),
        ("what we did in May", ("2023-05-01", "2023-06-01")),  # the last May up to now
        ("the dinner on 25 December", ("2023-12-25", "2023-12-26")),
        ("a week ago", ("2024-01-12", "2024-01-15")),
    ],
)
def test_phrases_resolve_to_the_days_they_name(text: str, days: tuple[str, str]) -> None:
    assert _days(text) == days


@pytest.mark.parametrize(
    "text",
    [
        "What does Alice drink in the morning?",
        "I may 10x the budget",  # "may" the verb
        "Did Vanessa take the test before December 23rd, 2023?",  # a bound, not the day itself
        "What changed since 5 January?",
        "on 31 February",  # no such day
    ],
)
def test_no_time_named_leaves_the_search_alone(text: str) -> None:
    assert window(text, NOW) is None


def test_the_first_phrase_wins_and_the_span_keeps_the_zone() -> None:
    plus2 = datetime.timezone(datetime.timedelta(hours=2))
    span = window("yesterday, not on 5 January", NOW.astimezone(plus2))
    assert span is not None
    assert span[0] == datetime.datetime(2024, 1, 19, tzinfo=plus2)
    assert span[1] - span[0] == datetime.timedelta(days=1)
