"""Authentication and permissions at the service layer."""

from __future__ import annotations

import pytest

from kbserver.config import Settings
from kbserver.core.errors import Forbidden, NotFound, Unauthorized
from kbserver.services import Services, kbs
from kbserver.services.access import agents
from kbserver.services.access.auth import (
    ADMIN,
    authenticate,
    caller_for,
    permission,
    require_read,
    require_write,
)

ADMIN_TOKEN = "the-admin-token"


@pytest.fixture
def settings(settings_on_both_stores: Settings) -> Settings:
    """Every test here runs on both control stores (SQLite and PostgreSQL)."""
    return settings_on_both_stores


def test_tokens_name_their_caller(services: Services, kb: str) -> None:
    _, token = agents.create(services, ADMIN, "bob")
    agents.link(services, ADMIN, "bob", kb, "read_write")
    bob = authenticate(services, token, ADMIN_TOKEN)
    assert (bob.name, bob.is_admin, bob.links, bob.actor) == ("bob", False, {kb: "read_write"}, "agent:bob")
    assert authenticate(services, ADMIN_TOKEN, ADMIN_TOKEN) == ADMIN and ADMIN.actor == "admin"
    for bad in (None, "", "kbs_not-a-token", ADMIN_TOKEN + "x"):
        with pytest.raises(Unauthorized):
            authenticate(services, bad, ADMIN_TOKEN)


def test_a_rotated_or_deleted_agents_token_stops_working(services: Services) -> None:
    _, old = agents.create(services, ADMIN, "bob")
    _, new = agents.rotate(services, ADMIN, "bob")
    with pytest.raises(Unauthorized):
        authenticate(services, old, ADMIN_TOKEN)
    assert authenticate(services, new, ADMIN_TOKEN).name == "bob"
    agents.delete(services, ADMIN, "bob")
    with pytest.raises(Unauthorized):
        authenticate(services, new, ADMIN_TOKEN)
    with pytest.raises(NotFound):
        caller_for(services, "bob")


def test_a_kb_out_of_reach_looks_like_one_that_does_not_exist(services: Services, kb: str) -> None:
    kbs.create(services, ADMIN, "other")
    agents.create(services, ADMIN, "bob")
    agents.link(services, ADMIN, "bob", kb, "read")
    bob = caller_for(services, "bob")
    with pytest.raises(NotFound) as hidden:
        require_read(services, bob, "other")
    with pytest.raises(NotFound) as missing:
        require_read(services, bob, "nope")
    assert hidden.value.message.replace("other", "X") == missing.value.message.replace("nope", "X")
    assert require_read(services, bob, kb) == "read" and permission(bob, "other") is None
    with pytest.raises(Forbidden):
        require_write(services, bob, kb)
    assert permission(ADMIN, "other") == "admin" and require_write(services, ADMIN, "other") is None
    assert kbs.slugs(services, bob) == [kb] and kbs.slugs(services, ADMIN) == sorted([kb, "other"])
