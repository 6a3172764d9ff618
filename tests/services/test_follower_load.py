"""The follower out of the requests' way: its sinks' work runs at a lower OS priority (and only
theirs) while close behind, at the requests' priority once past the lag bound, and commits that come
close together are applied as one delta, each still waited for exactly."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.context import Options
from kbserver.services.following.follower import Delta, Pace, lower_thread_priority
from kbserver.services.reading import search
from kbserver.wiring import open_services
from tests.services.test_follower import FileSink, _write

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads have no nice value")


def _nice(native_id: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, native_id)


def _threads() -> dict[str, int]:
    return {t.name: t.native_id for t in threading.enumerate() if t.native_id is not None}


def _started(services: Services, slug: str, sinks: int, polite: bool = True) -> dict[str, int]:
    """The follower's polite threads (or its sink threads) once they followed `slug`'s first
    version (name: native id). Looked for, not waited for: a wait would raise the apply."""
    head = services.repos.repo(slug).head()
    deadline = time.monotonic() + 60
    while head is None or not services.progress.covers(slug, head):
        assert time.monotonic() < deadline, "the first version was not followed within 60 s"
        time.sleep(0.01)
    found = {
        name: tid
        for name, tid in _threads().items()
        if name.startswith("kbserver-sink-") and name.endswith("-polite") == polite
    }
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
        polite = _started(services, "notes", 2)
        assert set(polite) == {"kbserver-sink-index-polite", "kbserver-sink-files-polite"}
        for tid in polite.values():
            assert _nice(tid) == min(19, base + steps)  # capped at the lowest priority there is
        for tid in _started(services, "notes", 2, polite=False).values():
            assert _nice(tid) == base  # the sink threads themselves catch up at full speed
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
        for tid in _started(services, "notes", 1, polite=False).values():
            assert _nice(tid) == base
        assert not [name for name in _threads() if name.endswith("-polite")]  # nothing to be polite in
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


# Commits that stream in settle for a quarter of the batch: 150 s here, far past any wait below,
# so a wait that ends in time was served by the hurry, not by the batch running out.
SLOW_BATCH = Options(
    embedder=None, follower_batch_ms=600_000, follower_lag_ms=600_000, follower_lag_commits=10_000
)


def _streaming(services: Services, sink: FileSink) -> str:
    """A KB `notes` whose first commit is covered: the next commit streams in (it settles)."""
    kbs.create(services, ADMIN, "notes")
    first = _write(services, "notes", "first.md", "first")
    assert services.progress.wait_blocking("notes", first, 60)
    assert sink.covered("notes") == first
    return first


def test_a_commit_a_reader_waits_for_is_applied_without_settling(tmp_path: Path) -> None:
    sink = FileSink(tmp_path / "files-sink")
    services = open_services(tmp_path / "data", SLOW_BATCH, [sink])
    services.start()
    try:
        _streaming(services, sink)
        unwaited = _write(services, "notes", "second.md", "godwit")
        time.sleep(1.0)  # nobody waits for it: it settles (for 150 s), so the sink still lacks it
        assert sink.covered("notes") != unwaited
        waited = _write(services, "notes", "third.md", "godwit")
        assert services.progress.wait_blocking("notes", waited, 60)  # 60 s, against a 150 s settle
        assert sink.covered("notes") == waited
        hits = services.search_index.search("notes", "godwit", limit=5).hits
        assert sorted(h.path for h in hits) == ["second.md", "third.md"]
    finally:
        services.close()


def test_an_async_wait_of_another_process_hurries_the_follower_through_the_feed(tmp_path: Path) -> None:
    # The serving process stands by while its child follows: its readers' waits reach the follower
    # as feed lines (`W sink slug`), each sink's only for its own sink.
    sink = FileSink(tmp_path / "files-sink")
    leader = open_services(tmp_path / "data", SLOW_BATCH, [sink])
    standby = open_services(tmp_path / "data", replace(SLOW_BATCH, follow=False))
    leader.start()
    standby.start()
    try:
        _streaming(leader, sink)
        version = _write(standby, "notes", "second.md", "knot")
        assert not standby.follower.leading
        covered = asyncio.run(standby.progress.wait("notes", version, 60, ["index"]))
        assert covered and leader.progress.covered("index", "notes") == version
        assert sink.covered("notes") != version  # the index was waited for, not this sink
        assert [h.path for h in search.query(standby, ADMIN, "notes", "knot", limit=5).hits] == ["second.md"]
    finally:
        standby.close()
        leader.close()


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


class PacedSink(FileSink):
    """A sink that records, for every delta, the version and the nice value and id of the thread
    applying it; `gate` cleared holds an apply (`entered` says one is held) until it is set."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.seen: list[tuple[str, int, int]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def apply(self, delta: Delta) -> None:
        tid = threading.get_native_id()
        self.seen.append((delta.version, _nice(tid), tid))
        self.entered.set()
        assert self.gate.wait(60)
        super().apply(delta)


