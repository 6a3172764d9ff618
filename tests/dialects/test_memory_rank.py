"""The second look at a hybrid memory search's top places (kbserver/dialects/memory_rank.py)."""

from __future__ import annotations

import pytest

from kbserver.dialects import memory_rank
from kbserver.dialects.memory import memory_search
from kbserver.dialects.memory_rank import names, plain
from kbserver.dialects.session import DialectCall
from kbserver.services import Services
from kbserver.services.access.auth import caller_for
from tests.helpers import memory_caller


def test_names_are_capitalised_words_inside_a_sentence() -> None:
    assert names("What are Kate's hobbies?") == ["kate"]
    assert names("Which cities have both, Kate and Elise, been to?") == ["kate", "elise"]
    assert names("Okay, my guy, the WhatsApp API and this 'Whisper' thing. Tell me more.") == [
        "whatsapp",
        "api",
    ]
    assert names("Where did I go on Friday in May?") == []  # days and months are times, not names
    assert names("Hello there. **Set** it up") == []  # a sentence's or a bullet's first word


def test_plain_takes_the_search_box_operators_out() -> None:
    assert plain('the "custom solution" with -cache and +1') == "the  custom solution  with  cache and  1"
    assert plain("state-of-the-art, 5-10 people") == "state-of-the-art, 5-10 people"


def test_hybrid_reads_a_quoted_phrase_as_words(
    services: Services, kb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message's quotes cite: the memory holding the quoted words apart still counts them (the search
    box's "phrase" operator had left it out of the keyword candidates)."""
    notes = ["The tax forms sit in the folder that is blue, top shelf", "We painted the garden shed green"]
    question = 'Where are the tax forms, in the "blue folder"?'
    read = _searched(services, kb, notes, question)
    monkeypatch.setattr(memory_rank, "PLAIN_WORDS", False)
    call = DialectCall(services, caller_for(services, "alice"))
    required = {m.content: m.score for m in memory_search(call, question).memories}
    assert read[notes[0]] > required[notes[0]] + 0.05  # its words count: coverage joins the cosine
    assert read[notes[1]] == required[notes[1]]


def _searched(services: Services, kb: str, contents: list[str], question: str) -> dict[str, float]:
    found = memory_search(memory_caller(services, kb, contents), question).memories
    return {m.content: m.score for m in found}


NOTES = [
    "Priya booked the ferry to the islands for the long weekend",
    "The long weekend trip: we booked a ferry and a small hotel by the sea",
    "Groceries for the week: rice, lentils and spinach",
]
QUESTION = "What did Priya book for the long weekend trip?"


def test_a_memory_holding_the_questions_name_is_lifted(
    services: Services, kb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off by default (it cost the hand-written set a question); the bench turns it on."""
    boost = 0.15
    monkeypatch.setattr(memory_rank, "NAME_BOOST", boost)
    with_names = _searched(services, kb, NOTES, QUESTION)
    monkeypatch.setattr(memory_rank, "NAME_BOOST", 0.0)
    without = memory_search(DialectCall(services, caller_for(services, "alice")), QUESTION).memories
    plain = {m.content: m.score for m in without}
    named, other = NOTES[0], NOTES[1]
    assert with_names[named] == pytest.approx(min(1.0, plain[named] + boost), abs=2e-4)
    assert with_names[other] == plain[other]  # no name of the question: as the fusion scored it
    assert max(with_names, key=with_names.__getitem__) == named
    assert all(0.0 <= s <= 1.0 for s in with_names.values())


def test_a_name_most_memories_hold_counts_for_none(
    services: Services, kb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a chat every line of a speaker holds the speaker's name: it tells the lines apart little."""
    monkeypatch.setattr(memory_rank, "NAME_BOOST", 0.15)
    notes = ["Priya: the ferry leaves at nine", "Priya: I packed the tent", "Priya: see you at the pier"]
    scored = _searched(services, kb, notes, "When does the ferry leave, Priya?")
    assert len(scored) == 3 and all(s <= 1.0 for s in scored.values())
    assert max(scored, key=scored.__getitem__) == notes[0]
