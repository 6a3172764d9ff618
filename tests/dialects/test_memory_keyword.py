"""memory_search's keyword mode on a question that quotes (kbserver/dialects/memory_search.py)."""

from __future__ import annotations

from kbserver.dialects.memory import memory_add, memory_search
from kbserver.dialects.session import DialectCall
from kbserver.services import Services
from kbserver.services.access.auth import caller_for
from tests.helpers import make_agent

NOTES = [
    "The tax forms sit in the folder that is blue, top shelf",
    "We painted the garden shed green last spring",
    "The blue folder of tax forms went to the accountant in March",
]


def _call(services: Services, kb: str) -> DialectCall:
    make_agent(services, "alice", {kb: "read_write"}, tools=["memory"])
    call = DialectCall(services, caller_for(services, "alice"))
    for content in NOTES:
        memory_add(call, content)
    head = services.repos.repo(kb).head()
    assert head is not None and services.progress.wait_blocking(kb, head, 120)
    return call


def _found(call: DialectCall, search: str) -> list[str]:
    return [m.content for m in memory_search(call, search, mode="keyword").memories]


def test_a_quoted_phrase_no_memory_holds_is_read_as_words(services: Services, kb: str) -> None:
    """A question citing a message ("...the 'folder that is green' you said?") found nothing: the
    phrase was required word for word. Its words now rank; a phrase some memory holds still must occur,
    and -word still excludes."""
    call = _call(services, kb)
    found = _found(call, 'Where are the tax forms, in the "green tax folder" you mentioned?')
    assert set(found[:2]) == {NOTES[0], NOTES[2]}  # both hold the tax forms' words
    assert _found(call, 'tax forms in the "blue folder"') == [NOTES[2]]  # held as a phrase: required
    assert set(_found(call, 'the "green tax folder" -accountant')) == {NOTES[0], NOTES[1]}
