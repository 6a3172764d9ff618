"""The feed: records appended by several writers are read once each, across a rotation."""

from __future__ import annotations

import multiprocessing
from multiprocessing.process import BaseProcess
from pathlib import Path

from kbserver.store.feed import Covered, Damaged, Feed, FeedReader, Head, Wanted

V = "a" * 40


def _append_many(folder: str, name: str, count: int, max_bytes: int) -> None:
    feed = Feed(Path(folder), max_bytes=max_bytes)
    for i in range(count):
        feed.head(f"{name}-{i}", V)


def test_records_round_trip_and_a_reader_starts_at_the_end(tmp_path: Path) -> None:
    feed = Feed(tmp_path)
    feed.head("old", V)
    reader = feed.reader()
    feed.head("notes", V)
    feed.covered("index", "notes", V)
    feed.damaged("index", "notes")
    feed.wanted("vectors", "notes", V)
    with open(feed.path, "ab") as f:
        f.write(
            b"H bad/slug nothex\nX junk\n W index notes " + V.encode() + b"\nW index notes\n"
        )  # foreign: skipped
    assert reader.poll() == (
        [
            Head("notes", V),
            Covered("index", "notes", V),
            Damaged("index", "notes"),
            Wanted("vectors", "notes", V),
        ],
        False,
    )
    assert reader.poll() == ([], False)
    reader.close()


def test_a_torn_line_is_read_once_complete(tmp_path: Path) -> None:
    feed = Feed(tmp_path)
    reader = feed.reader()
    with open(feed.path, "ab") as f:
        f.write(b"H notes " + V[:10].encode())
    assert reader.poll() == ([], True)  # the file appeared: reconcile
    with open(feed.path, "ab") as f:
        f.write(V[10:].encode() + b"\n")
    assert reader.poll() == ([Head("notes", V)], False)


def _read_while(reader: FeedReader, procs: list[BaseProcess]) -> tuple[list[str], int]:
    seen: list[str] = []
    rotations = 0
    while True:
        alive = any(p.is_alive() for p in procs)
        records, rotated = reader.poll()
        rotations += rotated
        seen += [r.slug for r in records if isinstance(r, Head)]
        if not alive:
            return seen, rotations


def _run_writers(folder: Path, max_bytes: int) -> tuple[list[str], int]:
    Feed(folder).head("start", V)
    reader = Feed(folder).reader()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(folder), f"p{n}", 150, max_bytes)) for n in range(2)]
    for p in procs:
        p.start()
    seen, rotations = _read_while(reader, procs)
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    reader.close()
    return seen, rotations


EXPECTED = {f"p{n}-{i}" for n in range(2) for i in range(150)}


def test_concurrent_writers_lose_and_repeat_no_line(tmp_path: Path) -> None:
    seen, rotations = _run_writers(tmp_path, 4 * 1024 * 1024)
    assert rotations == 0 and sorted(seen) == sorted(EXPECTED)


def test_a_reader_is_told_when_a_rotation_may_have_hidden_lines(tmp_path: Path) -> None:
    seen, rotations = _run_writers(tmp_path, 2_000)
    # Logs rotated away between two polls are never read: the reader says `rotated`, and the
    # follower then reconciles every KB. What it did read is real and never repeated.
    assert rotations >= 1
    assert len(seen) == len(set(seen)) and set(seen) <= EXPECTED
