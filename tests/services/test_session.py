"""The agent session every tool set shares, and the registry of tool sets."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbserver.config import Settings
from kbserver.core.errors import ApprovalUnavailable, InvalidRequest, TooLarge
from kbserver.core.model import Create, WriteResult
from kbserver.services import Services, kbs
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.access.toolsets import TOOL_SETS, check_tool_sets, tools_of
from kbserver.services.models import ProposalAccepted
from kbserver.services.reviewing import versions
from kbserver.services.session import AgentSession, start_run
from tests.helpers import state


@pytest.fixture
def settings(settings_on_both_stores: Settings) -> Settings:
    """Every test here runs on both control stores (SQLite and PostgreSQL)."""
    return settings_on_both_stores


def _agent(services: Services, name: str, links: dict[str, str]) -> None:
    agents.create(services, ADMIN, name)
    for slug, perm in links.items():
        agents.link(services, ADMIN, name, slug, perm)


def test_the_default_kb_is_the_only_one_reached_or_written(services: Services, kb: str) -> None:
    kbs.create(services, ADMIN, "other")
    _agent(services, "bob", {kb: "read_write", "other": "read"})
    session = AgentSession(services, caller_for(services, "bob"))
    assert session.default_kb(None, writable=True) == kb  # dialects: the only writable KB
    with pytest.raises(InvalidRequest) as err:  # context tools: two KBs reached
        session.default_kb(None)
    assert err.value.details["kbs"] == [kb, "other"]
    assert session.default_kb("other") == "other"
    _agent(services, "nobody", {})
    with pytest.raises(InvalidRequest):
        AgentSession(services, caller_for(services, "nobody")).default_kb(None)


def test_writes_carry_the_run_only_for_mounted_kbs(services: Services, kb: str) -> None:
    _agent(services, "bob", {kb: "read_write"})
    bob = caller_for(services, "bob")
    run = start_run(services, bob)
    assert run is not None and set(run.mounts) == {kb} and start_run(services, ADMIN) is None
    kbs.create(services, ADMIN, "later")
    agents.link(services, ADMIN, "bob", "later", "read_write")
    session = AgentSession.of(services, caller_for(services, "bob"), run)
    for slug in (kb, "later"):
        out = session.submit(slug, [Create(path="a.md", mode="create", content="x")], None)
        assert isinstance(out, WriteResult)
    assert versions.listing(services, ADMIN, kb, limit=1).versions[0].run == run.id
    assert versions.listing(services, ADMIN, "later", limit=1).versions[0].run is None


def test_asking_agents_propose_in_a_run_and_are_told_how_outside_one(services: Services, kb: str) -> None:
    _agent(services, "asker", {kb: "read_write_ask"})
    asker = caller_for(services, "asker")
    change = [Create(path="p.md", mode="create", content="p")]
    before = state(services, kb)
    with pytest.raises(ApprovalUnavailable) as err:
        AgentSession(services, asker).submit(kb, change, None)
    assert "start_run" in err.value.message and err.value.details["slug"] == kb
    assert state(services, kb) == before
    out = AgentSession.of(services, asker, start_run(services, asker)).submit(kb, change, "why")
    assert isinstance(out, ProposalAccepted) and state(services, kb) == before


def test_an_agent_finds_its_own_write(services: Services, kb: str) -> None:
    _agent(services, "bob", {kb: "read_write"})
    session = AgentSession(services, caller_for(services, "bob"))
    session.submit(kb, [Create(path="n.md", mode="create", content="zebracrossing notes")], None)
    assert [h.path for h in session.search(kb, "zebracrossing").hits] == ["n.md"]


def test_tool_sets_are_checked_against_the_registry(services: Services) -> None:
    assert check_tool_sets(["context", "auto"]) == ("context", "auto")
    assert "write_context" in tools_of(["context"]) and "memory_add" in tools_of(["memory"])
    assert "store_memory" in tools_of(["semantic"]) and "memory_add" not in tools_of(["semantic"])
    for bad in (["nope"], ["context", "context"], []):
        with pytest.raises(InvalidRequest):
            check_tool_sets(bad)
    with pytest.raises(InvalidRequest) as err:
        agents.create(services, ADMIN, "bob", tools=["context", "nope"])
    assert "nope" in err.value.message and all(name in err.value.message for name in TOOL_SETS)
    assert agents.create(services, ADMIN, "bob", tools=["auto"])[0].tools == ["auto"]


def test_import_goes_through_the_write_path_and_respects_max_files(
    services: Services, tmp_path: Path
) -> None:
    folder = tmp_path / "src"
    (folder / "d").mkdir(parents=True)
    for i in range(5):
        (folder / "d" / f"n{i}.md").write_text(f"note {i}\n")
    kbs.create(services, ADMIN, "imp")
    kbs.set_limits(services, ADMIN, "imp", max_files=2)
    out = kbs.import_folder(services, ADMIN, "imp", folder)
    assert out.files == 5 and out.version == services.repos.repo("imp").head()
    page = versions.listing(services, ADMIN, "imp").versions
    assert [len(v.paths) for v in page[:3]] == [1, 2, 2]  # at most max_files per version
    assert all(v.kind == "human_edit" for v in page[:3])
    (folder / "big.md").write_text("x" * 300)
    kbs.set_limits(services, ADMIN, "imp", max_file_bytes=100)
    before = state(services, "imp")
    with pytest.raises(TooLarge):
        kbs.import_folder(services, ADMIN, "imp", folder)
    assert state(services, "imp") == before
