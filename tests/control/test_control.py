"""Control plane: token hashes only, links, runs cleanup, proposal decisions, two connections at once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from kbserver.control import ControlPlane, ProposalRow, RunRow, hash_token


def test_agents_tokens_and_links(tmp_path: Path) -> None:
    db = ControlPlane(tmp_path / "control.db")
    assert db.add_agent("bob", "secret-token", None, ("context",), False)
    assert not db.add_agent("bob", "other", None, ("context",), False)
    assert db.agent_by_token("secret-token").name == "bob"  # type: ignore[union-attr]
    assert db.agent_by_token("wrong") is None
    raw = (tmp_path / "control.db").read_bytes() + b"".join(
        p.read_bytes() for p in tmp_path.glob("control.db-*")
    )
    assert b"secret-token" not in raw and hash_token("secret-token").encode() in raw
    db.link("bob", "kb", "read")
    db.link("bob", "kb", "read_write")  # a second link replaces the first
    assert db.agent("bob").links == {"kb": "read_write"}  # type: ignore[union-attr]
    assert db.set_token("bob", "new-token") and db.agent_by_token("secret-token") is None
    assert db.delete_agent("bob") and db.agent("bob") is None and not db.delete_agent("bob")
    assert db.integrity_errors() == []


def test_expired_runs_are_removed_without_cron(tmp_path: Path) -> None:
    db = ControlPlane(tmp_path / "control.db")
    now = time.time()
    db.add_run(RunRow("old", "bob", now - 100, now - 1, False, {"kb": "a" * 40}))
    db.add_run(RunRow("new", "bob", now, now + 100, True, {"kb": "b" * 40}))
    assert db.run("old") is None  # adding a run sweeps the expired ones
    assert db.run("new") == RunRow("new", "bob", now, now + 100, True, {"kb": "b" * 40})


def test_a_proposal_is_decided_once_even_when_raced(tmp_path: Path) -> None:
    db = ControlPlane(tmp_path / "control.db")
    db.add_proposal(
        ProposalRow(
            "p1",
            "kb",
            "bob",
            "run",
            time.time(),
            "pending",
            None,
            "c" * 40,
            {"files": []},
            None,
            None,
            None,
            None,
        )
    )
    results: list[bool] = []
    others = [ControlPlane(tmp_path / "control.db") for _ in range(6)]  # separate connections
    threads = [
        threading.Thread(
            target=lambda d=d: results.append(
                d.decide_proposal("kb", "p1", "approved", "admin", None, "v" * 40)
            )
        )
        for d in others
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(results) == [False] * 5 + [True]
    assert db.proposal("kb", "p1").status == "approved"  # type: ignore[union-attr]
