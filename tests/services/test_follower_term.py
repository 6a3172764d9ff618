"""Follower leadership is a lease with a fencing token: each new leader's term is larger, and a
leader that finds a larger term in the lock file (its flock lost, as on a network file system)
stands by instead of writing."""

from __future__ import annotations

import time
from pathlib import Path

from kbserver.core.model import Create, WriteRequest
from kbserver.services import kbs, writes
from kbserver.services.auth import ADMIN
from kbserver.wiring import open_services


def _term(data: Path) -> int:
    return int((data / "follower.lock").read_text().strip() or 0)


def test_each_leader_takes_a_larger_term_and_a_stale_one_stands_by(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = open_services(data)
    first.start()
    deadline = time.monotonic() + 60
    while not first.follower.leading:
        assert time.monotonic() < deadline, "the follower never took the lead"
        time.sleep(0.02)
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
    deadline = time.monotonic() + 60
    while not second.follower.leading:
        assert time.monotonic() < deadline, "the second process never took the lead"
        time.sleep(0.02)
    assert _term(data) == term + 7  # a new leader's term outgrows every earlier one
    second.close()
