"""An agent deleted and made again under the same name is another agent: it inherits none of the old
one's runs and proposals (bound to the agent's id, not its name), on both control stores; the admin
still sees and decides the old proposals."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from kbserver.app import create_app
from kbserver.config import Settings
from kbserver.core.errors import NotFound
from kbserver.core.model import Create, WriteRequest
from kbserver.services import Services
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.models import ProposalAccepted
from kbserver.services.reading import runs
from kbserver.services.writing import asks, proposals, writes
from tests.helpers import make_agent


@pytest.fixture
def settings(settings_on_both_stores: Settings) -> Settings:
    return settings_on_both_stores


def test_a_new_agent_of_an_old_name_inherits_nothing(settings: Settings, services: Services, kb: str) -> None:
    make_agent(services, "bob", {kb: "read_write_ask"})
    old = caller_for(services, "bob")
    run = runs.start(services, old, interactive=True)
    req = WriteRequest(files=[Create(path="idea.md", mode="create", content="an idea\n")], run_id=run.id)
    out = writes.submit(services, old, kb, req)
    assert isinstance(out, ProposalAccepted)
    pid = out.proposal.id
    assert runs.owned_run(services, old, run.id).id == run.id
    assert asks.find(services, old, pid).id == pid

    agents.delete(services, ADMIN, "bob")
    headers = make_agent(services, "bob", {kb: "read_write_ask"})
    new = caller_for(services, "bob")
    with pytest.raises(NotFound):
        runs.owned_run(services, new, run.id)
    with pytest.raises(NotFound):
        asks.find(services, new, pid)
    with pytest.raises(NotFound):
        proposals.get(services, new, kb, pid)
    assert proposals.listing(services, new, kb).proposals == []
    assert [p.id for p in proposals.listing(services, ADMIN, kb).proposals] == [pid]  # the admin's still
    assert new.agent_id and new.agent_id != old.agent_id

    with TestClient(create_app(settings, services), raise_server_exceptions=False) as client:
        files = client.get(f"/api/v1/runs/{run.id}/kbs/{kb}/files", headers=headers)
        assert files.status_code == 404 and files.json()["error"]["code"] == "not_found"
        write = client.post(
            f"/api/v1/kbs/{kb}/write",
            headers=headers,
            json={"run_id": run.id, "files": [{"path": "x.md", "mode": "create", "content": "x\n"}]},
        )
        assert write.status_code == 404, write.text
        listed = client.get(f"/api/v1/kbs/{kb}/proposals", headers=headers)
        assert listed.status_code in (200, 403) and pid not in listed.text
    # The new bob's own run and proposal are its own.
    mine = runs.start(services, new, interactive=True)
    again = writes.submit(services, new, kb, req.model_copy(update={"run_id": mine.id}))
    assert isinstance(again, ProposalAccepted)
    assert [p.id for p in proposals.listing(services, new, kb).proposals] == [again.proposal.id]
