"""`hide`: files under a folder whose filter field names one of some values are left out of hits and total."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kbserver.index import SearchIndex

DOCS = {
    "memories/a1.md": "---\nagentId: alice\n---\n\nAlice's salary review in March\n",
    "memories/a2.md": "---\nagentId: alice\n---\n\nAlice's second salary note\n",
    "memories/b1.md": "---\nagentId: bob\n---\n\nBob's salary question\n",
    "memories/k1.md": "---\ncategory: team\n---\n\nThe salary bands of the team\n",
    "notes/alice.md": "---\nagentId: alice\n---\n\nA salary note outside memories/\n",
}
HIDE = ("memories/", "agentId", ["alice"])


@pytest.fixture
def ix(tmp_path: Path) -> Iterator[SearchIndex]:
    index = SearchIndex(tmp_path / "ix")
    index.update("v1", DOCS, [])
    yield index
    index.close()


@pytest.mark.parametrize("stepping", [False, True])
def test_hidden_files_are_neither_hits_nor_counted(ix: SearchIndex, stepping: bool) -> None:
    every = ix.search("salary", limit=50, stepping=stepping)
    assert every.total == 5
    hidden = ix.search("salary", limit=50, hide=HIDE, stepping=stepping)
    assert sorted(h.path for h in hidden.hits) == ["memories/b1.md", "memories/k1.md", "notes/alice.md"]
    assert hidden.total == 3  # exact: nothing hidden is counted
    page = ix.search("salary", limit=1, offset=1, hide=HIDE, stepping=stepping)
    assert [h.path for h in page.hits] == [h.path for h in hidden.hits][1:2] and page.total == 3
    excluded = ix.search("salary -bob", limit=50, hide=HIDE, stepping=stepping)
    assert sorted(h.path for h in excluded.hits) == ["memories/k1.md", "notes/alice.md"]


def test_a_listing_hides_them_too_and_nothing_to_hide_changes_nothing(ix: SearchIndex) -> None:
    listed = ix.search("", limit=50, prefix="memories/", hide=HIDE)
    assert [h.path for h in listed.hits] == ["memories/b1.md", "memories/k1.md"] and listed.total == 2
    assert ix.search("", limit=50, hide=HIDE).total == 3
    assert ix.search("salary", limit=50, hide=("memories/", "agentId", [])).total == 5
    assert ix.search("salary", limit=50, hide=("memories/", "agentId", ["carol"])).total == 5
