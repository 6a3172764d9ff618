"""Fencing tokens: a write whose lease (a proposal's claim, a key's reservation) was taken over while
it waited for the KB's writer never commits, however short the timeouts."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kbserver.core.errors import KBError
from kbserver.core.model import Append, Create, WriteRequest
from kbserver.services import Services, kbs
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.models import ProposalAccepted, WriteResult
from kbserver.services.reading import runs
from kbserver.services.writing import idempotency, proposals, writes
from kbserver.wiring import open_services
from tests.helpers import git_fsck

_HOLD_LOCK = """
import sys
from kbserver.store.writer import kb_lock
with kb_lock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


def _setup(data: Path) -> Services:
    services = open_services(data)
    kbs.create(services, ADMIN, "kb")
    agents.create(services, ADMIN, "asker")
    agents.link(services, ADMIN, "asker", "kb", "read_write_ask")
    agents.create(services, ADMIN, "bob")
    agents.link(services, ADMIN, "bob", "kb", "read_write")
    log = WriteRequest(files=[Create(path="log.md", mode="create", content="")])
    writes.submit(services, ADMIN, "kb", log)
    return services


def _append(n: int) -> WriteRequest:
    """An append applies twice without a conflict: only the fence can keep it from landing twice."""
    return WriteRequest(files=[Append(path="log.md", mode="append", content=f"line {n}\n")])


def _trailer(services: Services, key: str) -> list[str]:
    out = subprocess.run(
        ["git", "log", "--first-parent", f"--format=%(trailers:key={key},valueonly)", "main"],
        cwd=services.repos.path("kb"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


@contextmanager
def _lock_held_elsewhere(services: Services) -> Iterator[None]:
    """Another process holds the KB's writer lock until the block ends."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(services.repos.path("kb"))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    try:
        yield
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)


def _outcome(action: Callable[[], str], outcomes: list[str]) -> threading.Thread:
    """`action` started in a thread; its result or error code is appended to `outcomes`."""

    def run() -> None:
        try:
            outcomes.append(action())
        except KBError as err:
            outcomes.append(err.code)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _until(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _race_behind_the_lock(
    services: Services, action: Callable[[], str], first_waits: Callable[[], bool]
) -> list[str]:
    """Run `action` twice while another process holds the KB's writer lock; the outcomes of both."""
    outcomes: list[str] = []
    with _lock_held_elsewhere(services):
        first = _outcome(action, outcomes)
        _until(first_waits, "the first request never took its lease")
        second = _outcome(action, outcomes)
        second.join(timeout=1.0)  # time to take the lease over and queue behind the lock (or be done)
    for t in (first, second):
        t.join(timeout=120)
        assert not t.is_alive()
    return sorted(outcomes)


def _commits_since(services: Services, head: str | None) -> list[str]:
    return subprocess.run(
        ["git", "log", "--format=%H", f"{head}..main"],
        cwd=services.repos.path("kb"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()


def _reserved(services: Services) -> bool:
    with services.control._tx() as db:  # type: ignore[attr-defined]
        return db.execute("SELECT 1 FROM idempotency WHERE key = 'key-1'").fetchone() is not None


def test_an_approval_stuck_behind_the_writer_lock_past_the_claim_timeout_lands_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = _setup(tmp_path / "data")
    asker = caller_for(services, "asker")
    run = runs.start(services, asker, interactive=True)
    out = writes.submit(services, asker, "kb", _append(1).model_copy(update={"run_id": run.id}))
    assert isinstance(out, ProposalAccepted)
    pid = out.proposal.id
    monkeypatch.setattr(proposals, "CLAIM_TIMEOUT_SECONDS", 0.0)  # every claim is "abandoned" at once

    def claimed() -> bool:
        row = services.control.proposal("kb", pid)
        return row is not None and row.status == "applying"

    outcomes = _race_behind_the_lock(
        services, lambda: proposals.approve(services, ADMIN, "kb", pid).status, claimed
    )
    assert outcomes == ["approved", "not_pending"]
    assert _trailer(services, "Kb-Proposal") == [pid]
    row = services.control.proposal("kb", pid)
    assert row is not None and row.status == "approved" and row.version == services.repos.repo("kb").head()
    assert _trailer(services, "Kb-Fence") == [str(row.fence)]  # the commit records its claim's token
    assert services.repos.repo("kb").view(row.version).read("log.md") == b"line 1\n"
    git_fsck(services.repos.path("kb"))
    services.close()


def test_a_write_whose_key_was_taken_over_while_it_waited_does_not_commit(tmp_path: Path) -> None:
    services = _setup(tmp_path / "data")
    bob = caller_for(services, "bob")
    head = services.repos.repo("kb").head()
    outcomes: list[str] = []
    with _lock_held_elsewhere(services):
        first = _outcome(
            lambda: type(writes.submit(services, bob, "kb", _append(1), idempotency_key="key-1")).__name__,
            outcomes,
        )
        _until(lambda: _reserved(services), "the write never reserved its key")
        # another node takes the reservation over in the control store while the write waits
        body = idempotency._body_sha256(_append(1))
        taken = services.control.reserve_key(
            bob.actor, "kb", "key-1", body, time.time(), idempotency.KEY_TTL_SECONDS, 0.0
        )
        assert isinstance(taken, int)
    first.join(timeout=120)
    assert outcomes == ["busy"] and _commits_since(services, head) == []  # its fence was stale
    assert _trailer(services, "Kb-Fence") == []
    git_fsck(services.repos.path("kb"))
    services.close()


def test_two_repeats_of_a_keyed_write_behind_the_writer_lock_commit_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = _setup(tmp_path / "data")
    bob = caller_for(services, "bob")
    # every reservation is "abandoned" at once
    monkeypatch.setattr(idempotency, "abandon_seconds", lambda services: 0.0)
    head = services.repos.repo("kb").head()
    answers: list[WriteResult] = []

    def write() -> str:
        out = writes.submit(services, bob, "kb", _append(1), idempotency_key="key-1")
        assert isinstance(out, WriteResult)
        answers.append(out)
        return "written"

    outcomes = _race_behind_the_lock(services, write, lambda: _reserved(services))
    # The repeat takes the key over under the writer lock: whoever gets the lock first writes, and
    # the other either answers that version or hears that its key was taken over.
    assert outcomes in (["busy", "written"], ["written", "written"])
    log = _commits_since(services, head)
    assert len(log) == 1 and services.repos.repo("kb").view(log[0]).read("log.md") == b"line 1\n"
    assert len(_trailer(services, "Kb-Fence")) == 1 and len(_trailer(services, "Kb-Idempotency")) == 1
    assert {a.version for a in answers} == {log[0]}
    again = writes.submit(services, bob, "kb", _append(1), idempotency_key="key-1")  # the repeat's answer
    assert isinstance(again, WriteResult) and again.version == log[0]
    git_fsck(services.repos.path("kb"))
    services.close()
