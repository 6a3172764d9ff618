"""A searching index maps none of its segment files, reads them correctly, and lets go on close."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbserver.index import SearchIndex

pytestmark = pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc")


def _mapped(folder: Path) -> list[str]:
    return [line for line in Path("/proc/self/maps").read_text().splitlines() if str(folder) in line]


def _open_files(folder: Path) -> list[str]:
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(str(folder)) and target.endswith(".seg"):
            found.append(target)
    return found


def test_segments_are_read_not_mapped_and_closed_with_the_index(tmp_path: Path) -> None:
    folder = tmp_path / "ix"
    ix = SearchIndex(folder)
    for n in range(4):  # a segment each
        ix.update(f"v{n}", {f"notes/n{n}.md": f"alder birch {n} cedar word{n}"}, [])
    other = SearchIndex(folder)  # a second reader of the same folder, as a follower beside a server
    assert [h.path for h in other.search("word2").hits] == ["notes/n2.md"]
    assert other.search("birch").total == 4
    assert _mapped(folder) == []
    assert _open_files(folder)  # one descriptor per open segment instead
    ix.merge()  # deletes the segments `other` reads; it answers from the ones it holds, then reopens
    assert other.search("cedar").total == 4
    ix.update("v9", {"notes/n9.md": "word9"}, ["notes/n0.md"])
    assert [h.path for h in other.search("word9").hits] == ["notes/n9.md"]
    assert other.search("word0").total == 0
    assert _mapped(folder) == []
    ix.close()
    other.close()
    assert _open_files(folder) == []
