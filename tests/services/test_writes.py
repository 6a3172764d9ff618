"""The write use case at the service layer: permissions, runs, proposals, one version per call."""

from __future__ import annotations

import pytest

from kbserver.config import Settings
from kbserver.core.errors import ApprovalUnavailable, Forbidden, NotFound, Stale
from kbserver.core.model import Append, WriteRequest, WriteResult
from kbserver.services import Services
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.models import ProposalAccepted
from kbserver.services.reading import runs
from kbserver.services.reviewing import versions
from kbserver.services.writing import writes
from tests.helpers import git_fsck, state


@pytest.fixture
def settings(settings_on_both_stores: Settings) -> Settings:
    """Every test here runs on both control stores (SQLite and PostgreSQL)."""
    return settings_on_both_stores


def _req(*files: object, run_id: str | None = None) -> WriteRequest:
    return WriteRequest.model_validate({"files": list(files), "run_id": run_id})


def _agent(services: Services, name: str, links: dict[str, str]) -> None:
    agents.create(services, ADMIN, name)
    for slug, perm in links.items():
        agents.link(services, ADMIN, name, slug, perm)


def test_an_agent_write_is_one_version_with_its_actor_and_kind(services: Services, kb: str) -> None:
    _agent(services, "bob", {kb: "read_write"})
    bob = caller_for(services, "bob")
    out = writes.submit(
        services,
        bob,
        kb,
        _req(
            {"path": "a.md", "mode": "create", "content": "alpha"},
            {"path": "b/c.md", "mode": "create", "content": "x"},
        ),
    )
    assert isinstance(out, WriteResult)
    assert [f.path for f in out.files] == ["a.md", "b/c.md"] and all(f.mode == "create" for f in out.files)
    page = versions.listing(services, bob, kb, limit=5)
    assert page.versions[0].version == out.version and page.versions[0].parent == out.parent
    assert page.versions[0].author == "agent:bob" and page.versions[0].kind == "agent_write"
    assert page.versions[0].paths == ["a.md", "b/c.md"]
    git_fsck(services.repos.path(kb))


def test_the_admin_writes_human_edits(services: Services, kb: str) -> None:
    out = writes.submit(services, ADMIN, kb, _req({"path": "a.md", "mode": "create", "content": "alpha"}))
    assert isinstance(out, WriteResult)
    first = versions.listing(services, ADMIN, kb, limit=1).versions[0]
    assert (first.author, first.kind, first.message) == ("admin", "human_edit", "human edit: a.md")


def test_refused_writes_change_nothing(services: Services, kb: str) -> None:
    _agent(services, "reader", {kb: "read"})
    _agent(services, "asker", {kb: "read_write_ask"})
    _agent(services, "stranger", {})
    before = state(services, kb)
    change = {"path": "a.md", "mode": "create", "content": "alpha"}
    with pytest.raises(Forbidden):
        writes.submit(services, caller_for(services, "reader"), kb, _req(change))
    with pytest.raises(NotFound):  # a KB the agent is not linked to does not exist for it
        writes.submit(services, caller_for(services, "stranger"), kb, _req(change))
    with pytest.raises(ApprovalUnavailable):  # read_write_ask needs an interactive run
        writes.submit(services, caller_for(services, "asker"), kb, _req(change))
    with pytest.raises(Stale) as err:
        writes.submit(
            services,
            ADMIN,
            kb,
            _req({"path": "README.md", "mode": "append", "content": "x", "expected_sha256": "0" * 64}),
        )
    assert err.value.details["path"] == "README.md" and err.value.details["expected_sha256"] == "0" * 64
    assert state(services, kb) == before


def test_runs_a_write_names_must_be_the_callers_and_mount_the_kb(services: Services, kb: str) -> None:
    _agent(services, "bob", {kb: "read_write"})
    _agent(services, "eve", {kb: "read_write"})
    bob, eve = caller_for(services, "bob"), caller_for(services, "eve")
    run = runs.start(services, bob, kbs=[kb])
    change = {"path": "a.md", "mode": "create", "content": "alpha"}
    before = state(services, kb)
    with pytest.raises(NotFound):  # another agent's run
        writes.submit(services, eve, kb, _req(change, run_id=run.id))
    with pytest.raises(NotFound):
        writes.submit(services, bob, kb, _req(change, run_id="run_unknown"))
    assert state(services, kb) == before
    out = writes.submit(services, bob, kb, _req(change, run_id=run.id))
    assert isinstance(out, WriteResult)
    assert versions.listing(services, bob, kb, limit=1).versions[0].run == run.id


def test_read_write_ask_in_an_interactive_run_proposes(services: Services, kb: str) -> None:
    _agent(services, "asker", {kb: "read_write_ask"})
    asker = caller_for(services, "asker")
    run = runs.start(services, asker, interactive=True)
    before = state(services, kb)
    out = writes.submit(
        services, asker, kb, _req({"path": "p.md", "mode": "create", "content": "p"}, run_id=run.id)
    )
    assert isinstance(out, ProposalAccepted) and out.proposal.status == "pending"
    assert state(services, kb) == before  # nothing on main until an admin approves


def test_appends_without_expected_sha256_apply_on_the_head(services: Services, kb: str) -> None:
    for i in range(3):
        writes.submit(
            services,
            ADMIN,
            kb,
            WriteRequest(files=[Append(path="README.md", mode="append", content=f"\n{i}")]),
        )
    assert versions.listing(services, ADMIN, kb).versions[0].kind == "human_edit"
    head, _ = state(services, kb)
    data = services.repos.repo(kb).view(head).read("README.md") or b""
    assert data.endswith(b"\n0\n1\n2")
