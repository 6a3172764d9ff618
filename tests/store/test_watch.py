"""The feed's watch (inotify): woken by another process's line, by a rotation and by `close`, not by
the other files of the data folder; and it gives back every descriptor it took."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kbserver.store.feed import Feed, FeedReader, Head
from kbserver.store.watch import FolderWatch

V = "b" * 40

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


def _watch(reader: FeedReader) -> FolderWatch:
    watch = reader.watch()
    assert watch is not None, "inotify refused (per-user instance limit?)"
    return watch


def test_a_line_appended_by_another_process_wakes_the_watch(tmp_path: Path) -> None:
    feed = Feed(tmp_path)
    feed.head("old", V)  # the log exists: the reader starts at its end
    reader = feed.reader()
    watch = _watch(reader)
    try:
        code = "import sys; from pathlib import Path; from kbserver.store.feed import Feed; "
        code += "Feed(Path(sys.argv[1])).head('notes', sys.argv[2])"
        subprocess.run([sys.executable, "-c", code, str(tmp_path), V], check=True, timeout=120)
        assert watch.wait(timeout=60) is True
        assert reader.poll() == ([Head("notes", V)], False)
    finally:
        watch.release()
        reader.close()


def test_other_files_of_the_folder_do_not_wake_it_and_a_rotation_does(tmp_path: Path) -> None:
    feed = Feed(tmp_path, max_bytes=60)
    feed.head("first", V)  # the log exists: the reader starts at its end
    reader = feed.reader()
    watch = _watch(reader)
    try:
        (tmp_path / "control.db-wal").write_bytes(b"x" * 4096)  # e.g. the control database
        (tmp_path / "feed.log.tmp").write_bytes(b"not the feed")
        assert watch.wait(timeout=0.5) is False  # read and dropped: no change of the feed
        feed.head("second", V)  # 49 + 50 bytes: past max_bytes, this append rotates the log
        assert not feed.path.exists() and (tmp_path / "feed.log.1").exists()
        assert watch.wait(timeout=60) is True
        feed.head("third", V)  # a new log: created, then appended to
        assert watch.wait(timeout=60) is True
        records, rotated = reader.poll()
        assert rotated and Head("third", V) in records
    finally:
        watch.release()
        reader.close()


def test_close_wakes_a_waiting_thread_and_release_gives_back_the_descriptors(tmp_path: Path) -> None:
    before = set(os.listdir("/proc/self/fd"))
    watch = FolderWatch.open(tmp_path, ["feed.log"])
    assert watch is not None
    woken: list[bool] = []
    waiter = threading.Thread(target=lambda: woken.append(watch.wait()))
    waiter.start()
    watch.close()
    waiter.join(timeout=60)
    assert not waiter.is_alive() and woken == [False]
    assert watch.wait(timeout=0) is False  # closed for good
    watch.release()
    watch.close()  # after release: nothing to do, nothing raised
    assert set(os.listdir("/proc/self/fd")) == before


def test_a_folder_that_cannot_be_watched_gives_none(tmp_path: Path) -> None:
    assert FolderWatch.open(tmp_path / "missing", ["feed.log"]) is None  # the caller polls then
