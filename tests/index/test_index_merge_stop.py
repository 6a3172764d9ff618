"""SearchIndex.merge(stop=...): a merge asked to stop gives up and leaves the index exactly as it
was (segments, version, files, searches); one cut short again and again still completes once a
pause is long enough."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kbserver.index import SearchIndex, private

_HAN = [chr(0x4E00 + k * 7) for k in range(90)]


def _text(i: int) -> str:
    """Half Chinese (many rare bigrams: many terms), half English."""
    if i % 2:
        return "".join(_HAN[(i * 11 + k * k) % len(_HAN)] for k in range(40)) + f" walrus{i % 5}"
    return f"walrus note{i} " + " ".join(f"word{(i * k) % 97}" for k in range(30))


def _filled(folder: Path) -> SearchIndex:
    """An index of a 300-note rebuild and a tail of 12 updates of 25 notes (one deletes a note):
    a full merge folds the tail's 300 notes, some thousand terms."""
    ix = SearchIndex(folder)
    ix.rebuild("v0", [(f"big/n{i}.md", _text(i)) for i in range(300)])
    for u in range(12):
        notes = {f"tail/n{u}-{k}.md": _text(1000 + u * 25 + k) for k in range(25)}
        ix.update(f"v{u + 1}", notes, ["big/n7.md"] if u == 5 else [])
    return ix


def _state(ix: SearchIndex) -> tuple[Any, ...]:
    """What a merge may change: the live segments, the version, the files, what searches find."""
    toc = private.read_toc(ix._write_index())
    folder = ix._folder.root
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    searches = [
        [(h.path, round(h.score, 6)) for h in ix.search(q, limit=50, snippets=False).hits]
        for q in ("walrus", "walrus3 note4", _HAN[3] + _HAN[10], "word5")
    ]
    ids = [s.segment_id() for s in toc.segments]
    return ids, toc.generation, ix.indexed_version(), files, searches, ix.search("walrus", limit=1).total


def _found(state: tuple[Any, ...]) -> list[list[str]]:
    return [sorted(path for path, _ in hits) for hits in state[4]]


def _after(calls: int) -> tuple[Callable[[], bool], list[int]]:
    """A stop() that says True from its `calls`-th question on, and the count of questions."""
    asked = [0]

    def stop() -> bool:
        asked[0] += 1
        return asked[0] >= calls

    return stop, asked


@pytest.mark.parametrize("small", [False, True])
def test_a_merge_asked_to_stop_leaves_the_index_as_it_was(tmp_path: Path, small: bool) -> None:
    ix = _filled(tmp_path / "ix")
    try:
        before = _state(ix)
        stop, asked = _after(10**9)
        assert ix.merge(small=small, stop=stop)  # on a copy: how often a whole merge asks
        total = asked[0]
        assert total >= 4  # asked before every segment and as it goes
    finally:
        ix.close()
    ix = _filled(tmp_path / "again")
    try:
        before = _state(ix)
        for calls in sorted({1, 2, 3, total // 2, total - 1, total}):  # every stage of the merge
            stop, asked = _after(calls)
            assert ix.merge(small=small, stop=stop) is False
            assert asked[0] == calls
            assert _state(ix) == before  # same segments and version, no stray file, same searches
        ix.update("v13", {"new.md": "walrus after the stops"}, [])  # the writer lock was released
        assert ix.merge(small=small) is True
        assert ix.indexed_version() == "v13"
        assert ix.search("walrus", limit=1).total == before[-1] + 1
    finally:
        ix.close()


def test_a_merge_cut_short_again_and_again_completes_once_a_pause_is_long_enough(tmp_path: Path) -> None:
    ix = _filled(tmp_path / "ix")
    try:
        before = _state(ix)
        attempts, calls = 0, 1
        while attempts < 100:  # each pause longer than the one before
            attempts += 1
            stop, _ = _after(calls)
            if ix.merge(stop=stop):
                break
            calls += calls // 2 + 1
        assert attempts > 3  # it was cut short
        after = _state(ix)
        assert len(after[0]) <= 2 and after[2] == "v12"
        assert _found(after) == _found(before)  # the same files found (scores lose the deleted note)
        assert ix.merge() is False  # nothing left to merge
    finally:
        ix.close()

    reopened = SearchIndex(tmp_path / "ix")  # what another process reads
    try:
        assert _found(_state(reopened)) == _found(before) and reopened.indexed_version() == "v12"
    finally:
        reopened.close()