class TidyingSink(PacedSink):
    """A PacedSink whose housekeeping (an index merge, say) is held while `tidy_gate` is cleared."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.tidy_gate = threading.Event()
        self.tidy_gate.set()
        self.tidying = threading.Event()
        self.tidy_tid: int | None = None

    def idle(self, paused: bool, stop: Callable[[], bool]) -> None:
        if not self.tidy_gate.is_set():
            self.tidy_tid = threading.get_native_id()
            self.tidying.set()
            assert self.tidy_gate.wait(60)


def _can_raise() -> bool:
    """Whether this process may raise a thread's priority back (root, CAP_SYS_NICE or RLIMIT_NICE)."""
    allowed: list[bool] = []

    def probe() -> None:
        tid = threading.get_native_id()
        base = _nice(tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, base + 1))
        try:
            os.setpriority(os.PRIO_PROCESS, tid, base)
            allowed.append(base < 19)
        except OSError:
            allowed.append(False)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join(timeout=60)
    return allowed == [True]


def _until(check: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + 60
    while not check() and time.monotonic() < deadline:
        time.sleep(0.01)
    return check()


@linux_only
def test_a_sink_past_the_commit_bound_catches_up_at_the_requests_priority_then_is_polite_again(
    tmp_path: Path,
) -> None:
    base = _nice(threading.get_native_id())
    sink = PacedSink(tmp_path / "files-sink")
    options = Options(
        embedder=None, follower_nice=10, follower_batch_ms=0, follower_lag_ms=600_000, follower_lag_commits=3
    )
    services = open_services(tmp_path / "data", options, [sink])
    services.start()
    try:
        kbs.create(services, ADMIN, "notes")
        threads = _started(services, "notes", 2, polite=False)
        sink.gate.clear()
        sink.entered.clear()
        start = len(sink.seen)
        first = _write(services, "notes", "a.md", "gannet")
        assert sink.entered.wait(60)
        version, nice, polite_tid = sink.seen[start]
        assert version == first and nice == min(19, base + 10)  # close behind: polite
        assert polite_tid == _threads()["kbserver-sink-files-polite"]
        versions = [_write(services, "notes", f"b{i}.md", "gannet") for i in range(4)]
        assert _until(lambda: services.follower.behind()["files"][0] >= 5)  # type: ignore[attr-defined]
        if _can_raise():  # the apply under way is raised once the bound passed
            assert _until(lambda: _nice(polite_tid) == base)
        else:
            assert _nice(polite_tid) == min(19, base + 10)
        sink.gate.set()
        assert services.progress.wait_blocking("notes", versions[-1], 60)
        caught_up = sink.seen[start + 1 :]
        assert caught_up and caught_up[-1][0] == versions[-1]
        for _, nice, tid in caught_up:  # past the bound: at full speed, in the sink's own thread
            assert nice == base and tid == threads["kbserver-sink-files"]
        assert len(caught_up) < len(versions)  # everything pending at once
        assert _until(lambda: services.follower.behind()["files"][0] == 0)  # type: ignore[attr-defined]

        last = _write(services, "notes", "c.md", "gannet")  # caught up: polite again
        assert _until(lambda: sink.seen[-1][0] == last)  # nobody waits (a wait would raise it)
        assert sink.seen[-1] == (last, min(19, base + 10), polite_tid)
    finally:
        sink.gate.set()
        services.close()


@linux_only
def test_a_request_waiting_for_a_sink_lends_it_the_requests_priority(tmp_path: Path) -> None:
    base = _nice(threading.get_native_id())
    sink = PacedSink(tmp_path / "files-sink")
    options = replace(SLOW_BATCH, follower_nice=10, follower_batch_ms=0)  # close behind all along
    services = open_services(tmp_path / "data", options, [sink])
    services.start()
    waited: list[bool] = []
    try:
        kbs.create(services, ADMIN, "notes")
        threads = _started(services, "notes", 2, polite=False)
        sink.gate.clear()
        sink.entered.clear()
        held = _write(services, "notes", "a.md", "gannet")
        assert sink.entered.wait(60)
        assert sink.seen[-1][:2] == (held, min(19, base + 10))  # nobody waits: polite
        polite_tid = sink.seen[-1][2]
        version = _write(services, "notes", "b.md", "gannet")  # pending behind the held apply
        waiter = threading.Thread(
            target=lambda: waited.append(services.progress.wait_blocking("notes", version, 60))
        )
        waiter.start()
        if _can_raise():  # the apply under way is raised for the request waiting behind it
            assert _until(lambda: _nice(polite_tid) == base)
        sink.gate.set()
        waiter.join(timeout=90)
        assert waited == [True]
        assert sink.seen[-1] == (version, base, threads["kbserver-sink-files"])  # in the sink's thread
        after = _write(services, "notes", "c.md", "gannet")  # nobody waits: polite again
        assert _until(lambda: sink.seen[-1][0] == after)
        assert sink.seen[-1] == (after, min(19, base + 10), polite_tid)
    finally:
        sink.gate.set()
        services.close()


@linux_only
def test_a_lag_bound_of_zero_applies_every_commit_at_the_requests_priority(tmp_path: Path) -> None:
    base = _nice(threading.get_native_id())
    sink = PacedSink(tmp_path / "files-sink")
    options = Options(embedder=None, follower_nice=10, follower_lag_ms=0)
    services = open_services(tmp_path / "data", options, [sink])
    services.start()
    try:
        kbs.create(services, ADMIN, "notes")
        threads = _started(services, "notes", 2, polite=False)
        start = len(sink.seen)
        versions = [_write(services, "notes", f"n{i}.md", "skua") for i in range(3)]
        assert services.progress.wait_blocking("notes", versions[-1], 60)
        assert sink.seen[start:]
        for _, nice, tid in sink.seen[start:]:
            assert nice == base and tid == threads["kbserver-sink-files"]
    finally:
        services.close()


@pytest.mark.parametrize(
    ("age", "commits", "behind"),
    [(0.0, 0, False), (5.0, 0, False), (0.5, 1, False), (1.0, 1, True), (0.0, 49, False), (0.0, 50, True)],
)
def test_the_lag_bound_is_an_age_or_a_count_of_commits(age: float, commits: int, behind: bool) -> None:
    assert Pace(nice=10, lag_seconds=1.0, lag_commits=50).behind(age, commits) is behind


@linux_only
def test_the_polite_thread_runs_every_job_handed_to_it_back_to_back() -> None:
    # A job handed in right after the one before had its result lost the new one (a sink thread
    # then waited forever, and the index stopped following): every job of a tight loop must run.
    from kbserver.services.following.sink_worker import _Polite

    polite = _Polite("kbserver-sink-test-polite", 1)
    done: list[int] = []

    def drive() -> None:
        for i in range(20_000):
            done.append(polite.run(lambda i=i: i, lambda: float("inf")))  # type: ignore[misc]

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as can be: the lost job's window opens
    try:
        thread = threading.Thread(target=drive, daemon=True)
        thread.start()
        thread.join(timeout=60)
    finally:
        sys.setswitchinterval(interval)
    polite.stop()
    assert not thread.is_alive(), f"stuck after {len(done)} jobs"
    assert done == list(range(20_000))


@linux_only
def test_a_request_waiting_behind_housekeeping_raises_it(tmp_path: Path) -> None:
    base = _nice(threading.get_native_id())
    sink = TidyingSink(tmp_path / "files-sink")
    options = replace(SLOW_BATCH, follower_nice=10, follower_batch_ms=0)
    services = open_services(tmp_path / "data", options, [sink])
    services.start()
    waited: list[bool] = []
    try:
        kbs.create(services, ADMIN, "notes")
        threads = _started(services, "notes", 2, polite=False)
        sink.tidy_gate.clear()
        first = _write(services, "notes", "a.md", "gannet")
        assert sink.tidying.wait(60)  # after the apply, the housekeeping is held, polite
        assert sink.seen[-1][0] == first and sink.tidy_tid is not None
        assert _nice(sink.tidy_tid) == min(19, base + 10)
        version = _write(services, "notes", "b.md", "gannet")  # waits behind the housekeeping
        waiter = threading.Thread(
            target=lambda: waited.append(services.progress.wait_blocking("notes", version, 60))
        )
        waiter.start()
        if _can_raise():
            assert _until(lambda: _nice(sink.tidy_tid) == base)  # type: ignore[arg-type]
        sink.tidy_gate.set()
        waiter.join(timeout=90)
        assert waited == [True]
        assert sink.seen[-1] == (version, base, threads["kbserver-sink-files"])
    finally:
        sink.tidy_gate.set()
        services.close()
