"""Proposals at the service layer: claim before commit, final rejections, races across processes."""

from __future__ import annotations

import multiprocessing
import subprocess
import time
from pathlib import Path

import pytest

from kbserver.core.errors import KBError, NotPending
from kbserver.core.model import Create, WriteRequest
from kbserver.services import Services, kbs
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.models import ProposalAccepted
from kbserver.services.reading import runs
from kbserver.services.writing import proposals, writes
from kbserver.wiring import open_services
from tests.helpers import git_fsck, state


def _setup(data: Path) -> Services:
    services = open_services(data)
    kbs.create(services, ADMIN, "kb")
    agents.create(services, ADMIN, "asker")
    agents.link(services, ADMIN, "asker", "kb", "read_write_ask")
    return services


def _propose(services: Services, n: int) -> str:
    asker = caller_for(services, "asker")
    run = runs.start(services, asker, interactive=True)
    req = WriteRequest(files=[Create(path=f"p/{n}.md", mode="create", content=f"idea {n}\n")], run_id=run.id)
    out = writes.submit(services, asker, "kb", req)
    assert isinstance(out, ProposalAccepted)
    return out.proposal.id


def _trailers(services: Services) -> list[str]:
    out = subprocess.run(
        ["git", "log", "--first-parent", "--format=%(trailers:key=Kb-Proposal,valueonly)", "main"],
        cwd=services.repos.path("kb"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def test_reject_is_final_and_approval_after_it_changes_nothing(tmp_path: Path) -> None:
    services = _setup(tmp_path / "data")
    pid = _propose(services, 1)
    assert proposals.reject(services, ADMIN, "kb", pid, "no").status == "rejected"
    before = state(services, "kb")
    for decide in (proposals.approve, proposals.reject):
        with pytest.raises(NotPending) as err:
            decide(services, ADMIN, "kb", pid)
        assert err.value.details["status"] == "rejected"
    assert state(services, "kb") == before and _trailers(services) == []
    services.close()


def test_a_claimed_proposal_cannot_be_rejected_or_approved_again(tmp_path: Path) -> None:
    services = _setup(tmp_path / "data")
    pid = _propose(services, 1)
    assert services.control.claim_proposal("kb", pid, "admin")  # an approval in flight elsewhere
    before = state(services, "kb")
    for decide in (proposals.approve, proposals.reject):
        with pytest.raises(NotPending) as err:
            decide(services, ADMIN, "kb", pid)
        assert err.value.details["status"] == "applying"
    assert state(services, "kb") == before
    services.close()


def test_an_abandoned_claim_is_settled_from_main(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    services = _setup(tmp_path / "data")
    lost, landed = _propose(services, 1), _propose(services, 2)
    # `landed`: its approval committed, then the process died before recording the decision
    assert proposals.approve(services, ADMIN, "kb", landed).status == "approved"
    with services.control._tx() as db:  # type: ignore[attr-defined]
        db.execute("UPDATE proposals SET status = 'applying', version = NULL WHERE id = ?", (landed,))
    # `lost`: claimed, died before committing
    assert services.control.claim_proposal("kb", lost, "admin")
    monkeypatch.setattr(proposals, "CLAIM_TIMEOUT_SECONDS", 0.0)
    with pytest.raises(NotPending) as err:
        proposals.approve(services, ADMIN, "kb", landed)
    assert err.value.details["status"] == "approved"
    row = services.control.proposal("kb", landed)
    assert row is not None and row.version == services.repos.repo("kb").head()
    assert proposals.approve(services, ADMIN, "kb", lost).status == "approved"  # pending again, then applied
    assert sorted(_trailers(services)) == sorted([lost, landed])
    services.close()


_ROLES = ("approve", "reject", "approve")


def _decider(data: str, pids: list[str], role: int, start: object, results: object) -> None:
    services = open_services(Path(data))
    try:
        for n, pid in enumerate(pids):
            action = _ROLES[(role + n) % len(_ROLES)]  # roles rotate, so each process wins some
            start.wait(timeout=60)  # type: ignore[attr-defined]
            try:
                if action == "approve":
                    proposals.approve(services, ADMIN, "kb", pid)
                else:
                    proposals.reject(services, ADMIN, "kb", pid)
                outcome = "won"
            except KBError as err:
                outcome = err.code
            results.put((pid, action, outcome))  # type: ignore[attr-defined]
    finally:
        services.close()


@pytest.mark.slow
def test_two_processes_deciding_one_proposal_exactly_one_wins(tmp_path: Path) -> None:
    data = tmp_path / "data"
    services = _setup(data)
    pids = [_propose(services, n) for n in range(6)]
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(3), ctx.Queue()
    # per proposal: two processes approve and one rejects, at the same moment
    procs = [ctx.Process(target=_decider, args=(str(data), pids, role, start, results)) for role in (1, 2)]
    for p in procs:
        p.start()
    _decider(str(data), pids, 0, start, results)
    for p in procs:
        p.join(timeout=240)
        assert p.exitcode == 0
    outcomes: dict[str, list[tuple[str, str]]] = {pid: [] for pid in pids}
    deadline = time.monotonic() + 60
    while sum(len(v) for v in outcomes.values()) < 3 * len(pids) and time.monotonic() < deadline:
        pid, action, outcome = results.get(timeout=60)
        outcomes[pid].append((action, outcome))
    trailers = _trailers(services)
    for pid, seen in outcomes.items():
        winners = [action for action, outcome in seen if outcome == "won"]
        assert len(seen) == 3 and len(winners) == 1, seen
        assert all(outcome == "not_pending" for _, outcome in seen if outcome != "won"), seen
        row = services.control.proposal("kb", pid)
        assert row is not None
        assert row.status == ("approved" if winners == ["approve"] else "rejected")
        assert trailers.count(pid) == (1 if row.status == "approved" else 0)
    assert len(trailers) == sum(1 for pid in pids if trailers.count(pid))
    services.close()
    git_fsck(data / "kbs" / "kb.git")
