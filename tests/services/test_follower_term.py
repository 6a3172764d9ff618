"""Follower leadership is a lease with a fencing token: each new leader's term is larger, and a
leader that finds a larger term in the lock file (its flock lost, as on a network file system)
stands by instead of writing."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kbserver.core.model import Create, WriteRequest
from kbserver.index.engine import SearchIndex
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.following import leading
from kbserver.services.writing import writes
from kbserver.wiring import open_services


def _term(data: Path) -> int:
    return int((data / "follower.lock").read_text().strip() or 0)


def _await_lead(services: Services, what: str) -> None:
    deadline = time.monotonic() + 60
    while not services.follower.leading:
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _before_each_term_write(monkeypatch: pytest.MonkeyPatch, hook: Callable[[], None]) -> None:
    """Call `hook` in the follower's thread right before it records a new term (it may raise)."""
    record = leading._next_term

    def hooked(fd: int) -> int:
        hook()
        return record(fd)

    monkeypatch.setattr(leading, "_next_term", hooked)


def test_a_leader_is_leading_only_once_its_term_is_in_the_lock_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoever sees `leading` may read the term (CI once read an empty lock file in between)."""
    seen: list[bool] = []
    _before_each_term_write(monkeypatch, lambda: seen.append(services.follower.leading))
    services = open_services(tmp_path / "data")
    try:
        services.start()
        _await_lead(services, "the follower never took the lead")
        assert seen == [False]
        assert _term(tmp_path / "data") == 1
    finally:
        services.close()


def test_a_term_that_cannot_be_recorded_leaves_the_follower_standing_by_until_it_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Leading without a recorded term is unfenced; the loop lives on and tries again."""
    failures = [OSError(5, "Input/output error")]

    def fail_once() -> None:
        if failures:
            raise failures.pop()

    _before_each_term_write(monkeypatch, fail_once)
    services = open_services(tmp_path / "data")
    try:
        services.start()
        _await_lead(services, "the follower never led after one failed term write")
        assert not failures
        assert _term(tmp_path / "data") == 1
        kbs.create(services, ADMIN, "notes")
        req = WriteRequest(files=[Create(path="a.md", mode="create", content="albatross\n")])
        version = writes.submit(services, ADMIN, "notes", req).version
        assert services.progress.wait_blocking("notes", version, 60)
    finally:
        services.close()


def test_each_leader_takes_a_larger_term_and_a_stale_one_stands_by(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = open_services(data)
    first.start()
    _await_lead(first, "the follower never took the lead")
    term = _term(data)
    assert term >= 1
    kbs.create(first, ADMIN, "notes")
    # another node took the lead behind this one's back (its flock lost with a network mount)
    (data / "follower.lock").write_text(f"{term + 5}\n")
    req = WriteRequest(files=[Create(path="a.md", mode="create", content="albatross\n")])
    writes.submit(first, ADMIN, "notes", req)
    deadline = time.monotonic() + 60
    while _term(data) == term + 5:  # it stood by, then (nobody holding the flock) led again, later
        assert time.monotonic() < deadline, "the stale leader never noticed the larger term"
        time.sleep(0.02)
    assert _term(data) == term + 6
    first.close()
    second = open_services(data)
    second.start()
    _await_lead(second, "the second process never took the lead")
    assert _term(data) == term + 7  # a new leader's term outgrows every earlier one
    second.close()


@pytest.mark.parametrize("phase", ["update", "rebuild"])
def test_a_leader_whose_term_is_taken_while_it_catches_up_never_writes_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phase: str
) -> None:
    """The term is checked before a catch-up and again under the index's writer lock, right before
    the commit: another node taking the lead in between (its flock lost) gets the only write."""
    data = tmp_path / "data"
    stale: list[str] = []
    real = getattr(SearchIndex, phase)

    def hooked(self: SearchIndex, version: str, *args: object, **kw: object) -> None:
        term = _term(data)
        if not stale:  # the first write: another node takes the lead after the follower's check
            (data / "follower.lock").write_text(f"{term + 5}\n")
            stale.append(version)
        real(self, version, *args, **kw)
        if self.indexed_version() == version and _term(data) == term + 5:
            stale.append("written under a stale term")  # today: the index moved all the same

    monkeypatch.setattr(SearchIndex, phase, hooked)
    services = open_services(data)
    try:
        services.start()
        _await_lead(services, "the follower never took the lead")
        kbs.create(services, ADMIN, "notes")
        if phase == "update":  # the first catch-up builds; the next ones update
            _covered(services, "notes", services.repos.repo("notes").head())
            stale.clear()
        req = WriteRequest(files=[Create(path="a.md", mode="create", content="albatross\n")])
        version = writes.submit(services, ADMIN, "notes", req).version  # type: ignore[union-attr]
        _covered(services, "notes", version)  # once the lead is retaken (flock free), it catches up
        assert stale[1:] == [], stale
        assert stale, "the hook never ran"
    finally:
        services.close()


def _covered(services: Services, slug: str, version: str | None) -> None:
    deadline = time.monotonic() + 90
    while services.sinks["index"].covered(slug) != version:
        assert time.monotonic() < deadline, f"{slug} never covered {version}"
        time.sleep(0.02)
