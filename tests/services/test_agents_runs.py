"""Agents and runs at the service layer: the admin manages agents and links; a run pins each KB's head."""

from __future__ import annotations

import pytest

from kbserver.config import Settings
from kbserver.core.errors import AlreadyExists, Forbidden, InvalidRequest, NotFound, Unauthorized
from kbserver.core.model import WriteRequest, WriteResult
from kbserver.services import Services, kbs
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN, authenticate, caller_for
from kbserver.services.reading import runs
from kbserver.services.writing import writes
from tests.helpers import ADMIN_TOKEN


@pytest.fixture
def settings(settings_on_both_stores: Settings) -> Settings:
    """Every test here runs on both control stores (SQLite and PostgreSQL)."""
    return settings_on_both_stores


def test_the_admin_manages_agents_their_tool_sets_and_links(services: Services, kb: str) -> None:
    made, token = agents.create(services, ADMIN, "bob", tools=["context", "auto"])
    assert (made.name, made.tools, made.links) == ("bob", ["context", "auto"], [])
    assert authenticate(services, token, ADMIN_TOKEN).name == "bob"
    child, _ = agents.create(services, ADMIN, "helper", parent="bob")
    assert (child.parent, child.tools) == ("bob", ["context"])  # the default tool set
    linked = agents.link(services, ADMIN, "bob", kb, "read_write")
    assert [(link.kb, link.permission) for link in linked.links] == [(kb, "read_write")]
    relinked = agents.link(services, ADMIN, "bob", kb, "read")  # replaces the earlier link
    assert [(link.kb, link.permission) for link in relinked.links] == [(kb, "read")]
    assert [a.name for a in agents.listing(services, ADMIN).agents] == ["bob", "helper"]
    assert agents.unlink(services, ADMIN, "bob", kb).links == []
    _, fresh = agents.rotate(services, ADMIN, "bob")
    with pytest.raises(Unauthorized):
        authenticate(services, token, ADMIN_TOKEN)  # the old token stopped working
    assert authenticate(services, fresh, ADMIN_TOKEN).name == "bob"
    assert agents.delete(services, ADMIN, "helper").deleted
    with pytest.raises(NotFound):
        agents.get(services, ADMIN, "helper")


def test_refused_agent_calls_change_nothing(services: Services, kb: str) -> None:
    agents.create(services, ADMIN, "bob")
    bob = caller_for(services, "bob")
    before = agents.listing(services, ADMIN)
    with pytest.raises(Forbidden):
        agents.create(services, bob, "eve")
    with pytest.raises(Forbidden):
        agents.link(services, bob, "bob", kb, "read_write")
    with pytest.raises(AlreadyExists):
        agents.create(services, ADMIN, "bob")
    with pytest.raises(InvalidRequest):
        agents.create(services, ADMIN, "Bad Name")
    with pytest.raises(InvalidRequest):
        agents.create(services, ADMIN, "eve", tools=["context", "nonsense"])
    with pytest.raises(NotFound):
        agents.create(services, ADMIN, "eve", parent="nobody")
    with pytest.raises(InvalidRequest):
        agents.link(services, ADMIN, "bob", kb, "owner")
    with pytest.raises(NotFound):
        agents.link(services, ADMIN, "bob", "no-such-kb", "read")
    with pytest.raises(NotFound):
        agents.unlink(services, ADMIN, "bob", kb)
    assert agents.listing(services, ADMIN) == before


def test_a_run_reads_the_heads_it_pinned_while_main_moves_on(services: Services, kb: str) -> None:
    kbs.create(services, ADMIN, "other")
    agents.create(services, ADMIN, "bob")
    agents.link(services, ADMIN, "bob", kb, "read_write")
    bob = caller_for(services, "bob")
    pinned = services.repos.repo(kb).head()
    run = runs.start(services, bob)
    assert run.mounts == {kb: pinned} and not run.interactive  # only the KBs bob can read
    req = WriteRequest.model_validate({"files": [{"path": "a.md", "mode": "create", "content": "new"}]})
    out = writes.submit(services, bob, kb, req)
    assert isinstance(out, WriteResult) and out.version != pinned
    assert runs.list_files(services, bob, run.id, kb).version == pinned
    assert [f.path for f in runs.list_files(services, bob, run.id, kb).files] == ["README.md"]
    with pytest.raises(NotFound):
        runs.read_file(services, bob, run.id, kb, "a.md")  # not in the snapshot
    assert runs.read_file(services, bob, run.id, kb, "README.md").version == pinned


def test_runs_are_the_agents_own_and_name_only_kbs_they_read(services: Services, kb: str) -> None:
    kbs.create(services, ADMIN, "other")
    for name in ("bob", "eve"):
        agents.create(services, ADMIN, name)
        agents.link(services, ADMIN, name, kb, "read")
    bob, eve = caller_for(services, "bob"), caller_for(services, "eve")
    with pytest.raises(Forbidden):
        runs.start(services, ADMIN)
    with pytest.raises(NotFound):
        runs.start(services, bob, kbs=["other"])  # not linked: looks like no KB at all
    with pytest.raises(InvalidRequest):
        runs.start(services, bob, kbs=[kb, kb])
    run = runs.start(services, bob, kbs=[kb], interactive=True)
    assert run.interactive
    with pytest.raises(NotFound):
        runs.list_files(services, eve, run.id, kb)  # another agent's run
    with pytest.raises(NotFound):
        runs.list_files(services, bob, run.id, "other")  # not mounted
    with pytest.raises(NotFound):
        runs.list_files(services, bob, "run_unknown", kb)
    agents.unlink(services, ADMIN, "bob", kb)
    with pytest.raises(NotFound):  # the link is checked on every read (each call authenticates anew)
        runs.list_files(services, caller_for(services, "bob"), run.id, kb)
