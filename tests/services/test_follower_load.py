"""The follower out of the requests' way: its sink threads run at a lower OS priority (and only
they), and commits that come close together are applied as one delta, each still waited for exactly."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from kbserver.services import Services, kbs
from kbserver.services.auth import ADMIN
from kbserver.services.context import Options
from kbserver.services.follower import lower_thread_priority
from kbserver.wiring import open_services
from tests.services.test_follower import FileSink, _write

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads have no nice value")


def _nice(native_id: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, native_id)


def _threads() -> dict[str, int]:
    return {t.name: t.native_id for t in threading.enumerate() if t.native_id is not None}


def _started(services: Services, slug: str, sinks: int) -> dict[str, int]:
    """The follower's sink threads once they followed `slug`'s first version (name: native id)."""
    head = services.repos.repo(slug).head()
    assert head is not None and services.progress.wait_blocking(slug, head, 60)
    found = {name: tid for name, tid in _threads().items() if name.startswith("kbserver-sink-")}
    assert len(found) == sinks, found
    return found


@linux_only
@pytest.mark.parametrize("steps", [7, 30])
def test_only_the_sink_threads_run_below_the_requests(tmp_path: Path, steps: int) -> None:
    base = _nice(threading.get_native_id())  # this thread stands for a request's
    sink = FileSink(tmp_path / "files-sink")
    services = open_services(tmp_path / "data", Options(embedder=None, follower_nice=min(steps, 19)), [sink])
    services.start()
    try:
        kbs.create(services, ADMIN, "notes")
        sinks = _started(services, "notes", 2)
        assert set(sinks) == {"kbserver-sink-index", "kbserver-sink-files"}
        for tid in sinks.values():
            assert _nice(tid) == min(19, base + steps)  # capped at the lowest priority there is
        assert _nice(threading.get_native_id()) == base
        assert _nice(_threads()["kbserver-follower"]) == base  # the loop that hands out work
        assert _nice(os.getpid()) == base  # the main thread
    finally:
        services.close()


@linux_only
def test_nice_zero_leaves_every_thread_as_it_was(tmp_path: Path) -> None:
    base = _nice(threading.get_native_id())
    services = open_services(tmp_path / "data", Options(embedder=None, follower_nice=0))
    services.start()
    try:
        kbs.create(services, ADMIN, "notes")
        for tid in _started(services, "notes", 1).values():
            assert _nice(tid) == base
    finally:
        services.close()


@linux_only
def test_lowering_a_thread_leaves_the_others_and_needs_no_privilege() -> None:
    seen: dict[str, int | None] = {}

    def lowered() -> None:
        seen["returned"] = lower_thread_priority(3)
        seen["now"] = _nice(threading.get_native_id())

    base = _nice(threading.get_native_id())
    thread = threading.Thread(target=lowered)
    thread.start()
    thread.join(timeout=60)
    assert seen == {"returned": min(19, base + 3), "now": min(19, base + 3)}
    assert _nice(threading.get_native_id()) == base
    assert lower_thread_priority(0) is None  # nothing to do
    assert _nice(threading.get_native_id()) == base


def test_a_burst_of_commits_is_applied_in_fewer_deltas_and_each_is_covered(tmp_path: Path) -> None:
    # A batch of 2 s (a commit-free half second ends it early): far longer than a write takes
    # even on a busy machine, so the burst's commits stream in and settle into few deltas.
    sink = FileSink(tmp_path / "files-sink")
    services = open_services(tmp_path / "data", Options(embedder=None, follower_batch_ms=2000), [sink])
    services.start()
    try:
        kbs.create(services, ADMIN, "notes")
        first = services.repos.repo("notes").head()
        assert first is not None and services.progress.wait_blocking("notes", first, 60)
        before = sink.attempts
        versions = [_write(services, "notes", f"burst/{i}.md", f"shearwater number{i}") for i in range(12)]
        for version in versions:  # every commit of the burst is waited for exactly...
            assert services.progress.wait_blocking("notes", version, 60)
        assert sink.covered("notes") == versions[-1]
        files = sink.load("notes")["files"]
        assert isinstance(files, dict)
        assert {f"burst/{i}.md" for i in range(12)} <= set(files)
        assert files["burst/11.md"] == "shearwater number11"
        found = services.search_index.search("notes", "shearwater", limit=20).hits
        assert sorted(h.path for h in found) == sorted(f"burst/{i}.md" for i in range(12))
        assert sink.attempts - before < len(versions)  # ...and several went into one delta
    finally:
        services.close()


def test_commits_left_settling_at_a_stop_are_caught_up_by_the_next_follower(tmp_path: Path) -> None:
    sink = FileSink(tmp_path / "files-sink")
    services = open_services(tmp_path / "data", Options(embedder=None, follower_batch_ms=10_000), [sink])
    services.start()
    kbs.create(services, ADMIN, "notes")
    for i in range(3):
        _write(services, "notes", f"n{i}.md", "petrel")
    services.close()  # the sink may still be settling the burst: it stops without applying it
    head = services.repos.repo("notes").head()
    second = FileSink(tmp_path / "files-sink")
    again = open_services(tmp_path / "data", Options(embedder=None), [second])
    again.start()
    try:  # what the stopped follower left is caught up by the next one
        assert head is not None and again.progress.wait_blocking("notes", head, 60)
        assert {"n0.md", "n1.md", "n2.md"} <= set(second.load("notes")["files"])  # type: ignore[arg-type]
    finally:
        again.close()
