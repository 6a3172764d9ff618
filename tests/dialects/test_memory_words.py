"""The words a hybrid memory search reads (kbserver/dialects/memory_words.py)."""

from __future__ import annotations

import pytest

from kbserver.dialects import memory_words
from kbserver.dialects.memory import memory_search
from kbserver.dialects.memory_words import plain
from kbserver.dialects.session import DialectCall
from kbserver.services import Services
from kbserver.services.access.auth import caller_for
from tests.helpers import memory_caller


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
    monkeypatch.setattr(memory_words, "PLAIN_WORDS", False)
    call = DialectCall(services, caller_for(services, "alice"))
    required = {m.content: m.score for m in memory_search(call, question).memories}
    assert read[notes[0]] > required[notes[0]] + 0.05  # its words count: coverage joins the cosine
    assert read[notes[1]] == required[notes[1]]


def _searched(services: Services, kb: str, contents: list[str], question: str) -> dict[str, float]:
    found = memory_search(memory_caller(services, kb, contents), question).memories
    return {m.content: m.score for m in found}
