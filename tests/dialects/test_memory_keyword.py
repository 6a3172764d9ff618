"""memory_search's keyword mode on a question that quotes (kbserver/dialects/memory_search.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbserver.dialects import memory_search as memory_search_module
from kbserver.dialects.memory import memory_search
from kbserver.dialects.memory_records import Memory, render_memory
from kbserver.dialects.session import DialectCall
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from tests.helpers import memory_caller

NOTES = [
    "The tax forms sit in the folder that is blue, top shelf",
    "We painted the garden shed green last spring",
    "The blue folder of tax forms went to the accountant in March",
]


def _call(services: Services, kb: str) -> DialectCall:
    return memory_caller(services, kb, NOTES)


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


def test_a_filtered_search_ranks_the_memories_passing_it(
    services: Services, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An endTime that leaves out the best keyword matches (newer memories saying "ferry" more often)
    found nothing: the index's best few were asked for, then filtered. The older match is found."""
    monkeypatch.setattr(memory_search_module, "CANDIDATES", 3)
    monkeypatch.setattr(memory_search_module, "KEYWORD_CANDIDATES", 3)
    folder = tmp_path / "corpus"
    notes = [("2024-01-05T09:00:00Z", "Booked the ferry to the islands for Easter")]
    notes += [(f"2024-03-0{d}T09:00:00Z", f"Ferry, ferry and again the ferry: trip {d}") for d in range(1, 7)]
    notes += [("2024-01-06T09:00:00Z", "Groceries: rice, lentils and spinach")]
    for n, (when, content) in enumerate(notes):
        m = Memory(id=f"{n:016x}", content=content, createdAt=when, updatedAt=when)
        (folder / m.path).parent.mkdir(parents=True, exist_ok=True)
        (folder / m.path).write_text(render_memory(m))
    kbs.import_folder(services, ADMIN, "trips", folder, description="trips")
    head = services.repos.repo("trips").head()
    assert head is not None and services.progress.wait_blocking("trips", head, 120)
    call = DialectCall(services, ADMIN)
    for mode in ("keyword", "hybrid"):
        found = memory_search(call, "ferry", mode=mode, kb="trips", endTime="2024-02-01T00:00:00Z").memories
        assert [m.content for m in found][:1] == [notes[0][1]], mode
        unfiltered = memory_search(call, "ferry", mode=mode, kb="trips").memories
        assert notes[0][1] not in [m.content for m in unfiltered][:3], mode  # below the newer ones
