"""The web admin's forms pass the one input check the API and MCP pass (kbserver.core.inputs): a NUL
in any field is 400 `invalid_request` before any store sees it, on both control stores, and nothing
changes (SQLite would have stored a rejection reason with NUL in it; PostgreSQL cannot)."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from kbserver.config import Settings
from kbserver.services import Services
from tests.helpers import pending_proposal, state


@pytest.fixture
def settings(settings_on_both_stores: Settings) -> Settings:
    return settings_on_both_stores


def test_a_nul_in_a_form_field_is_refused_and_changes_nothing(
    web: tuple[TestClient, str], services: Services, kb: str
) -> None:
    client, csrf = web
    pid = pending_proposal(services, kb)
    before = state(services, kb), services.control.proposal(kb, pid), services.control.agents()
    for url, form in (
        (f"/admin/kbs/{kb}/proposals/{pid}/reject", {"reason": "not this\x00one"}),
        ("/admin/agents", {"name": "eve", "parent": "asker\x00"}),
        (f"/admin/kbs/{kb}/publish", {"path": "a.md", "content": "text\n", "message": "by \x00hand"}),
    ):
        r = client.post(url, data={"csrf": csrf, **form}, follow_redirects=False)
        assert r.status_code == 400, (url, r.status_code, r.text[-500:])
        assert "NUL" in r.text, url
    assert (state(services, kb), services.control.proposal(kb, pid), services.control.agents()) == before
