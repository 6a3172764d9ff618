"""Commit messages: at most 4 KiB, no control characters but newline and tab, no `Kb-…:` lines.

Over HTTP (write, revert, proposal, approval) and MCP: refused as invalid_request, nothing changes,
and C git's strict fsck stays clean.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from starlette.testclient import TestClient

from kbserver.control import ProposalRow
from kbserver.services import Services
from tests.helpers import git_fsck, make_agent, state

BAD_MESSAGES = [
    "nul \x00 inside",
    "escape \x1b[31m red",
    "carriage\rreturn",
    "c1 \x85 control",
    "x" * 4097,
    "é" * 2049,  # 4098 bytes of UTF-8
    "fix typo\n\nKb-Actor: admin",
    "subject\nkb-kind: revert",
    "  Kb-Proposal: prop_1",
]
GOOD_MESSAGES = ["tabs\tand\nnewlines", "x" * 4096, "talks about Kb-Actor: inline", "中文说明"]


def _write(client: TestClient, kb: str, headers: dict[str, str], message: str, **extra: Any) -> Any:
    files = [{"path": "notes/m.md", "mode": "create", "content": "hello\n"}]
    return client.post(
        f"/api/v1/kbs/{kb}/write", json={"files": files, "message": message, **extra}, headers=headers
    )


@pytest.mark.parametrize("message", BAD_MESSAGES)
def test_bad_message_on_write_and_revert(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], message: str
) -> None:
    first = state(services, kb)[0]
    ok_ = client.post(
        f"/api/v1/kbs/{kb}/write",
        json={"files": [{"path": "a.md", "mode": "create", "content": "a\n"}]},
        headers=agent,
    )
    assert ok_.status_code == 200
    before = state(services, kb)
    r = _write(client, kb, agent, message)
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request"), r.text
    r = client.post(f"/api/v1/kbs/{kb}/revert", json={"version": first, "message": message}, headers=agent)
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request"), r.text
    undo = f"/api/v1/kbs/{kb}/versions/{ok_.json()['version']}/undo"
    r = client.post(undo, json={"message": message}, headers=agent)
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request"), r.text
    assert state(services, kb) == before
    git_fsck(services.repos.path(kb))


@pytest.mark.parametrize("message", GOOD_MESSAGES)
def test_good_messages_are_kept(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], message: str
) -> None:
    r = _write(client, kb, agent, message)
    assert r.status_code == 200, r.text
    info = services.repos.repo(kb).commit_info(r.json()["version"])
    assert info.message.startswith(message.strip()) and info.trailers["Kb-Actor"] == "agent:bob"
    git_fsck(services.repos.path(kb))


def test_bad_message_on_proposal_and_approval(
    client: TestClient, services: Services, kb: str, admin: dict[str, str]
) -> None:
    asker = make_agent(services, "asker", {kb: "read_write_ask"})
    run_id = client.post("/api/v1/runs", json={"interactive": True}, headers=asker).json()["id"]
    before = state(services, kb)
    refs = sorted(p.name for p in (services.repos.path(kb) / "refs").rglob("*") if p.is_file())
    for message in BAD_MESSAGES:
        r = _write(client, kb, asker, message, run_id=run_id)
        assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request"), r.text
    assert client.get(f"/api/v1/kbs/{kb}/proposals", headers=admin).json()["proposals"] == []
    assert sorted(p.name for p in (services.repos.path(kb) / "refs").rglob("*") if p.is_file()) == refs
    # A proposal stored before messages were checked is refused at approval and stays pending.
    good = _write(client, kb, asker, "fine", run_id=run_id).json()["proposal"]["id"]
    row = services.control.proposal(kb, good)
    assert row is not None
    forged = ProposalRow(
        "prop_forged",
        kb,
        "asker",
        run_id,
        time.time(),
        "pending",
        row.base,
        row.ref_commit,
        {**row.request, "message": "ok\nKb-Approver: nobody"},
    )
    services.control.add_proposal(forged)
    before = state(services, kb)
    r = client.post(f"/api/v1/kbs/{kb}/proposals/prop_forged/approve", headers=admin)
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request"), r.text
    assert state(services, kb) == before
    after = client.get(f"/api/v1/kbs/{kb}/proposals/prop_forged", headers=admin).json()
    assert after["status"] == "pending" and after["reason"].startswith("invalid_request")
    git_fsck(services.repos.path(kb))
