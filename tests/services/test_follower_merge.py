"""The index sink's merge at a pause gives way to new commits: a burst that comes while the tail is
being merged is indexed at once, not after the merge (issue 37), and the merge runs again at the
next pause."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kbserver.index import private
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.context import Options
from kbserver.services.following.catching_up import Delta
from kbserver.services.following.indexing import MERGE_AFTER_UPDATES, SearchSink
from kbserver.wiring import open_services
from tests.services.test_follower import _write
from tests.services.test_follower_load import _can_raise, _nice


class HeldMergeSink(SearchSink):
    """The real index sink, followed under another name, that records its applies and merges in
    order. Once `armed`, its merge at a pause is held at its third look at `stop` (the merge under
    way, a segment folded) until `go` is set; before that it merges nothing at a pause."""

    name = "held-index"

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.armed = False
        self.merging = threading.Event()
        self.go = threading.Event()
        self.events: list[tuple[str, str | int]] = []
        self.tid = 0  # the thread that merges (the polite one)

    def apply(self, delta: Delta) -> None:
        super().apply(delta)
        self.events.append(("applied", delta.version))

    def unmerged(self) -> int:
        with self._pool.lease("notes") as ix:
            return ix.unmerged

    def segments(self) -> int:
        with self._pool.lease("notes") as ix:
            return len(private.read_toc(ix._write_index()).segments)

    def idle(self, paused: bool, stop: Callable[[], bool]) -> None:
        if not paused or not self.armed:
            return
        looks = [0]

        def held() -> bool:
            looks[0] += 1
            if looks[0] == 3 and not self.merging.is_set():
                self.tid = threading.get_native_id()
                self.events.append(("merging", self.unmerged()))
                self.merging.set()
                assert self.go.wait(60)
            return stop()

        super().idle(paused, held)
        self.events.append(("merge returned", self.unmerged()))


def _until(check: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + 60
    while not check() and time.monotonic() < deadline:
        time.sleep(0.01)
    return check()


def _held(tmp_path: Path, options: Options) -> tuple[Services, HeldMergeSink]:
    """Services following a KB `notes` (and a KB `other`) whose tail of one-note updates is being
    merged at a pause, the merge held (`go` not set)."""
    sink = HeldMergeSink(tmp_path / "held-index")
    services = open_services(tmp_path / "data", options, [sink])
    services.start()
    kbs.create(services, ADMIN, "notes")
    kbs.create(services, ADMIN, "other")  # its commit is long taken when the merge is held
    services.search_index.search("notes", "gannet")  # a node that follows what it serves: used here
    for i in range(4):  # one delta each: a tail of one-note segments
        if i == 3:
            sink.armed = True  # its pause comes after this delta
        version = _write(services, "notes", f"n{i}.md", f"gannet tail {i}")
        assert _until(lambda v=version: sink.covered("notes") == v)  # type: ignore[misc]
    assert sink.merging.wait(60)  # the merge at the pause is under way
    return services, sink


def test_a_burst_during_a_pause_merge_is_indexed_without_waiting_for_it(tmp_path: Path) -> None:
    base = _nice(threading.get_native_id()) if sys.platform.startswith("linux") else 0
    options = Options(embedder=None, follower_batch_ms=0, follower_nice=10, follower_lag_ms=600_000)
    services, sink = _held(tmp_path, options)
    try:
        burst = _write(services, "notes", "burst.md", "gannet burst")
        assert _until(lambda: services.follower.behind()["held-index"][0] >= 1)  # type: ignore[attr-defined]
        if sys.platform.startswith("linux") and _can_raise():  # far from the lag bound, yet the
            assert _until(lambda: _nice(sink.tid) == base)  # merge gives way at full speed
        sink.go.set()
        # the sink covers the burst inside apply, before its event is recorded: wait for the event
        assert _until(lambda: ("applied", burst) in sink.events)
        at = sink.events.index(("applied", burst))
        merging, returned, applied = sink.events[at - 2 : at + 1]
        assert merging[0] == "merging" and int(merging[1]) >= 3
        assert returned == ("merge returned", merging[1])  # it gave up: the updates still unmerged
        assert applied == ("applied", burst)  # then the burst, not after a merge
        assert _until(lambda: sink.events[-1] == ("merge returned", 0))  # merged at the next pause
        assert sink.unmerged() == 0 and sink.segments() <= 2
        result = sink.search("notes", "gannet", limit=10)
        assert result.total == 5 and result.version == burst
    finally:
        sink.go.set()
        services.close()


def test_a_read_during_a_pause_merge_does_not_cut_it_short(tmp_path: Path) -> None:
    options = Options(
        embedder=None,
        follower_batch_ms=0,
        cache_dir=tmp_path / "cache",
        follow_served=True,
        follow_idle_seconds=600,
    )
    services, sink = _held(tmp_path, options)
    try:
        worker = next(w for w in services.follower._workers if w.sink is sink)  # type: ignore[attr-defined]
        assert services.search_index.search("other", "gannet").total == 0  # its first use, no commit
        assert _until(lambda: "other" in worker.pending)  # handed to the worker, which is merging
        sink.go.set()
        assert _until(lambda: sink.events[-1][0] == "merge returned")
        assert sink.events[-1] == ("merge returned", 0)  # it ran to the end
        assert sink.segments() <= 2
    finally:
        sink.go.set()
        services.close()


def test_a_merge_amid_writes_finishes_though_commits_wait_and_one_at_a_pause_gives_way(
    tmp_path: Path,
) -> None:
    sink = SearchSink(tmp_path / "index")
    try:
        for name in ("amid", "pause"):
            with sink._pool.lease(name) as ix:
                for i in range(MERGE_AFTER_UPDATES):  # a few small segments, as a stream of writes leaves
                    ix.update(f"v{i}", {f"n{i}.md": f"gannet {i}"}, [])
        sink.idle(False, lambda: True)  # commits wait all along: the small merges are short
        for name in ("amid", "pause"):
            with sink._pool.lease(name) as ix:
                assert ix.unmerged == 0 and ix.indexed_version() == f"v{MERGE_AFTER_UPDATES - 1}"
                ix.update("w", {"w.md": "gannet"}, [])
        sink.idle(True, lambda: True)  # the tail merge of a pause gives way at once
        with sink._pool.lease("pause") as ix:
            assert ix.unmerged == 1 and ix.merge() and ix.search("gannet", limit=20).total == 9
    finally:
        sink.close()
