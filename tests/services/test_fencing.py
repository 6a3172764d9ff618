"""Fencing tokens: a write whose lease (a proposal's claim, a key's reservation) was taken over while
it waited for the KB's writer never commits, however short the timeouts."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kbserver.core.errors import KBError
from kbserver.core.model import Append, Create, WriteRequest
from kbserver.services import Services, agents, idempotency, kbs, proposals, runs, writes
from kbserver.services.auth import ADMIN, caller_for
from kbserver.services.models import ProposalAccepted, WriteResult
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


def _race_behind_the_lock(
    services: Services, action: Callable[[], str], first_waits: Callable[[], bool]
) -> list[str]:
    """Run `action` twice while another process holds the KB's writer lock; the outcomes of both."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(services.repos.path("kb"))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    outcomes: list[str] = []

    def run() -> None:
        try:
            outcomes.append(action())
        except KBError as err:
            outcomes.append(err.code)

    first = threading.Thread(target=run)
    first.start()
    deadline = time.monotonic() + 60
    while not first_waits():
        assert time.monotonic() < deadline, "the first request never took its lease"
        time.sleep(0.01)
    second = threading.Thread(target=run)
    second.start()
    second.join(timeout=1.0)  # time to take the lease over and queue behind the lock (or be done)
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(timeout=60)
    for t in (first, second):
        t.join(timeout=120)
        assert not t.is_alive()
    return sorted(outcomes)


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


def test_a_write_whose_key_was_taken_over_while_it_waited_does_not_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = _setup(tmp_path / "data")
    bob = caller_for(services, "bob")
    monkeypatch.setattr(idempotency, "ABANDON_SECONDS", 0.0)  # every reservation is "abandoned" at once
    head = services.repos.repo("kb").head()

    def write() -> str:
        out = writes.submit(services, bob, "kb", _append(1), idempotency_key="key-1")
        assert isinstance(out, WriteResult)
        return "written"

    def reserved() -> bool:
        with services.control._tx() as db:  # type: ignore[attr-defined]
            return db.execute("SELECT 1 FROM idempotency WHERE key = 'key-1'").fetchone() is not None

    outcomes = _race_behind_the_lock(services, write, reserved)
    assert outcomes == ["busy", "written"]  # the first hears its key was taken over
    log = subprocess.run(
        ["git", "log", "--format=%H", f"{head}..main"],
        cwd=services.repos.path("kb"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert len(log) == 1 and services.repos.repo("kb").view(log[0]).read("log.md") == b"line 1\n"
    assert len(_trailer(services, "Kb-Fence")) == 1
    again = writes.submit(services, bob, "kb", _append(1), idempotency_key="key-1")  # the repeat's answer
    assert isinstance(again, WriteResult) and again.version == log[0]
    git_fsck(services.repos.path("kb"))
    services.close()
